"""The browser host: a program of its own (`python -m browserhost`) that owns Chromium processes.

It holds no database access and imports nothing of the app: it registers (address, capacity) and
heart-beats through the app's internal API with its own credential, and sends what its browsers
report there (uplink.py; lantern_wire/hosts.py has the contract). Workers place sessions on it and
call its control API (control.py), authorised by the key derived from that credential.

Plain threads (ThreadingHTTPServer): a host is not a gunicorn worker. Each browser lives
in its own folder, <BROWSER_HOST_DIR>/<host name>/sessions/<id>/, which is also the
registry: after a crash (`kill -9`), the next start kills the process groups recorded
there and removes the folders, and its registration ends the sessions the app still gives it.
A host holds its credential and then its folder (host_folder.py) while it runs: a second host with the
same credential exits (status 5) before registering, one for the same folder before sweeping anything.
While a CDP client is connected the session is active (said at every heartbeat); when
the last one leaves, its idle timeout starts from then.

Each browser also has a capture (capture/): the host's own CDP connection turns what the
browser does into telemetry events, and a tail of Chromium's output into log lines
(`source=supervisor`, `supervisor_process=chromium`); both are reported to the app, which
archives them as its ingest endpoints do (workers' streams catch up from the archive), in
batches, and neither counts as activity.
"""
import logging
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import zipfile
from dataclasses import dataclass, field, replace
from http.server import ThreadingHTTPServer
from pathlib import Path

from browserhost import (
    cgroups,
    computer,
    host_folder,
    launch,
    replays,
    reshape,
    resolver,
    sandbox,
    storage,
    unsandboxed,
)
from browserhost.capture import Capture, LogTail, exit_metadata
from browserhost.cdp import CdpClient, CdpError
from browserhost.control import ControlHandler
from browserhost.display import Display
from browserhost.extension_cache import ArchiveMismatch, ExtensionCache
from browserhost.uplink import AppUnreachable, Refused, Reports
from lantern_wire import control
from lantern_wire.hosts import (
    ENDED_BY_BROWSER_EXIT,
    ENDED_BY_HOST_STOP,
    ENDED_BY_OOM,
    HEARTBEAT,
    MAX_UNAVAILABLE_REASON,
    REGISTER,
    STOPPED,
    control_key,
)
from lantern_wire.reports import Heartbeat, HeartbeatAnswer, InvalidShape, Registered, Registration, parse

logger = logging.getLogger(__name__)
# The supervisor_process names of a session's logs: Chromium's own output, and this host's lines about it.
CHROMIUM_LOG = "chromium"
HOST_LOG = "browser-host"
# Lines of Chromium's output that are not served as its log (they stay in chromium.log on the host): a
# sandbox has no D-Bus, and Chromium says so some thirty times at each start, as ERRORs that mean nothing.
HARMLESS_CHROMIUM_LINES = re.compile(r":ERROR:dbus/(bus|object_proxy)\.cc")
# Of Chromium's output, what a session keeps (the host's file, the app's log lines): a few KB is usual.
CHROMIUM_LOG_MAX_BYTES = 16 * 1024 * 1024
# The host's exit status when the app refuses its credential (revoked): starting it again would not help.
CREDENTIAL_REFUSED = 4
# ... when another host runs on its folder (<BROWSER_HOST_DIR>/<name>) or with its credential: it would only
# refuse again.
FOLDER_IN_USE = 5
# launch.py's words for a Chromium that ended during its start: its exit code is the one detail a tenant is told.
CHROMIUM_EXITED = re.compile(r"Chromium exited with (-?\d+) before")
# How long a restart (a new viewport) may take to read the browser's tabs and storage.
READ_SECONDS = 10
# How long a stopping host waits for the app to take what its browsers reported last.
FINAL_REPORTS_SECONDS = 10
# How long a finished recording is offered to the app while it does not answer, before it is given up.
REPLAY_UPLOAD_SECONDS = 600


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
    capture: Capture | None = None
    log_tail: LogTail | None = None
    categories: frozenset = frozenset()  # what its capture produces: the app says (start, PUT, heartbeat)
    categories_revision: int = 0  # the app's revision of them: the newest it has said wins (set_categories)
    screen: computer.Screen | None = None  # for the computer API
    options: launch.LaunchOptions | None = None  # what its Chromium was started with (a restart's, its new viewport)
    restarting: bool = False  # its Chromium is being started again (a new viewport): its exit ends nothing
    recordings: dict = field(default_factory=dict)  # replay id -> replays.Recording, until the app has it
    recording_lock: threading.Lock = field(default_factory=threading.Lock)  # one recording starts at a time
    # A profile given while it runs (POST /sessions/{id}/profile), loading or loaded: one only, or two users'
    # cookies would share a browser whose record names one.
    profile_given: bool = False
    loaded_storage: dict = field(default_factory=dict)  # origin -> a loaded profile's localStorage entry
    x_screen: tuple | None = None  # a headful browser's X screen (width, height): Xvfb's cannot change


class BrowserHostServer:
    def __init__(self, settings, client, *, bind, advertise, capacity):
        """`settings`: browserhost.settings.load(); `client`: an uplink.AppClient with this host's credential,
        from which the key the app calls this host with is derived too."""
        self.settings = settings
        self.client = client
        self.name = None  # the app's name for this host's credential, told at registration
        self.bind = bind
        self.advertise = advertise
        self.capacity = capacity
        self.root = Path(settings["BROWSER_HOST_DIR"])  # its own folder in there is named at registration
        self.binary = launch.find_chromium(settings["BROWSER_CHROMIUM_PATH"])
        self.headful = launch.xvfb_available()
        # None when the operator turned sandboxes off (BROWSER_SANDBOX=off); what the machine lacks to
        # sandbox is probed at start (run()).
        self.policy = None if settings["BROWSER_SANDBOX"] == "off" else sandbox.SandboxPolicy.from_config(settings)
        self.cannot_sandbox = []
        self.control_key = control_key(client.credential)
        self.reports = Reports(client, limit=settings["BROWSER_HOST_REPORT_QUEUE"], on_refused=self.refused)
        self.heartbeat_seconds = 2.0
        self.hosted = {}
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.shutting_down = False
        self.exit_status = 0
        self.httpd = None
        # The descriptors holding this host's credential and folder (host_folder.py), open while it runs.
        self.credential_lock = self.folder_lock = None
        self.extensions = None  # the ExtensionCache, in this host's folder once it is known (registered)

    # -- life ------------------------------------------------------------------------------

    def run(self):
        """Serve until SIGTERM or SIGINT (or the app refuses this host's credential); then stop every browser
        and end their sessions; the exit status. The port is taken first: a host whose port is in use
        (OSError) touches nothing of the one that holds it."""
        self.httpd = ThreadingHTTPServer(self.bind, self.handler_class())
        self.httpd.daemon_threads = True
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: threading.Thread(target=self.shutdown, daemon=True).start())
        try:
            return self._serve()
        finally:
            self.httpd.server_close()
            for descriptor in (self.folder_lock, self.credential_lock):
                if descriptor is not None:
                    os.close(descriptor)
            self.credential_lock = self.folder_lock = None

    def _serve(self):
        if self.policy is None:
            logger.warning("BROWSER_SANDBOX is off: every browser runs as this host's user (%s), on its files and "
                           "network, and any user of a session can reach them (docs/browsers.md, Isolation)",
                           os.geteuid())
        else:
            self.cannot_sandbox = sandbox.probe(self.policy)
            for missing in self.cannot_sandbox:
                logger.error("cannot sandbox browsers: %s", missing)
        try:
            # Before registering: the app ends the sessions of a host that registers, which would be those of
            # another host running with this credential.
            self.credential_lock = host_folder.hold_credential(self.root, self.client.credential)
        except host_folder.FolderInUse as error:
            return self.refuse_credential(error)
        if not self.register():
            return self.exit_status
        self.root = self.root / self.name
        try:
            self.folder_lock = host_folder.hold(self.root)  # before anything of the folder is swept
        except host_folder.FolderInUse as error:
            return self.refuse_folder(error)
        (self.root / "sessions").mkdir(parents=True, exist_ok=True)
        self.extensions = ExtensionCache(self.root / "extensions", self.client,
                                         self.settings.browser_extension_cache_mb << 20)
        self.clean_up_after_crash()
        (self.root / "replays").mkdir(exist_ok=True)
        self.reports.start()
        threading.Thread(target=self.heartbeat_loop, daemon=True, name="heartbeat").start()
        logger.info("browser host %s serving on %s (capacity %s, chromium %s, headful %s)", self.name,
                    self.advertise, self.capacity, self.binary or "MISSING", self.headful)
        self.httpd.serve_forever(poll_interval=0.2)
        self.stopped.wait()
        return self.exit_status

    def shutdown(self):
        # Once, whatever the number of signals (Ctrl-C reaches the host, then make run's trap sends
        # SIGTERM): a second pass would let run() return while the first still stops browsers.
        with self.lock:
            if self.shutting_down:
                return
            self.shutting_down = True
        try:
            for session_id in list(self.hosted):
                self.stop_browser(session_id, save=False, reason=ENDED_BY_HOST_STOP)
            if self.name is not None and not self.exit_status:
                self.reports.stop(FINAL_REPORTS_SECONDS)
                self.client.post(STOPPED, {})
        except (AppUnreachable, Refused) as error:
            logger.warning("could not tell the app this host stopped (%s): it finds out when heartbeats stop", error)
        finally:
            self.httpd.shutdown()
            self.stopped.set()

    def refuse_folder(self, in_use):
        """Another host runs on this host's folder: this one stops at once, touching nothing of it; its app is told
        (it registered), so that it places nothing here."""
        logger.error("another browser host (pid %s) runs on %s: stop it, or give this host a folder of its own "
                     "(LANTERN_BROWSER_HOST_DIR) or another name (flask browsers hosts add NAME)",
                     in_use.pid or "unknown", in_use.folder)
        self.exit_status = FOLDER_IN_USE
        try:
            self.client.post(STOPPED, {})
        except (AppUnreachable, Refused) as error:
            logger.warning("could not tell the app this host stopped (%s)", error)
        return self.exit_status

    def refuse_credential(self, in_use):
        """Another host runs with this host's credential: this one stops before registering, telling the app
        nothing (the other is the live one)."""
        logger.error("another browser host (pid %s) runs with this host's credential (it holds %s): stop it, or give "
                     "this host a credential of its own (flask browsers hosts add NAME)", in_use.pid or "unknown",
                     in_use.lock)
        self.exit_status = FOLDER_IN_USE
        return self.exit_status

    def refused(self, status):
        """The app refuses this host's credential (revoked): nothing it runs can be reported; it stops."""
        logger.error("the app refuses this host's credential (HTTP %s: revoked?); stopping every browser. Add the "
                     "host again (flask browsers hosts add NAME --address URL --replace) and start it with the new "
                     "credential.",
                     status)
        self.exit_status = CREDENTIAL_REFUSED
        threading.Thread(target=self.shutdown, daemon=True).start()

    def unavailable_reason(self):
        """Why this host cannot start browsers (None: it can)."""
        if not self.binary:
            return "Chromium is not installed on this host: apt-get install chromium (or set BROWSER_CHROMIUM_PATH)"
        if self.cannot_sandbox:
            return (f"it cannot sandbox browsers ({'; '.join(self.cannot_sandbox)}); BROWSER_SANDBOX=off runs them "
                    "without one (docs/browsers.md, Isolation, says what that gives up)")
        return None

    def register(self):
        """Tell the app where this host is and what it takes, trying until the app answers (it may start after
        the host); the app ends what it still gives this host (its previous run's). False: refused."""
        reason = self.unavailable_reason()
        registration = Registration(address=self.advertise, capacity=0 if reason else self.capacity,
                                    headful=self.headful, unavailable_reason=reason and reason[:MAX_UNAVAILABLE_REASON])
        started, warned = time.monotonic(), False
        while not self.shutting_down:  # each call waits and tries again itself (uplink.RETRY) for a while
            try:
                answer = parse(Registered, self.client.post(REGISTER, registration.to_dict()))
            except AppUnreachable as error:
                if not warned and time.monotonic() - started > 10:
                    logger.warning("the app at %s has not answered for 10 s (%s); still trying (LANTERN_APP_URL)",
                                   self.settings["APP_URL"], error)
                    warned = True
                elif not warned:  # the app may be starting beside it (make run)
                    logger.info("waiting for the app at %s (%s)", self.settings["APP_URL"], error)
                continue
            except (Refused, InvalidShape) as error:
                logger.error("the app refused this host's registration (%s): is LANTERN_BROWSER_HOST_CREDENTIAL the "
                             "one `flask browsers hosts add NAME` printed, and LANTERN_APP_URL the app's?", error)
                self.exit_status = CREDENTIAL_REFUSED
                return False
            self.name, self.heartbeat_seconds = answer.name, answer.heartbeat_seconds
            return True
        return False

    def clean_up_after_crash(self):
        """Kill the process groups a previous run left (recorded in each session folder) and remove the folders,
        and the recordings it had not handed on (their sessions ended host_restarted, their replays failed)."""
        for record, what in launch.kill_leftovers(self.root / "sessions", self.policy and self.policy.root):
            logger.warning("removed %s left by a previous run (%s)", record, what)
        _remove(self.root / "replays")

    def heartbeat_loop(self):
        away_since = None
        while not self.stopped.wait(self.heartbeat_seconds):
            try:
                self.forget_dead_workers()
                self.end_out_of_memory()
                self.heartbeat()
                if away_since is not None:
                    logger.info("the app answers again (after %.0f s)", time.monotonic() - away_since)
                away_since = None
            except AppUnreachable as error:
                if away_since is None:  # once per outage, not every beat
                    logger.warning("heartbeat: the app does not answer (%s); trying on", error)
                    away_since = time.monotonic()
            except Refused as error:
                if error.status == 401:
                    self.refused(error.status)
                    return
                logger.error("heartbeat refused: %s", error)
            except Exception:  # noqa: BLE001 - nothing may end the heartbeat
                logger.exception("heartbeat failed")

    def heartbeat(self):
        """The app hears this host is alive and which sessions have CDP clients; it answers which browsers to
        stop (their session ended without this host being told: a stop that failed to reach it) and each
        session's telemetry categories."""
        running = [h for h in list(self.hosted.values()) if not (h.starting or h.stopping)]
        beat = Heartbeat(sessions=[h.session_id for h in running],
                         active=[h.session_id for h in running if h.connections])
        answer = parse(HeartbeatAnswer, self.client.post(HEARTBEAT, beat.to_dict()))
        for hosted in running:
            if hosted.session_id in answer.categories:
                self.set_categories(hosted, answer.categories[hosted.session_id])
        for session_id in answer.stop:
            logger.warning("stopping the browser of session %s, which ended without this host being told", session_id)
            threading.Thread(target=self.stop_browser, args=(session_id,), kwargs={"save": False, "reason": None},
                             daemon=True).start()

    def set_categories(self, hosted, categories: control.Categories):
        """What the session's capture produces from now on, unless the app has said a newer revision already (a
        heartbeat's answer read before a change was committed can arrive after the change's PUT)."""
        with self.lock:
            if categories.revision < hosted.categories_revision:
                return
            hosted.categories, hosted.categories_revision = categories.names, categories.revision

    def forget_dead_workers(self):
        """A worker killed while relaying never says its client left."""
        for hosted in list(self.hosted.values()):
            for connection_id, (pid, _) in list(hosted.connections.items()):
                if pid is not None and not _process_exists(pid):
                    self.client_left(hosted, connection_id)

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
            threading.Thread(target=self.stop_browser, args=(hosted.session_id,),
                             kwargs={"save": False, "reason": ENDED_BY_OOM}, daemon=True).start()

    # -- browsers --------------------------------------------------------------------------

    def start_browser(self, request: control.StartRequest):
        """(status, answer) for POST /sessions (its JSON form is taken too, as in-process callers write it)."""
        request = control.StartRequest.model_validate(request)
        session_id, start_seconds, spec = request.session_id, request.start_seconds, request.spec
        if self.unavailable_reason():
            return 503, {"code": "browser_host_unavailable", "message": f"Browser host {self.name} cannot start "
                         f"browsers: {self.unavailable_reason()}"}
        if not spec.headless and not self.headful:
            return 400, {"code": "bad_request", "message": "headless false needs Xvfb on the browser host: "
                         "apt-get install xvfb (or create the session with headless true)."}
        if spec.chrome_policy and self.policy is None:
            return 400, {"code": "bad_request", "message": "chrome_policy needs a sandboxed browser host (each "
                         "session's policy file is its sandbox's): this one runs with BROWSER_SANDBOX=off."}
        try:
            resolver.normalize_hosts(spec.allowed_hosts or ())
        except ValueError as error:  # the app takes any string: what no resolver can look up is refused here
            logger.warning("session %s refused: network.allowed_hosts: %s", session_id, error)
            return 400, {"code": "bad_request", "message": f"network.allowed_hosts: {error}"}
        with self.lock:
            if self.shutting_down:
                return 503, {"code": "browser_host_stopping", "message": f"Browser host {self.name} is stopping."}
            if session_id in self.hosted:
                return 409, {"code": "conflict", "message": f"Session {session_id} already runs here."}
            if len(self.hosted) >= self.capacity:
                return 503, {"code": "no_browser_capacity", "message": f"Browser host {self.name} is full."}
            hosted = self.hosted[session_id] = Hosted(session_id, self.root / "sessions" / session_id,
                                                      categories=request.categories.names,
                                                      categories_revision=request.categories.revision,
                                                      start_deadline=time.monotonic() + start_seconds)
        try:
            self._launch(hosted, request)
        except Exception as error:  # noqa: BLE001 - whatever failed, nothing of the session may stay
            # A browser that did not answer within the start's time: the machine is too busy, a later start may do.
            busy = isinstance(error, launch.StartTimedOut) or (
                isinstance(error, CdpError) and time.monotonic() >= hosted.start_deadline)
            if busy:
                logger.warning("session %s: %s", session_id, str(error).splitlines()[0])
            else:
                logger.exception("starting the browser of session %s failed", session_id)  # the detail: this log only
            self._teardown(hosted, save=False)
            if busy:
                return 503, {"code": "browser_host_busy", "message": f"The browser did not start within the start "
                             f"deadline ({start_seconds:g} s): browser host {self.name} is too busy; retry later"}
            return 500, {"code": "browser_start_failed", "message": start_failure(error)}
        with self.lock:
            hosted.starting = False
            stopped_meanwhile = hosted.stopping
        if stopped_meanwhile:  # a stop came while it started (the worker gave up waiting): it is ours to end
            self._teardown(hosted, save=False)
            return 503, {"code": "browser_start_failed", "message": "The session was stopped while its browser "
                                                                    "started."}
        threading.Thread(target=self.watch, args=(hosted,), daemon=True).start()
        return 201, {"pid": hosted.browser.pid, "browser_path": hosted.browser.browser_path}

    def _launch(self, hosted, request):
        spec = request.spec
        hosted.workdir.mkdir(parents=True)
        hosted.box = (unsandboxed.HostBox(hosted.workdir) if self.policy is None else sandbox.Sandbox(
            hosted.workdir, self.policy, memory_mb=spec.memory_mb, allowed_hosts=spec.allowed_hosts)).create()
        extension_dirs = [self._unpack(hosted.box.extensions / e.id, e) for e in spec.extensions]
        # start_url: loaded by the capture (_open_start_page)
        self._start_chromium(hosted, launch.LaunchOptions.from_spec(spec, extension_dirs=extension_dirs))
        state = request.profile_state
        if state:
            self._load_state(hosted, state, self._time_left(hosted, "loading the profile"))
        self._start_capture(hosted)
        hosted.log_tail = LogTail(hosted.browser.log_path, lambda lines: self.reports.logs(
            hosted.session_id, "supervisor", CHROMIUM_LOG,
            [{"message": line} for line in lines if not HARMLESS_CHROMIUM_LINES.search(line)]),
            max_bytes=CHROMIUM_LOG_MAX_BYTES).start()
        self.note(hosted, f"Chromium started on browser host {self.name}: pid {hosted.browser.pid}, "
                          f"{'headless' if hosted.options.headless else 'headful'}, "
                          + (f"in a sandbox of its own (memory cap {hosted.box.memory_mb} MB)" if hosted.box.sandboxed
                             else "WITHOUT a sandbox (BROWSER_SANDBOX=off)"))
        if spec.start_url:
            self._open_start_page(hosted, spec.start_url)

    def _start_chromium(self, hosted, options):
        """Chromium with `options` (on an X display of its box's when headful), and the computer API's screen of it,
        within the session's start deadline."""
        if not options.headless:
            hosted.x_screen = launch.screen_for(options.viewport, kiosk=options.kiosk)
            options = replace(options, screen=hosted.x_screen)
        hosted.options = options
        hosted.browser = launch.Browser.start(self.binary, hosted.workdir, options, box=hosted.box,
                                              timeout=max(hosted.start_deadline - time.monotonic(), 0.0))
        size = options.viewport or launch.DEFAULT_SCREEN
        display = None if options.headless else Display(hosted.box.display, hosted.box, size)
        hosted.screen = computer.Screen(hosted.browser.devtools, display=display, size=size)
        (hosted.workdir / "chromium.pgid").write_text(str(hosted.browser.process.pid))  # its group

    def _load_state(self, hosted, state, timeout):
        """A profile's cookies and localStorage into the running browser; its origins are read back at the end."""
        hosted.origins |= {entry["origin"] for entry in state.get("origins") or ()}
        hosted.loaded_storage.update({storage.web_origin(entry["origin"]): entry
                                      for entry in state.get("origins") or ()})
        with CdpClient(hosted.browser.devtools, timeout=timeout) as cdp:
            skipped = storage.load_state(cdp, state)
        if skipped:
            self.note(hosted, f"localStorage of {', '.join(skipped)} not loaded: the browser cannot open "
                              "(its policies block it); the profile keeps what it had there", level=logging.WARNING)

    def _read_state(self, hosted, cdp):
        """The browser's cookies and localStorage; an origin it cannot open or read keeps what was loaded for it."""
        unread = []
        state = storage.read_state(cdp, extra_origins=hosted.origins, unread=unread)
        kept = [hosted.loaded_storage[origin] for origin in unread if origin in hosted.loaded_storage]
        if unread:
            self.note(hosted, f"localStorage of {', '.join(unread)} not read: the browser cannot open it; the "
                              "profile keeps what it had there", level=logging.WARNING)
        state["origins"] += kept
        return state

    def _start_capture(self, hosted):
        hosted.capture = Capture(hosted.browser.devtools, categories=lambda: hosted.categories,
                                 sink=lambda events: self.reports.telemetry(hosted.session_id, events),
                                 on_drops=lambda total: self.note(
                                     hosted, f"telemetry capture: {total} events dropped so far (it could not keep "
                                             "up, or CDP messages were past BROWSER_CAPTURE_MAX_MESSAGE_MB)",
                                     level=logging.WARNING),
                                 max_message=self.settings["BROWSER_CAPTURE_MAX_MESSAGE_MB"] * 1024 * 1024).start()

    def _open_start_page(self, hosted, url):
        """Navigate the first tab (Chromium started it on about:blank) to the session's start page once the capture
        has set the tab up, so that the page's events are all captured; when the capture cannot (its connection
        lost), over a connection of its own (the page's first events are lost: the session's log says so). Within
        the start's deadline: StartTimedOut past it."""
        if hosted.capture.load_start_page(url, timeout=self._time_left(hosted, "opening the start page")):
            return
        with CdpClient(hosted.browser.devtools, timeout=self._time_left(hosted, "opening the start page")) as cdp:
            tab = next((info for info in cdp.call("Target.getTargets")["targetInfos"]
                        if info["type"] == "page" and info["url"] == "about:blank"), None)
            if tab is None:
                cdp.call("Target.createTarget", {"url": url})
            else:
                session = cdp.call("Target.attachToTarget", {"targetId": tab["targetId"], "flatten": True})
                # Not waited for (its answer comes once the page answers): sent before the close, it goes on.
                cdp.send("Page.navigate", {"url": url}, session_id=session["sessionId"])
        self.note(hosted, "the start page was opened without the telemetry capture, which could not open it: its "
                          "first events may be missing", level=logging.WARNING)

    @staticmethod
    def _time_left(hosted, step):
        """Seconds left of the session's start for `step`; StartTimedOut when none is (the machine is too busy)."""
        left = hosted.start_deadline - time.monotonic()
        if left <= 0:
            raise launch.StartTimedOut(f"the start deadline passed before {step}")
        return left

    def note(self, hosted, message, level=logging.INFO):
        """One line of this host's own log about the session (`supervisor_process=browser-host`); once the session
        has left this host (a recording saved, a client gone after its end), of this host's log alone: the app
        keeps no line of an ended session."""
        logger.log(level, "session %s: %s", hosted.session_id, message)
        if self.hosted.get(hosted.session_id) is hosted:
            self.reports.logs(hosted.session_id, "supervisor", HOST_LOG, [{"message": message}])

    def _unpack(self, folder, extension):
        """An extension's archive (validated at upload; from the cache, fetched once) into `folder`, its manifest's
        folder returned; ExtensionUnavailable when the app did not give it."""
        try:
            archive_file = self.extensions.open(extension.sha256)
        except (AppUnreachable, Refused, ArchiveMismatch, ValueError) as error:
            raise ExtensionUnavailable(extension.id, error) from error
        with archive_file, zipfile.ZipFile(archive_file) as archive:
            for entry in archive.infolist():
                target = (folder / entry.filename).resolve()
                if not target.is_relative_to(folder.resolve()):
                    raise ValueError(f"extension entry {entry.filename!r} leaves its folder")
            archive.extractall(folder)
        manifests = sorted(folder.rglob("manifest.json"), key=lambda p: len(p.parts))
        return str(manifests[0].parent if manifests else folder)

    def stop_browser(self, session_id, *, save, reason):
        """Stop a session's browser (its state read first when `save`); the state or None.
        With `reason`, the app is also told the session ended (the browser or this host ended it), after
        everything its capture reported. A browser still starting is only marked: start_browser ends it once its
        launch returns. One starting again (a new viewport) is waited for, so that what it kept is saved."""
        hosted = self.hosted.get(session_id)
        while hosted is not None and hosted.restarting and time.monotonic() < hosted.start_deadline + 10:
            time.sleep(0.05)
        with self.lock:
            hosted = self.hosted.get(session_id)
            if hosted is None or hosted.stopping:
                return None
            hosted.stopping = True
            if hosted.starting or hosted.restarting:
                return None
        try:
            return self._teardown(hosted, save)
        finally:  # even when the teardown failed: the browser is gone or going, so is the session
            if reason:
                self.reports.ended(session_id, reason)

    def _teardown(self, hosted, save):
        """Everything of one browser ends: capture, profile state (when `save`), Chromium, Xvfb, folder."""
        state = None
        try:
            self._stop_recordings(hosted)
            for follower in (hosted.capture, hosted.log_tail):
                if follower is not None:
                    follower.stop()  # what was captured so far goes in first
            if save and hosted.browser and hosted.browser.alive:
                try:
                    with CdpClient(hosted.browser.devtools) as cdp:
                        state = self._read_state(hosted, cdp)
                except (CdpError, OSError) as error:
                    logger.warning("reading the profile state of session %s failed: %s", hosted.session_id, error)
            if hosted.browser:
                hosted.browser.stop()  # and its display
        finally:
            if hosted.box is not None:  # None: the start failed before its box was made
                try:
                    hosted.box.destroy()
                except Exception:  # noqa: BLE001 - the session must leave this host all the same
                    logger.exception("removing the sandbox of session %s failed (a restart removes what is left)",
                                     hosted.session_id)
            _remove(hosted.workdir)
            with self.lock:
                self.hosted.pop(hosted.session_id, None)
            self.reports.forget(hosted.session_id)  # its capture, which numbered its reports, has stopped
        return state

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

    # -- changes to a running browser (reshape.py) -------------------------------------------

    def resize(self, hosted, change: control.ViewportChange):
        """(status, answer) for PUT /sessions/{id}/viewport. Its windows take the new size where its screen holds
        it; else, when `change.restart` allows it, Chromium starts again on a screen of that size, with its tabs,
        cookies and localStorage."""
        change = control.ViewportChange.model_validate(change)
        viewport = change.size
        with hosted.recording_lock:  # no recording starts meanwhile
            refused = self._not_changeable(hosted)
            if refused:
                return refused
            if any(not recording.finished.is_set() for recording in hosted.recordings.values()):
                return 409, {"code": "replay_in_progress", "message": "The session is being recorded, at the size "
                             "it had: stop the recording first."}
            if viewport == hosted.options.viewport:
                return 200, {"restarted": False}
            if self._screen_holds(hosted, viewport):
                try:
                    hosted.browser.fit(viewport, settle=True)
                except (CdpError, OSError) as error:
                    logger.warning("session %s: resizing failed: %s", hosted.session_id, error)
                    return 502, {"code": "browser_unreachable", "message": "The browser's windows could not be "
                                                                           "resized."}
                self._sized(hosted, viewport)
                self.note(hosted, f"viewport now {viewport[0]}x{viewport[1]}")
                return 200, {"restarted": False}
            if not change.restart:
                why = "is a kiosk: its screen is its viewport" if launch.kiosk(hosted.options) else \
                    "has a screen smaller than that"
                return 409, {"code": "viewport_needs_restart", "message": f"The session {why}, and a screen cannot "
                             "change while its browser runs: the browser must start again (its tabs, cookies and "
                             "localStorage are kept; CDP connections and live views are closed). Send viewport.force "
                             "true to allow it."}
            return self._restart(hosted, viewport, change.start_seconds)

    @staticmethod
    def _not_changeable(hosted):
        """(status, answer) refusing a change to a browser that is not running as it is: ended or ending (404), or
        starting, or starting again for a new viewport (409 browser_restarting: worth retrying); else None."""
        if hosted.stopping:
            return 404, {"code": "not_found", "message": "No such browser on this host."}
        if hosted.starting or hosted.restarting or hosted.browser is None:
            return 409, {"code": "browser_restarting", "message": "The browser is starting (again); retry once it "
                         "runs."}
        return None

    @staticmethod
    def _screen_holds(hosted, viewport):
        """Whether the session's X screen (a headful one's, as Xvfb started it) is large enough for a window of
        `viewport` (the screen a start of that size would have fits in it). A kiosk's window fills its screen: any
        other size needs another."""
        options = hosted.options
        if not launch.headful(options):
            return True
        if launch.kiosk(options):
            return False
        wanted, screen = launch.screen_for(viewport), hosted.x_screen
        return screen is not None and wanted[0] <= screen[0] and wanted[1] <= screen[1]

    @staticmethod
    def _sized(hosted, viewport):
        """The session's own record of its size follows (the computer API's screen and display, a restart's)."""
        hosted.options = replace(hosted.options, viewport=viewport)
        hosted.screen.size = viewport
        if hosted.screen.display is not None:
            hosted.screen.display.viewport = viewport

    def _restart(self, hosted, viewport, start_seconds):
        """Chromium started again at `viewport`, with the default context's tabs (their URLs), cookies and
        localStorage; (status, answer). A start that fails ends the session."""
        with self.lock:  # from now on a stop waits for it (stop_browser)
            if hosted.stopping:
                return 404, {"code": "not_found", "message": "No such browser on this host."}
            hosted.restarting = True
            hosted.start_deadline = time.monotonic() + start_seconds + READ_SECONDS
        old = hosted.browser
        try:
            with CdpClient(old.devtools, timeout=READ_SECONDS) as cdp:
                urls = reshape.tabs(cdp, old.devtools.get_json("/json/list"))
                state = self._read_state(hosted, cdp)
        except (CdpError, OSError, ValueError) as error:
            logger.warning("session %s: no restart: its tabs and storage could not be read (%s)", hosted.session_id,
                           error)
            with self.lock:
                hosted.restarting = False
                exited = not old.alive and not hosted.stopping
                hosted.stopping = hosted.stopping or exited
            if exited:  # its watch saw it exit while restarting and left it: it is ours to end
                try:
                    self._teardown(hosted, save=False)
                finally:
                    self.reports.ended(hosted.session_id, ENDED_BY_BROWSER_EXIT)
                return 500, {"code": "browser_start_failed", "message": "The browser exited while its tabs were "
                             "read; the session has ended."}
            return 502, {"code": "browser_unreachable", "message": "The browser's tabs and storage could not be "
                                                                   "read; nothing changed."}
        self.note(hosted, f"Chromium starts again for a viewport of {viewport[0]}x{viewport[1]} "
                          f"({len(urls)} tabs kept)")
        try:
            hosted.capture.stop()
            old.stop()  # and its display
            hosted.start_deadline = time.monotonic() + start_seconds
            self._start_chromium(hosted, replace(hosted.options, viewport=viewport, display=None))
            self._load_state(hosted, state, self._time_left(hosted, "loading its storage"))
            self._start_capture(hosted)
            with CdpClient(hosted.browser.devtools, timeout=self._time_left(hosted, "opening its tabs")) as cdp:
                reshape.reopen(cdp, urls, timeout=self._time_left(hosted, "opening its tabs"))
        except Exception as error:  # noqa: BLE001 - whatever failed, the session has no browser left
            logger.exception("session %s: starting Chromium again failed", hosted.session_id)
            with self.lock:
                hosted.restarting, hosted.stopping = False, True
            try:
                self._teardown(hosted, save=False)
            finally:
                self.reports.ended(hosted.session_id, ENDED_BY_BROWSER_EXIT)
            return 500, {"code": "browser_start_failed", "message": "The browser could not start again at the new "
                         f"size ({start_failure(error)}); the session has ended."}
        self._sized(hosted, viewport)
        with self.lock:
            hosted.restarting = False
            stopped_meanwhile = hosted.stopping
        if stopped_meanwhile:  # its end came while it started again: it is ours to end
            self._teardown(hosted, save=False)
            return 404, {"code": "not_found", "message": "The session ended while its browser started again."}
        threading.Thread(target=self.watch, args=(hosted,), daemon=True).start()
        self.note(hosted, f"Chromium started again: pid {hosted.browser.pid}, viewport {viewport[0]}x{viewport[1]}")
        return 200, {"restarted": True}

    def load_profile(self, hosted, load: control.ProfileLoad):
        """(status, answer) for POST /sessions/{id}/profile: its state given to the running browser (its origins are
        read back at the end, as a profile given at the start)."""
        load = control.ProfileLoad.model_validate(load)
        with self.lock:
            refused = self._not_changeable(hosted)
            if refused:
                return refused
            if hosted.profile_given:
                return 409, {"code": "profile_already_loaded", "message": "The browser has been given a profile "
                             "already; it cannot take another."}
            hosted.profile_given = True
        state = load.profile_state
        try:
            self._load_state(hosted, state, storage.PAGE_TIMEOUT * 4)
        except (CdpError, OSError) as error:
            logger.warning("session %s: loading a profile failed: %s", hosted.session_id, error)
            with self.lock:  # nothing of it is the record's: the same request may come again
                hosted.profile_given = False
            return 502, {"code": "browser_unreachable", "message": "The profile could not be loaded into the browser."}
        cookies, origins = len(state.get("cookies") or ()), len(state.get("origins") or ())
        self.note(hosted, f"profile loaded: {cookies} cookies, localStorage of {origins} origins")
        return 200, control.ProfileLoaded(cookies=cookies, origins=origins).model_dump()

    def computer(self, hosted, request: control.ComputerRequest):
        """(status, answer) for POST /sessions/{id}/computer; `request.resend`: the client sent the same call again
        after giving up waiting (computer.Screen.run answers it from the first)."""
        if hosted.browser is None or hosted.stopping:
            return 404, {"code": "not_found", "message": "No such browser on this host."}
        try:
            return 200, {"results": hosted.screen.run(request.actions, resend=request.resend)}
        except computer.ActionFailed as error:
            if error.detail:  # this host's log alone: the session's log is its user's to read
                logger.warning("session %s: %s (%s)", hosted.session_id, error, error.detail)
            return error.status, {"code": "computer_action_failed", "index": error.index, "message": str(error)}

    # -- recordings (replays.py) -------------------------------------------------------------

    def start_replay(self, hosted, start: control.ReplayStart):
        """(status, answer) for POST /sessions/{id}/replays."""
        start = control.ReplayStart.model_validate(start)
        if hosted.browser is None or hosted.stopping:
            return 404, {"code": "not_found", "message": "No such browser on this host."}
        with hosted.recording_lock:
            return self._start_replay(hosted, start)

    def _start_replay(self, hosted, start):
        replay_id = start.replay_id
        if replay_id in hosted.recordings:
            return 400, {"code": "bad_request", "message": f"replay id {replay_id!r} is not a new one"}
        if any(not recording.finished.is_set() for recording in hosted.recordings.values()):
            return 409, {"code": "replay_in_progress", "message": "The session is already being recorded; stop that "
                                                                 "recording first."}
        try:
            target, offset = hosted.screen.place()
        except computer.UnknownPlace as error:
            return 502, {"code": "browser_unreachable", "message": f"The browser's page could not be recorded: {error}"}
        except (CdpError, OSError, ValueError) as error:
            logger.warning("session %s: no recording: the page could not be reached (%s: %s)", hosted.session_id,
                           type(error).__name__, error)  # this host's log alone, as for the computer API
            return 502, {"code": "browser_unreachable", "message": "The browser's page could not be reached."}
        options = {"size": hosted.screen.size, "framerate": start.framerate, "max_seconds": start.max_seconds,
                   "max_bytes": start.max_bytes,
                   "on_finished": lambda recording: self._hand_on(hosted, recording)}
        path = self.root / "replays" / f"{hosted.session_id}-{replay_id}.mp4"
        if offset is None:
            recording = replays.ScreencastRecording(replay_id, path, devtools=hosted.browser.devtools, target=target,
                                                    **options)
        else:
            recording = replays.DisplayRecording(replay_id, path, display=hosted.screen.display.name, offset=offset,
                                                 **options)
        hosted.recordings[replay_id] = recording  # before it starts: one that fails at once is handed on and forgotten
        try:
            recording.start(self._spawner(hosted, {"DISPLAY": recording.display} if offset is not None else {}))
        except (CdpError, OSError) as error:
            hosted.recordings.pop(replay_id, None)
            logger.warning("session %s: recording %s could not start (%s: %s)", hosted.session_id, replay_id,
                           type(error).__name__, error)  # this host's log alone: it names the host's files
            return 502, {"code": "replay_failed", "message": "The recording could not start."}
        self.note(hosted, f"recording {replay_id} started ({recording.framerate} fps, at most "
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

    @staticmethod
    def _spawner(hosted, variables):
        """How a session's recordings run ffmpeg: in its box (its sandbox, or this host without one)."""
        def spawn(argv, errors):
            pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": errors}
            return hosted.box.popen(argv, variables, **pipes)

        return spawn

    def _stop_recordings(self, hosted):
        """A session's recordings end with it: all asked at once, then each waited for."""
        running = list(hosted.recordings.values())
        for recording in running:
            threading.Thread(target=recording.stop, daemon=True).start()
        for recording in running:
            recording.finished.wait(replays.STOP_GRACE_SECONDS * 3)

    def _hand_on(self, hosted, recording):
        """Send a finished recording to the app (replays.send), say how it went in the session's log, forget it."""
        try:
            status, error = replays.send(self.client, recording, give_up_after=REPLAY_UPLOAD_SECONDS)
            if error:
                self.note(hosted, f"recording {recording.replay_id} failed: {error}", level=logging.WARNING)
            elif status == "saved":
                self.note(hosted, f"recording {recording.replay_id} saved ({recording.written} bytes, "
                                  f"{recording.finished_at - recording.started_at:.1f} s)")
        finally:
            for leftover in (recording.path, recording.path.with_suffix(".log")):
                leftover.unlink(missing_ok=True)
            hosted.recordings.pop(recording.replay_id, None)

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

    # -- HTTP --------------------------------------------------------------------------------

    def handler_class(self):
        server = self

        class Handler(ControlHandler):
            host = server

        return Handler


class ExtensionUnavailable(Exception):
    """An extension's archive could not be had from the app (unreachable, refused, not what its hash says)."""

    def __init__(self, extension_id, error):
        super().__init__(f"extension {extension_id}: {type(error).__name__}: {error}")
        self.extension_id = extension_id


def start_failure(error):
    """What the tenant is told of a start that failed with `error`, by kind: never the error's own text, which
    names the host's files, tools, their output and addresses (the host's log keeps it)."""
    if isinstance(error, ExtensionUnavailable):
        return f"The browser host could not fetch extension {error.extension_id} from the API; retry later."
    if isinstance(error, sandbox.SandboxError):
        return "The browser's sandbox could not be set up."
    exited = CHROMIUM_EXITED.match(str(error)) if isinstance(error, launch.LaunchError) else None
    if exited:
        return f"Chromium exited with code {exited.group(1)} before it answered."
    return "The browser host could not start the browser (its log says why)."


def _process_exists(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove(folder):
    """Remove a browser's folder; a file still being released can make one attempt fail."""
    for delay in (0, 0.2, 0.4, 0.8):
        time.sleep(delay)
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            return
    logger.warning("could not remove %s", folder)
