"""This host's running browsers: one Hosted record per session, in <host folder>/sessions/<id>/ (which is also what a
host started after a crash sweeps), the lines the host writes in their logs, their CDP clients, and their end: a stop,
the browser's own exit, an OOM kill, and the teardown that leaves nothing of a session behind.
"""
import logging
import os
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from browserhost import agents, cgroups, computer, launch, launch_options, profile_state, replays, sandbox, unsandboxed
from browserhost.capture import Capture, LogTail, exit_metadata
from browserhost.cdp import CdpClient, CdpError
from lantern_wire import control
from lantern_wire.hosts import ENDED_BY_BROWSER_EXIT, ENDED_BY_OOM

logger = logging.getLogger(__name__)
# The supervisor_process name of the host's own lines about a session.
HOST_LOG = "browser-host"
NOT_HERE = {"code": "not_found", "message": "No such browser on this host."}


@dataclass
class Hosted:
    """One session's browser on this host."""

    session_id: str
    workdir: Path
    browser: launch.Browser | None = None
    box: sandbox.Sandbox | unsandboxed.HostBox | None = None  # once its start made it
    origins: set = field(default_factory=set)  # of the loaded profile: read back on save
    # Connected CDP clients: id -> (pid of the worker relaying it straight to Chromium, or None when
    # this host relays it, and when it came). A worker that dies takes its entries with it.
    connections: dict = field(default_factory=dict)
    starting: bool = True
    start_deadline: float = 0.0  # time.monotonic() past which its start gives up (the machine is too busy)
    stopping: bool = False
    out_of_memory: bool = False  # its sandbox's OOM kill was reported; it is being ended
    # Why it ends, when that was said (an OOM kill, the host's stop) while it started (again): the start or restart
    # that then tears it down tells the app (Registry.end).
    end_reason: str | None = None
    capture: Capture | None = None
    log_tail: LogTail | None = None
    categories: frozenset = frozenset()  # what its capture produces: the app says (start, PUT, heartbeat)
    categories_revision: int = 0  # the app's revision of them: the newest it has said wins (set_categories)
    screen: computer.Screen | None = None  # for the computer API
    options: launch_options.LaunchOptions | None = None  # what its Chromium was started with (a restart's too)
    restarting: bool = False  # its Chromium is being started again (a new viewport): its exit ends nothing
    recordings: dict = field(default_factory=dict)  # replay id -> replays.Recording, until the app has it
    recording_lock: threading.Lock = field(default_factory=threading.Lock)  # one recording starts at a time
    # A profile given while it runs (POST /sessions/{id}/profile), loading or loaded: one only, or two users'
    # cookies would share a browser whose record names one.
    profile_given: bool = False
    loaded_storage: dict = field(default_factory=dict)  # origin -> a loaded profile's localStorage entry
    x_screen: tuple | None = None  # a headful browser's X screen (width, height): Xvfb's cannot change
    # Its agent in its sandbox (files and processes), started on its first call; it ends with the sandbox.
    agent: agents.SessionAgent = field(default_factory=agents.SessionAgent)


class Registry:
    def __init__(self, root, reports, capacity):
        """`root`: this host's folder (<BROWSER_HOST_DIR>/<name> once registered); `reports`: an uplink.Reports."""
        self.root, self.reports, self.capacity = Path(root), reports, capacity
        self.name = None  # the app's name for this host, told at registration
        self.hosted = {}
        self.lock = threading.Lock()
        self.shutting_down = False  # no browser starts any more

    def admit(self, session_id, **record):
        """A new Hosted for `session_id` (`record`: its fields), or why not: (None, (status, refusal))."""
        with self.lock:
            if self.shutting_down:
                return None, (503, {"code": "browser_host_stopping", "message": f"Browser host {self.name} is "
                                                                               "stopping."})
            if session_id in self.hosted:
                return None, (409, {"code": "conflict", "message": f"Session {session_id} already runs here."})
            if len(self.hosted) >= self.capacity:
                return None, (503, {"code": "no_browser_capacity", "message": f"Browser host {self.name} is full."})
            hosted = self.hosted[session_id] = Hosted(session_id, self.root / "sessions" / session_id, **record)
        return hosted, None

    def running(self):
        """The browsers started and not stopping."""
        return [hosted for hosted in list(self.hosted.values()) if not (hosted.starting or hosted.stopping)]

    def note(self, hosted, message, level=logging.INFO):
        """One line of this host's own log about the session (`supervisor_process=browser-host`); once the session
        has left this host (a recording saved, a client gone after its end), of this host's log alone: the app
        keeps no line of an ended session."""
        logger.log(level, "session %s: %s", hosted.session_id, message)
        if self.hosted.get(hosted.session_id) is hosted:
            self.reports.logs(hosted.session_id, "supervisor", HOST_LOG, [{"message": message}])

    def set_categories(self, hosted, categories: control.Categories):
        """What the session's capture produces from now on, unless the app has said a newer revision already (a
        heartbeat's answer read before a change was committed can arrive after the change's PUT)."""
        with self.lock:
            if categories.revision < hosted.categories_revision:
                return
            hosted.categories, hosted.categories_revision = categories.names, categories.revision

    # -- CDP clients: while one is connected the session is active; its idle timeout starts when the last leaves --

    def client_joined(self, hosted, connection_id, worker_pid=None):
        with self.lock:
            hosted.connections[connection_id] = (worker_pid, time.monotonic())
        if hosted.capture:
            hosted.capture.client_connected(connection_id)
        self.note(hosted, f"CDP client {connection_id} connected")
        self.reports.activity(hosted.session_id)

    def client_left(self, hosted, connection_id):
        with self.lock:
            known = hosted.connections.pop(connection_id, None)
        if known is None:
            return
        duration = time.monotonic() - known[1]
        if hosted.capture:
            hosted.capture.client_disconnected(connection_id, duration * 1000)
        self.note(hosted, f"CDP client {connection_id} left after {duration:.1f} s")
        self.reports.activity(hosted.session_id)  # the idle timeout counts from the last client's leaving

    def forget_dead_workers(self):
        """A worker killed while relaying never says its client left."""
        for hosted in list(self.hosted.values()):
            for connection_id, (pid, _) in list(hosted.connections.items()):
                if pid is not None and not _process_exists(pid):
                    self.client_left(hosted, connection_id)

    # -- ends ----------------------------------------------------------------------------------

    def stop_browser(self, session_id, *, save, reason):
        """Stop a session's browser (its state read first when `save`); the state or None.
        With `reason`, the app is also told the session ended (the browser or this host ended it), after
        everything its capture reported. A browser still starting is only marked: its start ends it once its
        launch returns. One starting again (a new viewport) is waited for, so that what it kept is saved."""
        hosted = self.hosted.get(session_id)
        while hosted is not None and hosted.restarting and time.monotonic() < hosted.start_deadline + 10:
            time.sleep(0.05)
        with self.lock:
            hosted = self.hosted.get(session_id)
            if hosted is None:
                return None
            if hosted.starting or hosted.restarting:  # its start ends it, and says why (Registry.end)
                hosted.end_reason = hosted.end_reason or reason
                hosted.stopping = True
                return None
            if hosted.stopping:
                return None
            hosted.stopping = True
        try:
            return self.teardown(hosted, save)
        finally:  # even when the teardown failed: the browser is gone or going, so is the session
            if reason:
                self.reports.ended(session_id, reason)

    def end(self, hosted, reason=None):
        """Tear down a browser whose start or restart failed or was stopped meanwhile; the app is told why it ended
        (the reason a stop gave meanwhile, else `reason`; neither: a start the app hears of in its answer)."""
        reason = hosted.end_reason or reason
        try:
            self.teardown(hosted, save=False)
        finally:
            if reason:
                self.reports.ended(hosted.session_id, reason)

    def stop_chromium(self, hosted, *, save=False):
        """Its capture stopped first (what it caught so far goes in), its state read when `save`, then Chromium and its
        display; the state or None. A restart does this much; the teardown more."""
        if hosted.capture is not None:
            hosted.capture.stop()
        state = None
        if save and hosted.browser and hosted.browser.alive:
            try:
                with CdpClient(hosted.browser.devtools) as cdp:
                    state = profile_state.read(hosted, cdp, self.note)
            except (CdpError, OSError) as error:
                logger.warning("reading the profile state of session %s failed: %s", hosted.session_id, error)
        if hosted.browser:
            hosted.browser.stop()
        return state

    def teardown(self, hosted, save):
        """Everything of one browser ends: recordings, capture and log tail, profile state (when `save`), Chromium
        and its display, its box, its folder; the state or None."""
        try:
            stop_recordings(hosted)
            if hosted.log_tail is not None:
                hosted.log_tail.stop()
            return self.stop_chromium(hosted, save=save)
        finally:
            box_left = False
            if hosted.box is not None:  # None: the start failed before its box was made
                try:
                    hosted.box.destroy()
                except Exception:  # noqa: BLE001 - the session must leave this host all the same
                    box_left = True
                    logger.exception("removing the sandbox of session %s failed: its folder %s is kept, so that "
                                     "the host's next start removes what is left (launch.kill_leftovers)",
                                     hosted.session_id, hosted.workdir)
            if not box_left:  # the folder names the sandbox's leftovers (and holds an unsandboxed one's pgids)
                remove(hosted.workdir)
            with self.lock:
                self.hosted.pop(hosted.session_id, None)
            self.reports.forget(hosted.session_id)  # its capture, which numbered its reports, has stopped

    def watch(self, hosted):
        """A browser that exits by itself (crash, killed) ends its session."""
        browser = hosted.browser
        browser.process.wait()
        if hosted.restarting or hosted.browser is not browser:
            return  # stopped to start again (a new viewport): the new one is watched
        if hosted.box.oom_kills():
            self.end_out_of_memory()  # the browser process itself was past the cap
        elif not hosted.stopping:
            ended = exit_metadata(hosted.browser.exit_status)
            how = f"was killed by {ended['signal']}" if "signal" in ended else f"exited with code {ended['exit_code']}"
            self.note(hosted, f"Chromium (pid {hosted.browser.pid}) {how}; the session ends", level=logging.WARNING)
            hosted.capture.browser_exited(hosted.browser.exit_status, pid=hosted.browser.pid)
            self.stop_browser(hosted.session_id, save=False, reason=ENDED_BY_BROWSER_EXIT)

    def watch_in_background(self, hosted):
        threading.Thread(target=self.watch, args=(hosted,), daemon=True).start()

    def end_out_of_memory(self):
        """A session whose sandbox had a process killed for memory ends (`oom`), all of it."""
        for hosted in list(self.hosted.values()):
            if hosted.starting or not hosted.box.oom_kills():  # a starting one may have no box yet
                continue
            with self.lock:  # the heartbeat and a browser's watch may both find it: one reports it
                if hosted.starting or hosted.stopping or hosted.out_of_memory:
                    continue
                hosted.out_of_memory = True
            report = cgroups.oom_report(hosted.box.cgroup)
            self.note(hosted, f"{report['process_name']} (pid {report['pid']}) was killed for memory (past the "
                              f"session's cap of {hosted.box.memory_mb} MB, or every sandbox's together); the session "
                              "ends", level=logging.WARNING)
            if hosted.capture:
                hosted.capture.out_of_memory(report)
            self.stop_in_background(hosted.session_id, reason=ENDED_BY_OOM)

    def stop_in_background(self, session_id, reason=None):
        threading.Thread(target=self.stop_browser, args=(session_id,), kwargs={"save": False, "reason": reason},
                         daemon=True).start()


def stop_recordings(hosted):
    """A session's recordings end with it: all asked at once, then each waited for."""
    running = list(hosted.recordings.values())
    for recording in running:
        threading.Thread(target=recording.stop, daemon=True).start()
    for recording in running:
        recording.finished.wait(replays.STOP_GRACE_SECONDS * 3)


def _process_exists(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove(folder):
    """Remove a browser's folder; a file still being released can make one attempt fail."""
    for delay in (0, 0.2, 0.4, 0.8):
        time.sleep(delay)
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            return
    logger.warning("could not remove %s", folder)
