"""Changes a running browser applies before its record says so (sessions.update): a new viewport, and a profile
given to a session that has none. Each is its driver's to apply, outside the database's lock (a browser started
again takes seconds); when it refuses or fails, the record is left as it was.

A recording keeps the size it started with, so a new viewport is refused while one runs, unless `force`
(Kernel's rule): then the recording is stopped (a replay of its own) and a new one starts at the new size, with
the same framerate and maximum duration, as Kernel's separate segments.
"""
import contextlib
import logging
import threading

from app.browsers import replays
from app.browsers.drivers import driver_named
from app.browsers.models import Replay
from app.core.errors import ApiError, conflict

logger = logging.getLogger(__name__)

# Sessions with a change under way in this process. Two profiles loaded at once would both reach the browser while
# the record names one (and save_changes would save one's cookies into the other): one change at a time. The host
# refuses a second profile too (its own check, whatever process sent it).
_changing = set()
_changing_lock = threading.Lock()
CHANGE_RETRY_SECONDS = 2


@contextlib.contextmanager
def one_change_at_a_time(session_id):
    """Held while a change reaches the running browser; 409 browser_changing (retryable) while another is."""
    with _changing_lock:
        if session_id in _changing:
            raise conflict("browser_changing", f"Browser session {session_id!r} is taking another change to its "
                           "running browser; retry once it is done.", retry_after=CHANGE_RETRY_SECONDS)
        _changing.add(session_id)
    try:
        yield
    finally:
        with _changing_lock:
            _changing.discard(session_id)


def resize(session, viewport):
    """Give the running browser `viewport` ({width, height, refresh_rate?, force?})."""
    had = session.options.get("viewport") or {}
    if (had.get("width"), had.get("height")) == (viewport["width"], viewport["height"]):
        return  # nothing to change: a recording goes on
    force = bool(viewport.get("force"))
    recording = list(Replay.select().where((Replay.session == session.id) & (Replay.status == Replay.RECORDING)))
    if recording and not force:
        raise conflict("replay_in_progress", f"Browser session {session.id!r} is being recorded (replay "
                       f"{recording[0].id!r}), at the size it had: stop the recording first, or send viewport.force "
                       "true to stop it and record the new size as a new replay.")
    for replay in recording:
        replays.stop(session, replay.id)
    try:
        driver_named(session.driver).resize(session, viewport, force=force)
    finally:
        for replay in recording:  # at the new size, or at the old one when the change failed
            try:
                replays.start(session, replay.framerate, replay.max_duration_seconds)
            except ApiError as error:
                logger.warning("session %s: the recording after a resize did not start: %s", session.id, error)


def load_profile(session, profile):
    """Give the running browser `profile`'s cookies and localStorage."""
    driver_named(session.driver).load_profile(session, profile)
