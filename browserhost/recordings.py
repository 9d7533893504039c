"""A session's recordings (replays.py records): started and stopped at the app's asking, each handed on to the app
once finished (replays.send) and then forgotten. They end with their session (registry.stop_recordings).
"""
import logging
import subprocess

from browserhost import page_input, replays
from browserhost.cdp import CdpError
from browserhost.registry import NOT_HERE
from lantern_wire import control

logger = logging.getLogger(__name__)
# How long a finished recording is offered to the app while it does not answer, before it is given up.
REPLAY_UPLOAD_SECONDS = 600


class Recordings:
    def __init__(self, registry, client):
        """`registry`: the host's registry.Registry (recordings are written in its replays/ folder); `client`: an
        uplink.AppClient."""
        self.registry, self.client = registry, client

    def start_replay(self, hosted, start: control.ReplayStart):
        """(status, answer) for POST /sessions/{id}/replays."""
        start = control.ReplayStart.model_validate(start)
        if hosted.browser is None or hosted.stopping:
            return 404, NOT_HERE
        with hosted.recording_lock:
            return self._start(hosted, start)

    def _start(self, hosted, start):
        replay_id = start.replay_id
        if replay_id in hosted.recordings:
            return 400, {"code": "bad_request", "message": f"replay id {replay_id!r} is not a new one"}
        if any(not recording.finished.is_set() for recording in hosted.recordings.values()):
            return 409, {"code": "replay_in_progress", "message": "The session is already being recorded; stop that "
                                                                 "recording first."}
        try:
            target, offset = hosted.screen.place()
        except page_input.UnknownPlace as error:
            return 502, {"code": "browser_unreachable", "message": f"The browser's page could not be recorded: {error}"}
        except (CdpError, OSError, ValueError) as error:
            logger.warning("session %s: no recording: the page could not be reached (%s: %s)", hosted.session_id,
                           type(error).__name__, error)  # this host's log alone, as for the computer API
            return 502, {"code": "browser_unreachable", "message": "The browser's page could not be reached."}
        options = {"size": hosted.screen.size, "framerate": start.framerate, "max_seconds": start.max_seconds,
                   "max_bytes": start.max_bytes,
                   "on_finished": lambda recording: self._hand_on(hosted, recording)}
        path = self.registry.root / "replays" / f"{hosted.session_id}-{replay_id}.mp4"
        if offset is None:
            recording = replays.ScreencastRecording(replay_id, path, devtools=hosted.browser.devtools, target=target,
                                                    **options)
        else:
            recording = replays.DisplayRecording(replay_id, path, display=hosted.screen.display.name, offset=offset,
                                                 **options)
        hosted.recordings[replay_id] = recording  # before it starts: one that fails at once is handed on and forgotten
        try:
            recording.start(_spawner(hosted, {"DISPLAY": recording.display} if offset is not None else {}))
        except (CdpError, OSError) as error:
            hosted.recordings.pop(replay_id, None)
            logger.warning("session %s: recording %s could not start (%s: %s)", hosted.session_id, replay_id,
                           type(error).__name__, error)  # this host's log alone: it names the host's files
            return 502, {"code": "replay_failed", "message": "The recording could not start."}
        self.registry.note(hosted, f"recording {replay_id} started ({recording.framerate} fps, at most "
                                   f"{recording.max_seconds} s)")
        return 201, {"started_at": recording.started_at}

    def stop_replay(self, hosted, replay_id):
        """(status, answer) for POST /sessions/{id}/replays/{replay_id}/stop: once the recording is written and
        offered to the app."""
        recording = hosted.recordings.get(replay_id)
        if recording is None:
            return 404, {"code": "not_found", "message": f"No recording {replay_id} on this host (it has ended)."}
        handed_on = recording.stop(timeout=replays.STOP_GRACE_SECONDS * 3)
        return 200, {"handed_on": handed_on}

    def _hand_on(self, hosted, recording):
        """Send a finished recording to the app (replays.send), say how it went in the session's log, forget it."""
        try:
            status, error = replays.send(self.client, recording, give_up_after=REPLAY_UPLOAD_SECONDS)
            if error:
                self.registry.note(hosted, f"recording {recording.replay_id} failed: {error}", level=logging.WARNING)
            elif status == "saved":
                self.registry.note(hosted, f"recording {recording.replay_id} saved ({recording.written} bytes, "
                                           f"{recording.finished_at - recording.started_at:.1f} s)")
        finally:
            for leftover in (recording.path, recording.path.with_suffix(".log")):
                leftover.unlink(missing_ok=True)
            hosted.recordings.pop(recording.replay_id, None)


def _spawner(hosted, variables):
    """How a session's recordings run ffmpeg: as the host's helper in its box (its sandbox, or this host without
    one), outside the session's machine."""
    def spawn(argv, errors):
        pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": errors}
        return hosted.box.helper(argv, variables, **pipes)

    return spawn
