"""Starting and stopping one Chromium for the browser host.

    options = LaunchOptions(viewport=(1280, 720), timezone="Europe/Paris", locale="fr-FR")
    browser = Browser.start(find_chromium(), workdir, options)
    ... browser.ws_url (ws://127.0.0.1:<port>/devtools/browser/<uuid>) ...
    browser.stop()

Chromium runs in its own process group (`start_new_session`), so stopping it, or killing it
after a host restart from a recorded group id (`kill_group`), takes the renderers, the GPU and
utility processes with it (the crash handler starts in a session of its own, but exits with the
browser; its database is put in the workdir). The DevTools port is chosen by Chromium
(`--remote-debugging-port=0`) and read from `<user-data>/DevToolsActivePort`. Each browser has its
own TMPDIR under its workdir, reached through a short link in /tmp when that path is long.

What it is started with (its options, command line and screen) is launch_options.py's.
"""
import logging
import os
import shutil
import subprocess
import threading
import time
from dataclasses import replace
from pathlib import Path

from browserhost import bounded, reshape, sandbox
from browserhost.cdp import CdpClient
from browserhost.launch_options import (
    CHROME_HEIGHT,
    DEFAULT_SCREEN,
    LaunchError,
    StartTimedOut,
    command,
    headful,
    kiosk,
    screen_for,
)
from browserhost.unsandboxed import HostBox, kill_group

log = logging.getLogger(__name__)

DEFAULT_CHROMIUM = "/usr/lib/chromium/chromium"
LOG_TAIL_CHARS = 3000
# What chromium.log takes of the host's disk at most: more than the session's log hands on (starts.py's
# CHROMIUM_LOG_MAX_BYTES, past which its LogTail empties the file); the rest is dropped.
LOG_BYTES = 32 * 1024 * 1024
LOG_WAIT_SECONDS = 5  # for a browser's output to be in chromium.log once its processes are killed

# (binary, headful) -> browser UI height, once measured in this process.
_measured_chrome_heights = {}


def find_chromium(configured=None):
    """The configured executable if usable, else Debian's Chromium binary (never the /usr/bin
    wrapper, which sources /etc/chromium.d and adds flags); None when there is none."""
    for candidate in (configured, DEFAULT_CHROMIUM):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


class Browser:
    """One running Chromium: `Browser.start(...)`, then `devtools` (or `ws_url` without a sandbox), `stop()`."""

    def __init__(self, binary, process, workdir, devtools, log_path, box):
        self.binary = binary
        self.headful = False  # on a screen: its windows are as high as a headless one's, but measured apart
        self.own_ui = False  # policies or extensions may add to its UI (a bookmark bar, a toolbar)
        self.chrome_height = None  # its UI's height, once known
        self.process = process
        # Chromium's own process id on this host: the process started here (also its process group
        # id), or in a sandbox, the browser process found in its cgroup.
        self.pid = box.browser_pid(process)
        self.workdir = Path(workdir)
        self.devtools = devtools
        self.log_path = log_path
        self.tmpdir = box.tmpdir  # TMPDIR as Chromium got it: workdir/tmp or a short link to it (no sandbox)
        self.box = box

    @property
    def port(self):
        return self.devtools.port

    @property
    def browser_path(self):
        return self.devtools.browser_path  # /devtools/browser/<uuid>

    @property
    def ws_url(self):
        return self.devtools.ws_url()

    @property
    def alive(self):
        return self.process.poll() is None

    @property
    def exit_status(self):
        """The process's returncode once it ended (a signal's as its negative number), else None. In a
        sandbox, bubblewrap passes on a signal that ended Chromium as 128 + its number."""
        return self.box.exit_status(self.process.poll())

    @classmethod
    def start(cls, binary, workdir, options, *, timeout=20.0, box=None):
        """Start Chromium on `workdir` (chromium.log), inside `box` (a created sandbox.Sandbox, or by default this
        host's unsandboxed.HostBox), wait until its DevTools endpoint answers, and give its window the viewport;
        LaunchError, with the log's tail, if it does not (StartTimedOut when it did not within `timeout` seconds,
        all of the start)."""
        deadline = time.monotonic() + timeout
        box = box or HostBox(workdir).create()
        browser = cls._launch(binary, workdir, options, timeout, box)
        browser.headful = headful(options)
        browser.own_ui = bool(options.chrome_policy or options.extension_dirs)
        try:
            if kiosk(options):
                with CdpClient(browser.devtools, timeout=max(deadline - time.monotonic(), 0.5)) as cdp:
                    if not reshape.await_kiosk(cdp, options.viewport or DEFAULT_SCREEN):
                        log.warning("a kiosk window did not take the viewport %s in time", options.viewport)
            elif options.viewport:
                browser.fit(options.viewport, timeout=max(deadline - time.monotonic(), 0.5))
        except Exception as error:
            browser.stop(grace=0)
            failed = StartTimedOut if time.monotonic() > deadline else LaunchError
            raise failed(f"sizing the browser's window failed: {error}") from error
        box.bound_cpu()
        return browser

    def fit(self, viewport, *, timeout=10.0, settle=False):
        """Give every window of the browser the inner size `viewport`, and so every window it opens later; with
        `settle` (a live change), once the pages in front have it (reshape.fit_windows)."""
        with CdpClient(self.devtools, timeout=timeout) as cdp:
            return reshape.fit_windows(cdp, viewport, self._chrome_height(cdp, timeout), timeout, settle=settle)

    def _chrome_height(self, cdp, timeout):
        """The browser UI's height: measured once per binary and mode on a browser with nothing of its own in its
        UI; a browser with policies or extensions (a bookmark bar, an extension's toolbar) is measured for itself,
        and its height is never another session's."""
        if self.chrome_height is not None:
            return self.chrome_height
        measured = (self.binary, self.headful)
        if not self.own_ui and measured in _measured_chrome_heights:
            self.chrome_height = _measured_chrome_heights[measured]
            return self.chrome_height
        self.chrome_height = _measure_chrome_height(cdp, timeout)
        if not self.own_ui:
            _measured_chrome_heights[measured] = self.chrome_height
        if self.chrome_height != CHROME_HEIGHT:
            log.warning("browser UI is %s px high, not %s", self.chrome_height, CHROME_HEIGHT)
        return self.chrome_height

    @classmethod
    def _launch(cls, binary, workdir, options, timeout, box):
        """Chromium in `box`: its profile in the box's home, extensions bound read-only, an X display of its own
        when headful (a sandbox's started inside it), its DevTools found where the box has them."""
        workdir = Path(workdir).absolute()
        chrome_height = _measured_chrome_heights.get((binary, headful(options)), CHROME_HEIGHT)
        screen = None
        if not options.headless and not options.display:
            screen = options.screen or screen_for(options.viewport, chrome_height, kiosk=options.kiosk)
            options = replace(options, display=box.start_display(screen))
        argv, env = command(binary, f"{box.inside_home}/{sandbox.PROFILE}",
                            replace(options, extension_dirs=box.inside_extensions(options.extension_dirs)),
                            chrome_height=chrome_height, sandboxed=box.sandboxed)
        env["BREAKPAD_DUMP_LOCATION"] = f"{box.inside_home}/.crash-dumps"  # its database, else ~/.config/chromium
        log_path = workdir / "chromium.log"
        # Its output through a pipe the host copies to chromium.log, bounded: a process of the session can take
        # Chromium's descriptors, and a file of the host's would be its to fill.
        output, pump = bounded.pipe_to_log(log_path, LOG_BYTES)
        try:
            process = box.popen(argv, env, binds=[(box.extensions, sandbox.INSIDE_EXTENSIONS),
                                                  *box.chrome_policy_binds(options.chrome_policy)], screen=screen,
                                devtools=True, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                                start_new_session=True)
        finally:
            os.close(output)
        try:
            devtools = _wait_for_devtools(process, time.monotonic() + timeout, box.find_devtools)
        except LaunchError as error:
            box.stop_browser(process, grace=0)
            pump.wait(LOG_WAIT_SECONDS)  # its last words
            raise type(error)(f"{error}; chromium.log ends:\n{bounded.tail(log_path, LOG_TAIL_CHARS)}") from None
        return cls(binary, process, workdir, devtools, log_path, box)

    def stop(self, grace=2.0):
        """SIGTERM to the browser's processes (every process of a sandbox), SIGKILL to what is left after `grace`
        seconds; the exit status. Idempotent."""
        return self.box.stop_browser(self.process, grace)


def _measure_chrome_height(cdp, timeout):
    """outerHeight - innerHeight of a fresh blank tab (the first tab is the session's, left as it is)."""
    target = cdp.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    gone = threading.Event()
    cdp.on("Target.detachedFromTarget", lambda params, _: params.get("targetId") == target and gone.set())
    session = cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    result = cdp.call("Runtime.evaluate", {"expression": "outerHeight - innerHeight", "returnByValue": True},
                      session_id=session)
    cdp.call("Target.closeTarget", {"targetId": target})
    # closeTarget answers before the tab is gone; a client listing pages meanwhile would find it, and its
    # commands to it would never be answered.
    gone.wait(timeout)
    return result["result"]["value"]


def kill_leftovers(sessions_root, sandbox_root=None):
    """Kill the process groups recorded in each session folder under `sessions_root` (a host that
    was killed left them running), remove what their sandboxes left under `sandbox_root` (when the
    host sandboxes), and remove the folders; the (record, id) pairs it killed."""
    killed = []
    for workdir in (sessions_root.iterdir() if sessions_root.is_dir() else ()):
        for record in ("chromium.pgid", "xvfb.pgid"):
            try:
                pgid = int((workdir / record).read_text())
            except (OSError, ValueError):
                continue
            # Checked against the command line: after a reboot the id may belong to anything.
            if kill_group(pgid, grace=0, expect_in_cmdline=str(workdir) if record == "chromium.pgid" else "Xvfb"):
                killed.append((record, pgid))
        if sandbox_root is not None and sandbox.remove_leftovers(workdir, sandbox_root):
            killed.append(("sandbox", sandbox.sandbox_name(workdir)))
        shutil.rmtree(workdir, ignore_errors=True)
    return killed


def _wait_for_devtools(process, deadline, find):
    """The browser's DevTools once `find()` gives them (it answers None until then)."""
    while True:
        if process.poll() is not None:
            raise LaunchError(f"Chromium exited with {process.returncode} before its DevTools endpoint answered")
        if time.monotonic() > deadline:
            raise StartTimedOut("Chromium's DevTools endpoint did not answer in time")
        devtools = find()
        if devtools is not None:
            return devtools
        time.sleep(0.02)
