"""Recordings of a session's screen (the replays API): MP4, H.264, made by Debian's ffmpeg inside the
session's sandbox (its user, namespaces and cgroup), whose output this host writes to its replays folder.

What is recorded is the computer API's screen (computer.py): the active page's viewport when the recording
starts. A headful session's recording grabs its X display there (x11grab), so it shows what a person would
see, native pop-ups included; a headless one is fed the page's screencast (`Page.startScreencast`: a JPEG
frame whenever the page changes), the newest frame written again at every tick of the framerate, so both
play for the time they recorded at the framerate asked. The MP4 is fragmented (a fragment every two
seconds): ffmpeg writes it as a stream, and one cut short still plays up to its last whole fragment.

A recording ends when it is stopped, at its `max_seconds` (ffmpeg's own -t; a headless one's feeder ends its
input there too, stamping its end), once it has written
`max_bytes` (the rest is not kept), when its encoder fails, or with its session; then `on_finished` is
called once with it, from its own thread, which sends it to the app (`send`).
"""
import base64
import io
import logging
import os
import threading
import time
from urllib.parse import urlencode

from browserhost import bounded
from browserhost.cdp import CdpClient, CdpError
from browserhost.uplink import AppUnreachable, Refused
from lantern_wire.hosts import REPLAYS
from lantern_wire.reports import MAX_UPLOAD_ERROR, ReplayUpload

logger = logging.getLogger(__name__)
CHUNK = 256 * 1024
STOP_GRACE_SECONDS = 10  # for ffmpeg to write its last fragment once asked to stop
JPEG_QUALITY = 80
# Of ffmpeg's stderr (-loglevel error: a line per error), what the host's <replay>.log keeps, and reads back.
ERROR_LOG_BYTES = 64 * 1024
ERROR_TAIL_CHARS = 1024


def encoder_arguments(width, height, framerate, max_seconds):
    """ffmpeg's output options: H.264 of an even size (x264 needs one), a keyframe (and so a fragment) every
    two seconds, yuv420p for every player, fragmented MP4 on stdout. No look-ahead (zerolatency): each frame is
    encoded as it comes, so the encoder keeps up with the screen and is done soon after the last frame."""
    return ["-t", str(max_seconds), "-an", "-vf", f"scale={width - width % 2}:{height - height % 2}",
            "-c:v", "libx264", "-preset", "veryfast", "-tune", "zerolatency", "-g", str(2 * framerate),
            "-pix_fmt", "yuv420p", "-movflags", "frag_keyframe+empty_moov+default_base_moof", "-f", "mp4", "pipe:1"]


class Recording:
    """One recording; `start(spawn)` runs its encoder through `spawn(argv, errors)` (a subprocess.Popen with
    stdin and stdout piped and stderr to `errors`, a pipe's end whose other end the host reads into <replay>.log,
    bounded: never a file of the host's), `stop()` ends it and waits until it is written."""

    def __init__(self, replay_id, path, *, size, framerate, max_seconds, max_bytes, on_finished):
        self.replay_id, self.path = replay_id, path
        self.size, self.framerate, self.max_seconds, self.max_bytes = size, framerate, max_seconds, max_bytes
        self.on_finished = on_finished
        self.started_at = self.finished_at = None
        self.written = 0
        self.error = None
        self.finished = threading.Event()  # set once on_finished returned
        self._stopping = threading.Event()
        self._process = None
        self._errors = None  # the bounded.LogPump of its stderr

    def input_arguments(self):
        raise NotImplementedError

    def start(self, spawn):
        argv = ["ffmpeg", "-loglevel", "error", "-nostats", *self.input_arguments(),
                *encoder_arguments(*self.size, self.framerate, self.max_seconds)]
        self.path.with_suffix(".log").unlink(missing_ok=True)
        errors, self._errors = bounded.pipe_to_log(self.path.with_suffix(".log"), ERROR_LOG_BYTES)
        try:
            self._process = spawn(argv, errors)
        finally:
            os.close(errors)  # ffmpeg has it: its end closes the pipe
        self.started_at = time.time()
        threading.Thread(target=self._write, name=f"replay-{self.replay_id}", daemon=True).start()
        return self

    def stop(self, timeout=STOP_GRACE_SECONDS * 2):
        """Ask the encoder to finish and wait (up to `timeout`) until the recording is written and handed on."""
        if not self._stopping.is_set():
            self.finished_at = time.time()  # what comes after is ffmpeg finishing, not recording
            self._stopping.set()
            self._ask_to_finish()
            deadline = threading.Timer(STOP_GRACE_SECONDS, self._kill_if_running)
            deadline.daemon = True
            deadline.start()
        return self.finished.wait(timeout)

    def _ask_to_finish(self):
        raise NotImplementedError

    def _kill_if_running(self):
        if self._process.poll() is None:
            logger.warning("replay %s: ffmpeg did not finish within %s s; killed", self.replay_id, STOP_GRACE_SECONDS)
            self._process.kill()

    def _write(self):
        """Copy the encoder's MP4 into the file, up to max_bytes, until it ends; then hand the recording on."""
        try:
            with open(self.path, "wb") as out, self._process.stdout as video:
                while chunk := video.read1(CHUNK):
                    room = self.max_bytes - self.written
                    if room <= 0:
                        continue  # past the bound: read on (the encoder must not block) and keep nothing
                    out.write(chunk[:room])
                    self.written += min(len(chunk), room)
                    if self.written >= self.max_bytes:
                        logger.info("replay %s reached its %s bytes; it stops", self.replay_id, self.max_bytes)
                        threading.Thread(target=self.stop, daemon=True).start()
            status = self._process.wait()
            self._errors.wait(STOP_GRACE_SECONDS)  # what it said, before it is read
            if status and not self._stopping.is_set():
                self.error = f"ffmpeg exited with status {status}: {self._error_tail()}"
            elif self.written == 0:
                self.error = f"ffmpeg wrote nothing: {self._error_tail() or 'no frame came'}"
        except OSError as error:
            self.error = f"writing the recording failed: {error}"
        finally:
            self.finished_at = self.finished_at or time.time()  # it ended by itself (its max duration, a failure)
            self._stopping.set()
            self._ask_to_finish()
            try:
                self.on_finished(self)
            finally:
                self.finished.set()

    def _error_tail(self):
        return bounded.tail(self.path.with_suffix(".log"), ERROR_TAIL_CHARS).strip()[-300:]


class DisplayRecording(Recording):
    """A headful session's X display, from the page's place on it (`offset`), ffmpeg grabbing it itself."""

    def __init__(self, replay_id, path, *, display, offset, **options):
        super().__init__(replay_id, path, **options)
        self.display, self.offset = display, offset

    def input_arguments(self):
        width, height = self.size
        return ["-f", "x11grab", "-draw_mouse", "1", "-framerate", str(self.framerate),
                "-video_size", f"{width}x{height}", "-i", f"{self.display}+{self.offset[0]},{self.offset[1]}"]

    def _ask_to_finish(self):
        try:  # ffmpeg's own key for "finish the output and quit"
            self._process.stdin.write(b"q")
            self._process.stdin.close()
        except (OSError, ValueError):
            pass


class ScreencastRecording(Recording):
    """A headless session's page (`target`), through its screencast, fed to ffmpeg at the framerate."""

    def __init__(self, replay_id, path, *, devtools, target, **options):
        super().__init__(replay_id, path, **options)
        self.devtools, self.target = devtools, target
        self._frame = None
        self._cdp = None

    def input_arguments(self):
        # No probing: by default ffmpeg reads 5 s of frames before it encodes any, and so ended a 2 s recording
        # 5 s after it began; the frames' size and rate are all there is to learn, and the first frame says them.
        return ["-probesize", "32", "-analyzeduration", "0", "-f", "image2pipe", "-framerate", str(self.framerate),
                "-c:v", "mjpeg", "-i", "pipe:0"]

    def start(self, spawn):
        self._cdp = CdpClient(self.devtools)
        try:
            session = self._cdp.call("Target.attachToTarget", {"targetId": self.target, "flatten": True})["sessionId"]
            # What the page shows now: the screencast sends a frame only when something changes.
            first = self._cdp.call("Page.captureScreenshot", {"format": "jpeg", "quality": JPEG_QUALITY},
                                   session_id=session)
            self._frame = base64.b64decode(first["data"])
            self._cdp.on("Page.screencastFrame", self._on_frame)
            width, height = self.size
            self._cdp.call("Page.startScreencast", {"format": "jpeg", "quality": JPEG_QUALITY, "maxWidth": width,
                                                    "maxHeight": height}, session_id=session)
        except (CdpError, OSError):
            self._cdp.close()
            raise
        super().start(spawn)
        threading.Thread(target=self._feed, name=f"replay-feed-{self.replay_id}", daemon=True).start()
        return self

    def _on_frame(self, params, session_id):
        self._frame = base64.b64decode(params["data"])
        self._cdp.send("Page.screencastFrameAck", {"sessionId": params["sessionId"]}, session_id=session_id)

    def _feed(self):
        """The newest frame at every tick, for at most max_seconds: the video's time is the time recorded, and it
        ends when its last frame has had its time (ffmpeg then finishes at the end of its input)."""
        tick = 1 / self.framerate
        due = time.monotonic()
        try:
            for _ in range(self.framerate * self.max_seconds):
                if self._stopping.is_set():
                    break
                self._process.stdin.write(self._frame)
                due += tick
                self._stopping.wait(max(0.0, due - time.monotonic()))
            else:
                self.finished_at = self.finished_at or time.time()
        except (OSError, ValueError):  # ffmpeg ended (it failed): _write says why
            pass
        finally:
            self._cdp.close()
            try:
                self._process.stdin.close()
            except (OSError, ValueError):
                pass

    def _ask_to_finish(self):
        pass  # the feeder sees _stopping and closes ffmpeg's input, which ends it


def send(client, recording, *, give_up_after):
    """Send an ended recording to the app (`client`: uplink.AppClient): its video, or why there is none.
    (what the app made of it: "saved", "failed" or None when it could not be told; the error it was told or None).

    Only what can succeed later is tried again (the client's retry policy): no answer, or a 5xx, for `give_up_after`
    seconds. An upload the app or a proxy refuses (a 413 past a proxy's body limit) will be refused again: its
    refusal is sent at once as the recording's error, so the replay says `failed` and why within seconds, not once
    the app gives up.
    """
    deadline = time.monotonic() + give_up_after
    error = recording.error
    if not error:
        try:
            return _put(client, recording, None, give_up_after), None
        except Refused as refusal:
            logger.error("the app refused recording %s: %s", recording.replay_id, refusal)
            error = f"the upload of its video was refused ({refusal})"
        except AppUnreachable as unreachable:
            logger.error("recording %s is given up: the app did not take it (%s)", recording.replay_id, unreachable)
            error = f"its video could not be uploaded for {give_up_after} s ({unreachable})"
    try:  # with no body to hold it up; once at least, for the time left
        return _put(client, recording, error, max(0.0, deadline - time.monotonic())), error
    except (Refused, AppUnreachable) as failure:  # (the credential, the replay gone, the app away)
        logger.error("the app was not told recording %s failed: %s", recording.replay_id, failure)
        return None, error


def _put(client, recording, error, patience):
    upload = ReplayUpload(started_at=recording.started_at, finished_at=recording.finished_at,
                          error=error and error[:MAX_UPLOAD_ERROR])
    path = f"{REPLAYS}/{recording.replay_id}?{urlencode(upload.query())}"
    if error:
        answer = client.put_file(path, io.BytesIO(), "video/mp4", patience=patience)
    else:
        with open(recording.path, "rb") as video:
            answer = client.put_file(path, video, "video/mp4", patience=patience)
    return (answer or {}).get("status")
