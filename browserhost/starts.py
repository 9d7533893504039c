"""Starting a session's browser (POST /sessions): what this machine can start (Chromium, Xvfb, sandboxes), the start's
checks, then, within the start's deadline, the session's box, its extensions (from the cache), Chromium, the
profile's state, the telemetry capture, the tail of Chromium's output and the start page.
"""
import logging
import re
import shutil
import time
import zipfile
from dataclasses import replace

from browserhost import (
    computer,
    launch,
    launch_options,
    network,
    profile_state,
    resolver,
    sandbox,
    sandbox_policy,
    unsandboxed,
)
from browserhost.capture import Capture, LogTail
from browserhost.cdp import CdpClient, CdpError
from browserhost.display import Display
from browserhost.extension_cache import ArchiveMismatch
from browserhost.uplink import AppUnreachable, Refused
from lantern_wire import control

logger = logging.getLogger(__name__)
# The supervisor_process name of Chromium's own output in a session's logs.
CHROMIUM_LOG = "chromium"
# Lines of Chromium's output that are not served as its log (they stay in chromium.log on the host): a
# sandbox has no D-Bus, and Chromium says so some thirty times at each start, as ERRORs that mean nothing.
HARMLESS_CHROMIUM_LINES = re.compile(r":ERROR:dbus/(bus|object_proxy)\.cc")
# Of Chromium's output, what a session keeps (the host's file, the app's log lines): a few KB is usual.
CHROMIUM_LOG_MAX_BYTES = 16 * 1024 * 1024
# launch.py's words for a Chromium that ended during its start: its exit code is the one detail a tenant is told.
CHROMIUM_EXITED = re.compile(r"Chromium exited with (-?\d+) before")


class Starts:
    def __init__(self, settings, registry):
        """`settings`: browserhost.settings.load(); `registry`: the host's registry.Registry."""
        self.settings, self.registry, self.reports = settings, registry, registry.reports
        self.binary = launch.find_chromium(settings.browser_chromium_path)
        self.headful = unsandboxed.xvfb_available()
        # None when the operator turned sandboxes off (BROWSER_SANDBOX=off); what the machine lacks to
        # sandbox is probed when the host starts (cannot_sandbox).
        self.policy = (None if settings.browser_sandbox == "off"
                       else sandbox_policy.SandboxPolicy.from_settings(settings))
        self.cannot_sandbox = []
        self.extensions = None  # the host's extension_cache.ExtensionCache, once its folder is known

    def unavailable_reason(self):
        """Why this host cannot start browsers (None: it can)."""
        if not self.binary:
            return "Chromium is not installed on this host: apt-get install chromium (or set BROWSER_CHROMIUM_PATH)"
        if self.cannot_sandbox:
            return (f"it cannot sandbox browsers ({'; '.join(self.cannot_sandbox)}); BROWSER_SANDBOX=off runs them "
                    "without one (docs/browsers.md, Isolation, says what that gives up)")
        return None

    def start_browser(self, request: control.StartRequest):
        """(status, answer) for POST /sessions (its JSON form is taken too, as in-process callers write it)."""
        request = control.StartRequest.model_validate(request)
        session_id, start_seconds, spec = request.session_id, request.start_seconds, request.spec
        refused = self._refusal(session_id, spec)
        if refused:
            return refused
        hosted, refused = self.registry.admit(session_id, categories=request.categories.names,
                                              categories_revision=request.categories.revision,
                                              start_deadline=time.monotonic() + start_seconds)
        if refused:
            return refused
        try:
            self._launch(hosted, request)
        except Exception as error:  # noqa: BLE001 - whatever failed, nothing of the session may stay
            # A browser that did not answer within the start's time: the machine is too busy, a later start may do.
            busy = isinstance(error, launch_options.StartTimedOut) or (
                isinstance(error, CdpError) and time.monotonic() >= hosted.start_deadline)
            if busy:
                logger.warning("session %s: %s", session_id, str(error).splitlines()[0])
            else:
                logger.exception("starting the browser of session %s failed", session_id)  # the detail: this log only
            self.registry.end(hosted)  # the app hears of it in this answer, and of a stop's reason meanwhile
            if busy:
                return 503, {"code": "browser_host_busy", "message": f"The browser did not start within the start "
                             f"deadline ({start_seconds:g} s): browser host {self.registry.name} is too busy; retry "
                             "later"}
            return 500, {"code": "browser_start_failed", "message": start_failure(error)}
        with self.registry.lock:
            hosted.starting = False
            stopped_meanwhile = hosted.stopping
        if stopped_meanwhile:  # a stop came while it started (the worker gave up, the host stops): ours to end
            self.registry.end(hosted)
            return 503, {"code": "browser_start_failed", "message": "The session was stopped while its browser "
                                                                    "started."}
        self.registry.watch_in_background(hosted)
        return 201, {"pid": hosted.browser.pid, "browser_path": hosted.browser.browser_path}

    def _refusal(self, session_id, spec):
        """(status, answer) refusing a start this host cannot do, or None."""
        if self.unavailable_reason():
            return 503, {"code": "browser_host_unavailable", "message": f"Browser host {self.registry.name} cannot "
                         f"start browsers: {self.unavailable_reason()}"}
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
        return None

    def _launch(self, hosted, request):
        spec = request.spec
        # The box is the session's before anything of it is made: whatever cuts the start off, the teardown removes it.
        hosted.box = box = (unsandboxed.HostBox(hosted.workdir) if self.policy is None else sandbox.Sandbox(
            hosted.workdir, self.policy, memory_mb=spec.memory_mb, allowed_hosts=spec.allowed_hosts))
        if hosted.workdir.exists():  # kept by a teardown whose box could not be removed: what is left goes first
            box.destroy()
            shutil.rmtree(hosted.workdir)
        hosted.workdir.mkdir(parents=True)
        box.create()
        extension_dirs = [self._unpack(hosted, hosted.box.extensions / e.id, e) for e in spec.extensions]
        # start_url: loaded by the capture (_open_start_page)
        self.start_chromium(hosted, launch_options.LaunchOptions.from_spec(spec, extension_dirs=extension_dirs))
        state = request.profile_state
        if state:
            profile_state.load(hosted, state, time_left(hosted, "loading the profile"), self.registry.note)
        self.start_capture(hosted)
        hosted.log_tail = LogTail(hosted.browser.log_path, lambda lines: self.reports.logs(
            hosted.session_id, "supervisor", CHROMIUM_LOG,
            [{"message": line} for line in lines if not HARMLESS_CHROMIUM_LINES.search(line)]),
            max_bytes=CHROMIUM_LOG_MAX_BYTES).start()
        self.registry.note(hosted, f"Chromium started on browser host {self.registry.name}: pid {hosted.browser.pid}, "
                                   f"{'headless' if hosted.options.headless else 'headful'}, "
                                   + (f"in a sandbox of its own (memory cap {hosted.box.memory_mb} MB)"
                                      if hosted.box.sandboxed else "WITHOUT a sandbox (BROWSER_SANDBOX=off)"))
        if spec.start_url:
            self._open_start_page(hosted, spec.start_url)

    def start_chromium(self, hosted, options):
        """Chromium with `options` (on an X display of its box's when headful), and the computer API's screen of it,
        within the session's start deadline."""
        if not options.headless:
            hosted.x_screen = launch_options.screen_for(options.viewport, kiosk=options.kiosk)
            options = replace(options, screen=hosted.x_screen)
        hosted.options = options
        hosted.browser = launch.Browser.start(self.binary, hosted.workdir, options, box=hosted.box,
                                              timeout=max(hosted.start_deadline - time.monotonic(), 0.0))
        size = options.viewport or launch_options.DEFAULT_SCREEN
        display = None if options.headless else Display(hosted.box.display, hosted.box, size)
        hosted.screen = computer.Screen(hosted.browser.devtools, display=display, size=size)
        (hosted.workdir / "chromium.pgid").write_text(str(hosted.browser.process.pid))  # its group

    def start_capture(self, hosted):
        note = self.registry.note
        hosted.capture = Capture(hosted.browser.devtools, categories=lambda: hosted.categories,
                                 sink=lambda events: self.reports.telemetry(hosted.session_id, events),
                                 on_drops=lambda total: note(
                                     hosted, f"telemetry capture: {total} events dropped so far (it could not keep "
                                             "up, or CDP messages were past BROWSER_CAPTURE_MAX_MESSAGE_MB)",
                                     level=logging.WARNING),
                                 max_message=self.settings.browser_capture_max_message_mb * 1024 * 1024).start()

    def _open_start_page(self, hosted, url):
        """Navigate the first tab (Chromium started it on about:blank) to the session's start page once the capture
        has set the tab up, so that the page's events are all captured; when the capture cannot (its connection
        lost), over a connection of its own (the page's first events are lost: the session's log says so). Within
        the start's deadline: StartTimedOut past it."""
        if hosted.capture.load_start_page(url, timeout=time_left(hosted, "opening the start page")):
            return
        with CdpClient(hosted.browser.devtools, timeout=time_left(hosted, "opening the start page")) as cdp:
            tab = next((info for info in cdp.call("Target.getTargets")["targetInfos"]
                        if info["type"] == "page" and info["url"] == "about:blank"), None)
            if tab is None:
                cdp.call("Target.createTarget", {"url": url})
            else:
                session = cdp.call("Target.attachToTarget", {"targetId": tab["targetId"], "flatten": True})
                # Not waited for (its answer comes once the page answers): sent before the close, it goes on.
                cdp.send("Page.navigate", {"url": url}, session_id=session["sessionId"])
        self.registry.note(hosted, "the start page was opened without the telemetry capture, which could not open "
                                   "it: its first events may be missing", level=logging.WARNING)

    def _unpack(self, hosted, folder, extension):
        """An extension's archive (validated at upload; from the cache, fetched once) into `folder`, its manifest's
        folder returned; ExtensionUnavailable when the app did not give it."""
        try:  # within the start's deadline; whatever the cache fails with, the tenant is told in its words
            archive_file = self.extensions.open(extension.sha256, patience=time_left(hosted, "fetching extensions"))
        except (AppUnreachable, Refused, ArchiveMismatch, ValueError, OSError) as error:
            raise ExtensionUnavailable(extension.id, error) from error
        with archive_file, zipfile.ZipFile(archive_file) as archive:
            for entry in archive.infolist():
                target = (folder / entry.filename).resolve()
                if not target.is_relative_to(folder.resolve()):
                    raise ValueError(f"extension entry {entry.filename!r} leaves its folder")
            archive.extractall(folder)
        manifests = sorted(folder.rglob("manifest.json"), key=lambda p: len(p.parts))
        return str(manifests[0].parent if manifests else folder)


def time_left(hosted, step):
    """Seconds left of the session's start for `step`; StartTimedOut when none is (the machine is too busy)."""
    left = hosted.start_deadline - time.monotonic()
    if left <= 0:
        raise launch_options.StartTimedOut(f"the start deadline passed before {step}")
    return left


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
    if isinstance(error, network.SandboxError):
        return "The browser's sandbox could not be set up."
    exited = CHROMIUM_EXITED.match(str(error)) if isinstance(error, launch_options.LaunchError) else None
    if exited:
        return f"Chromium exited with code {exited.group(1)} before it answered."
    return "The browser host could not start the browser (its log says why)."
