"""A recording's bounds and endings on the host (browserhost/replays.py), with a stand-in for ffmpeg; real
recordings are tested on real browsers (tests/browsers/live/test_computer.py)."""
import subprocess
import time
from types import SimpleNamespace
from urllib.parse import parse_qs, urlsplit

from browserhost import replays
from browserhost.uplink import AppClient
from lantern_wire.hosts import REPLAYS
from tests.fakes import LocalServer
from tests.live_server import free_port


def recording(tmp_path, script, finished, **options):
    """A DisplayRecording whose 'ffmpeg' is the shell `script` (its stdout is the video)."""
    def spawn(argv, errors):
        assert argv[0] == "ffmpeg" and "-t" in argv and "libx264" in argv
        return subprocess.Popen(["sh", "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors)

    made = replays.DisplayRecording("r1", tmp_path / "r1.mp4", display=":99", offset=(0, 87), size=(1281, 800),
                                    framerate=25, max_seconds=60, on_finished=finished.append,
                                    **{"max_bytes": 1 << 20, **options})
    return made.start(spawn)


def test_a_recording_keeps_at_most_its_bytes_and_stops_itself(tmp_path):
    finished = []
    made = recording(tmp_path, "head -c 3000000 /dev/zero; read quit", finished, max_bytes=100_000)
    assert made.finished.wait(15)  # past the bound it asked its encoder to quit (q)
    assert finished == [made] and made.error is None
    assert made.written == 100_000 and (tmp_path / "r1.mp4").stat().st_size == 100_000
    assert made.finished_at >= made.started_at


def test_an_encoder_that_fails_says_why_and_one_that_wrote_nothing_too(tmp_path):
    finished = []
    failed = recording(tmp_path, "echo 'Cannot open display :99' >&2; exit 1", finished)
    assert failed.finished.wait(15) and "Cannot open display :99" in failed.error
    silent = recording(tmp_path, "read line", finished)  # ends when asked ('q'), having written nothing
    assert silent.stop() and "wrote nothing" in silent.error
    assert finished == [failed, silent]


def test_the_video_is_x264_of_an_even_size_in_fragments():
    arguments = replays.encoder_arguments(1281, 801, 25, 60)
    assert "scale=1280:800" in arguments and arguments[arguments.index("-g") + 1] == "50"
    assert "frag_keyframe+empty_moov+default_base_moof" in arguments and arguments[-1] == "pipe:1"


class Proxy(LocalServer):
    """A stand-in for a reverse proxy before the app: it refuses a PUT whose body is past `limit` with its own HTML
    page as nginx does (answered at once, the connection closed unread), takes smaller ones as the app would, and
    answers 503 to the first `unavailable` requests."""

    protocol = "HTTP/1.1"

    def __init__(self, limit, unavailable=0):
        super().__init__()
        self.limit, self.unavailable = limit, unavailable
        self.puts = []  # (path with its query, the body's length)
        self.start(("127.0.0.1", 0))

    def put(self, handler):
        length = int(handler.headers["Content-Length"])
        self.puts.append((handler.path, length))
        if self.unavailable:
            self.unavailable -= 1
            handler.rfile.read(length)
            return handler.answer(503, b"<html>503</html>", "text/html")
        if length > self.limit:
            handler.close_connection = True
            return handler.answer(413, b"<html><h1>413 Request Entity Too Large</h1></html>", "text/html")
        handler.rfile.read(length)
        handler.answer(200, {"status": "failed" if "error=" in handler.path else "saved"})


def ended_recording(tmp_path, size):
    video = tmp_path / "r1.mp4"
    video.write_bytes(b"\0" * size)
    return SimpleNamespace(replay_id="r1", path=video, started_at=1700000000.5, finished_at=1700000002.5, error=None)


def test_an_upload_a_proxy_refuses_is_sent_at_once_as_the_recordings_failure(tmp_path):
    """Taken for an outage (nginx closes a 413's connection unread), or forgotten, it left the replay `saving` until
    the app gave up on it, 75 minutes later."""
    proxy = Proxy(limit=1 << 20)
    client = AppClient(proxy.url, "lbh_test")
    try:
        status, error = replays.send(client, ended_recording(tmp_path, 16 << 20), give_up_after=600)
    finally:
        client.close()
        proxy.stop()
    assert status == "failed" and "413" in error
    (video, video_size), (failure, failure_size) = proxy.puts  # a refused upload is not tried again
    assert video.startswith(f"{REPLAYS}/r1?started_at=1700000000.5") and video_size == 16 << 20
    query = parse_qs(urlsplit(failure).query)
    assert failure_size == 0 and "413" in query["error"][0] and query["finished_at"] == ["1700000002.500000"]


def test_an_upload_is_tried_again_only_while_it_can_succeed(tmp_path):
    proxy = Proxy(limit=1 << 20, unavailable=2)  # a 5xx, an app restarting: it may take it later
    client = AppClient(proxy.url, "lbh_test")
    try:
        assert replays.send(client, ended_recording(tmp_path, 1000), give_up_after=600) == ("saved", None)
    finally:
        client.close()
        proxy.stop()
    assert [length for _, length in proxy.puts] == [1000] * 3  # the whole video each time, from its start
    gone = AppClient(f"http://127.0.0.1:{free_port()}", "lbh_test")  # nobody there, past the deadline: given up
    started = time.monotonic()
    status, error = replays.send(gone, ended_recording(tmp_path, 1000), give_up_after=0)
    assert status is None and "could not be uploaded for 0 s" in error and time.monotonic() - started < 2
