"""A recording's bounds and endings on the host (browserhost/replays.py), with a stand-in for ffmpeg; real
recordings are tested on real browsers (tests/browsers/live/test_computer.py)."""
import subprocess

from browserhost import replays


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
