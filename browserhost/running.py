"""What the app asks of a running browser: a new viewport (its windows resized, or Chromium started again on a larger
screen with its tabs, cookies and localStorage: reshape.py), a profile given while it runs, and the computer API's
actions (computer.py). Each answers (status, answer).
"""
import logging
import time
from dataclasses import replace

from browserhost import computer, launch_options, profile_state, reshape, storage
from browserhost.cdp import CdpClient, CdpError
from browserhost.registry import NOT_HERE
from browserhost.starts import start_failure, time_left
from lantern_wire import control
from lantern_wire.hosts import ENDED_BY_BROWSER_EXIT

logger = logging.getLogger(__name__)
# How long a restart (a new viewport) may take to read the browser's tabs and storage.
READ_SECONDS = 10


class RunningChanges:
    def __init__(self, registry, starts):
        """`registry`: the host's registry.Registry; `starts`: its starts.Starts (a restart starts Chromium again)."""
        self.registry, self.starts = registry, starts

    def computer(self, hosted, request: control.ComputerRequest):
        """(status, answer) for POST /sessions/{id}/computer; `request.resend`: the client sent the same call again
        after giving up waiting (computer.Screen.run answers it from the first)."""
        refused = _not_changeable(hosted)  # a browser starting (again) has no screen to act on yet: 409, retried
        if refused:
            return refused
        try:
            return 200, {"results": hosted.screen.run(request.actions, resend=request.resend)}
        except computer.ActionFailed as error:
            if error.detail:  # this host's log alone: the session's log is its user's to read
                logger.warning("session %s: %s (%s)", hosted.session_id, error, error.detail)
            return error.status, {"code": "computer_action_failed", "index": error.index, "message": str(error)}

    def resize(self, hosted, change: control.ViewportChange):
        """(status, answer) for PUT /sessions/{id}/viewport. Its windows take the new size where its screen holds
        it; else, when `change.restart` allows it, Chromium starts again on a screen of that size, with its tabs,
        cookies and localStorage."""
        change = control.ViewportChange.model_validate(change)
        viewport = change.size
        with hosted.recording_lock:  # no recording starts meanwhile
            refused = _not_changeable(hosted)
            if refused:
                return refused
            if any(not recording.finished.is_set() for recording in hosted.recordings.values()):
                return 409, {"code": "replay_in_progress", "message": "The session is being recorded, at the size "
                             "it had: stop the recording first."}
            if viewport == hosted.options.viewport:
                return 200, {"restarted": False}
            if _screen_holds(hosted, viewport):
                try:
                    hosted.browser.fit(viewport, settle=True)
                except (CdpError, OSError) as error:
                    logger.warning("session %s: resizing failed: %s", hosted.session_id, error)
                    return 502, {"code": "browser_unreachable", "message": "The browser's windows could not be "
                                                                           "resized."}
                _sized(hosted, viewport)
                self.registry.note(hosted, f"viewport now {viewport[0]}x{viewport[1]}")
                return 200, {"restarted": False}
            if not change.restart:
                why = "is a kiosk: its screen is its viewport" if launch_options.kiosk(hosted.options) else \
                    "has a screen smaller than that"
                return 409, {"code": "viewport_needs_restart", "message": f"The session {why}, and a screen cannot "
                             "change while its browser runs: the browser must start again (its tabs, cookies and "
                             "localStorage are kept; CDP connections and live views are closed). Send viewport.force "
                             "true to allow it."}
            return self._restart(hosted, viewport, change.start_seconds)

    def _restart(self, hosted, viewport, start_seconds):
        """Chromium started again at `viewport`, with the default context's tabs (their URLs), cookies and
        localStorage; (status, answer). A start that fails ends the session."""
        registry, note = self.registry, self.registry.note
        with registry.lock:  # from now on a stop waits for it (Registry.stop_browser)
            if hosted.stopping:
                return 404, NOT_HERE
            hosted.restarting = True
            hosted.start_deadline = time.monotonic() + start_seconds + READ_SECONDS
        old = hosted.browser
        try:
            with CdpClient(old.devtools, timeout=READ_SECONDS) as cdp:
                urls = reshape.tabs(cdp, old.devtools.get_json("/json/list"))
                state = profile_state.read(hosted, cdp, note)
        except (CdpError, OSError, ValueError) as error:
            logger.warning("session %s: no restart: its tabs and storage could not be read (%s)", hosted.session_id,
                           error)
            with registry.lock:
                hosted.restarting = False
                exited = not old.alive and not hosted.stopping
                hosted.stopping = hosted.stopping or exited
            if exited:  # its watch saw it exit while restarting and left it: it is ours to end
                registry.end(hosted, ENDED_BY_BROWSER_EXIT)
                return 500, {"code": "browser_start_failed", "message": "The browser exited while its tabs were "
                             "read; the session has ended."}
            return 502, {"code": "browser_unreachable", "message": "The browser's tabs and storage could not be "
                                                                   "read; nothing changed."}
        note(hosted, f"Chromium starts again for a viewport of {viewport[0]}x{viewport[1]} ({len(urls)} tabs kept)")
        try:
            registry.stop_chromium(hosted)
            hosted.start_deadline = time.monotonic() + start_seconds
            self.starts.start_chromium(hosted, replace(hosted.options, viewport=viewport, display=None))
            profile_state.load(hosted, state, time_left(hosted, "loading its storage"), note)
            self.starts.start_capture(hosted)
            with CdpClient(hosted.browser.devtools, timeout=time_left(hosted, "opening its tabs")) as cdp:
                reshape.reopen(cdp, urls, timeout=time_left(hosted, "opening its tabs"))
        except Exception as error:  # noqa: BLE001 - whatever failed, the session has no browser left
            logger.exception("session %s: starting Chromium again failed", hosted.session_id)
            with registry.lock:
                hosted.restarting, hosted.stopping = False, True
            registry.end(hosted, ENDED_BY_BROWSER_EXIT)
            return 500, {"code": "browser_start_failed", "message": "The browser could not start again at the new "
                         f"size ({start_failure(error)}); the session has ended."}
        _sized(hosted, viewport)
        with registry.lock:
            hosted.restarting = False
            stopped_meanwhile = hosted.stopping
        if stopped_meanwhile:  # its end came while it started again: it is ours to end, with the stop's reason
            registry.end(hosted)
            return 404, {"code": "not_found", "message": "The session ended while its browser started again."}
        registry.watch_in_background(hosted)
        note(hosted, f"Chromium started again: pid {hosted.browser.pid}, viewport {viewport[0]}x{viewport[1]}")
        return 200, {"restarted": True}

    def load_profile(self, hosted, load: control.ProfileLoad):
        """(status, answer) for POST /sessions/{id}/profile: its state given to the running browser (its origins are
        read back at the end, as a profile given at the start)."""
        load = control.ProfileLoad.model_validate(load)
        with self.registry.lock:
            refused = _not_changeable(hosted)
            if refused:
                return refused
            if hosted.profile_given:
                return 409, {"code": "profile_already_loaded", "message": "The browser has been given a profile "
                             "already; it cannot take another."}
            hosted.profile_given = True
        state = load.profile_state
        try:
            profile_state.load(hosted, state, storage.PAGE_TIMEOUT * 4, self.registry.note)
        except (CdpError, OSError) as error:
            logger.warning("session %s: loading a profile failed: %s", hosted.session_id, error)
            with self.registry.lock:  # nothing of it is the record's: the same request may come again
                hosted.profile_given = False
            return 502, {"code": "browser_unreachable", "message": "The profile could not be loaded into the browser."}
        cookies, origins = len(state.get("cookies") or ()), len(state.get("origins") or ())
        self.registry.note(hosted, f"profile loaded: {cookies} cookies, localStorage of {origins} origins")
        return 200, control.ProfileLoaded(cookies=cookies, origins=origins).model_dump()


def _not_changeable(hosted):
    """(status, answer) refusing a change to a browser that is not running as it is: ended or ending (404), or
    starting, or starting again for a new viewport (409 browser_restarting: worth retrying); else None."""
    if hosted.stopping:
        return 404, NOT_HERE
    if hosted.starting or hosted.restarting or hosted.browser is None:
        return 409, {"code": "browser_restarting", "message": "The browser is starting (again); retry once it runs."}
    return None


def _screen_holds(hosted, viewport):
    """Whether the session's X screen (a headful one's, as Xvfb started it) is large enough for a window of
    `viewport` (the screen a start of that size would have fits in it). A kiosk's window fills its screen: any
    other size needs another."""
    options = hosted.options
    if not launch_options.headful(options):
        return True
    if launch_options.kiosk(options):
        return False
    wanted, screen = launch_options.screen_for(viewport), hosted.x_screen
    return screen is not None and wanted[0] <= screen[0] and wanted[1] <= screen[1]


def _sized(hosted, viewport):
    """The session's own record of its size follows (the computer API's screen and display, a restart's)."""
    hosted.options = replace(hosted.options, viewport=viewport)
    hosted.screen.size = viewport
    if hosted.screen.display is not None:
        hosted.screen.display.viewport = viewport
