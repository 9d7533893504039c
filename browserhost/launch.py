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

The viewport. In headless "new" mode Chromium lays out a real browser window, tab strip and
toolbar included, so a window 1024x768 gives a page 1024x681 (Chromium 156). Each window is therefore made
taller by the browser UI's height (CHROME_HEIGHT: 87 px measured here, headless and headful on Xvfb alike),
so every page sees exactly the requested innerWidth x innerHeight. Chromium is started without
`--window-size` (which would give every new window that size for the browser's whole life) and its first
window is sized over CDP (reshape.fit_windows) before anything loads: new windows take the last active
one's size, so new tabs, pages a CDP client such as Playwright opens, and a later new viewport
(server.py's resize) reach every window. `Emulation.setDeviceMetricsOverride` would not do: it is per
DevTools session, so it would have to be re-applied to each page as it appears, before its scripts run,
and a client's own emulation could undo it. The first start of each mode in a process measures the UI
height on a blank tab. `--test-type` keeps the "unsupported command-line flag: --no-sandbox" infobar
away: it would take 56 px from the first tab a moment after the start. Headless mode reports an 800x600
screen; the screen is made 1920x1080 (or the window's size if larger), so the window fits on it as on a
real desktop. A width under 500 px becomes 500.

Kiosk (`kiosk`, headful only: a headless screen shows no browser UI anyway): `--kiosk` takes the tab strip
and toolbar away; with no window manager on Xvfb its window keeps the size and place it was started with,
so it is started at the viewport's size in the screen's corner, and the screen is one pixel wider and
higher than the viewport (a window as wide or as high as its screen is made a pixel smaller).

The allowlist (`allowed_hosts`) is `--host-resolver-rules`: every name and IP literal (IPv6 and
numeric forms such as 2130706433 included, which Chromium canonicalizes first) resolves to
nothing except the listed hosts and their subdomains (as resolver.normalize_host writes them: an
internationalized name in the xn-- form Chromium looks up); `localhost` is blocked unless listed. It
binds what Chromium resolves itself, not what a proxy given by --proxy-server would resolve.
"""
import functools
import logging
import os
import re
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from browserhost import reshape, resolver, sandbox
from browserhost.cdp import CdpClient

# group_alive, start_xvfb, xvfb_available: also what the host and tests know as launch.*.
from browserhost.unsandboxed import HostBox, group_alive, kill_group, start_xvfb, xvfb_available  # noqa: F401

log = logging.getLogger(__name__)

DEFAULT_CHROMIUM = "/usr/lib/chromium/chromium"
# Height of the tab strip and toolbar of a window (measured on Chromium 156, headless and on Xvfb).
CHROME_HEIGHT = 87
DEFAULT_SCREEN = (1920, 1080)
LOG_TAIL_CHARS = 3000

# (binary, headful) -> browser UI height, once measured in this process.
_measured_chrome_heights = {}


class LaunchError(RuntimeError):
    """Chromium did not start (its log's tail is in the message)."""


class StartTimedOut(LaunchError):
    """Chromium did not answer within the start's time: on a busy machine, a start that may succeed later."""


def find_chromium(configured=None):
    """The configured executable if usable, else Debian's Chromium binary (never the /usr/bin
    wrapper, which sources /etc/chromium.d and adds flags); None when there is none."""
    for candidate in (configured, DEFAULT_CHROMIUM):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


@dataclass
class LaunchOptions:
    headless: bool = True
    viewport: tuple[int, int] | None = None     # innerWidth, innerHeight; Chromium widens a width under 500
    timezone: str | None = None                 # IANA name, e.g. "Asia/Tokyo"
    locale: str | None = None                   # BCP 47, e.g. "fr-FR"
    extension_dirs: list[str] = field(default_factory=list)  # unpacked extensions
    allowed_hosts: list[str] | None = None      # None: no restriction
    stealth: bool = False
    display: str | None = None                  # X display (":99") for a headful browser
    kiosk: bool = False                         # a headful browser without its tab strip and toolbar
    chrome_policy: dict | None = None           # enterprise policies (a sandbox's managed policy file)
    screen: tuple | None = None                 # a headful sandbox's X screen (width, height); else screen_for's

    @classmethod
    def from_spec(cls, spec, *, extension_dirs=()):
        """The options of a browser the app specified (lantern_wire.control.BrowserSpec), with its extensions
        unpacked in `extension_dirs`; its display and screen are the host's to choose."""
        return cls(headless=spec.headless, viewport=spec.viewport.size, timezone=spec.location.timezone,
                   locale=spec.location.locale, extension_dirs=list(extension_dirs),
                   allowed_hosts=None if spec.allowed_hosts is None else list(spec.allowed_hosts),
                   stealth=spec.stealth, kiosk=spec.kiosk_mode, chrome_policy=spec.chrome_policy)


@functools.cache
def chromium_version(binary):
    """'156.0.8078.79' from `chromium --version`, asked once per binary."""
    result = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30, check=False)
    match = re.search(r"(\d+)\.(\d+)\.(\d+)\.(\d+)", result.stdout)
    if not match:
        raise LaunchError(f"cannot tell the version of {binary}: {result.stdout.strip()} {result.stderr.strip()}")
    return match.group(0)


def stealth_user_agent(binary):
    """The user agent of a desktop Chrome of the same major version (reduced form, as Chrome sends)."""
    major = chromium_version(binary).split(".")[0]
    return (f"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
            f"Chrome/{major}.0.0.0 Safari/537.36")


def host_resolver_rules(allowed_hosts):
    """Rules under which only `allowed_hosts` (and subdomains of the names among them) resolve; ValueError for
    one that is not a host."""
    rules = ["MAP * ~NOTFOUND"]
    for host in resolver.normalize_hosts(allowed_hosts):
        if not resolver.is_ip(host):
            rules += [f"EXCLUDE {host}", f"EXCLUDE *.{host}"]
        else:
            rules.append(f"EXCLUDE [{host}]" if ":" in host else f"EXCLUDE {host}")
    return ", ".join(rules)


def command(binary, user_data_dir, options, *, chrome_height=CHROME_HEIGHT, sandboxed=False):
    """(argv, environment additions) to start `binary` on `user_data_dir` with `options`; `sandboxed`:
    inside a sandbox (sandbox.py), with its fixed DevTools port and Chromium's own sandbox on."""
    argv = [binary]
    env = {}
    if options.display:
        env["DISPLAY"] = options.display
    else:
        argv.append("--headless=new")
    if os.geteuid() == 0 and not sandboxed:
        argv.append("--no-sandbox")  # Chromium refuses to run as root otherwise
    argv += [
        "--disable-dev-shm-usage",
        # No --remote-allow-origins: clients that send no Origin header (the host's own CDP client,
        # the relay, which strips it) are let in, and web pages, which always send one, are not.
        f"--remote-debugging-port={sandbox.DEVTOOLS_PORT if sandboxed else 0}",
        f"--user-data-dir={user_data_dir}",
        "--no-first-run", "--no-default-browser-check", "--disable-component-update",
        "--password-store=basic", "--use-mock-keychain",
        # (No --disable-crash-reporter: Chromium 156 has no such switch, and neither it nor --disable-breakpad
        # stops the crash handler; --disable-crashpad-for-testing does, but then renderers die on start.)
        # Unpacked extensions (--load-extension) need no network; policy-installed ones would.
        "--disable-background-networking",
        "--test-type",  # no infobar about --no-sandbox, which would shrink the page
        # A quick run of a display's wheel clicks (the computer API's scroll) scrolls each in full: smooth
        # scrolling drops part of them (of 1,000 clicks at once, 22 were lost).
        "--disable-smooth-scrolling",
    ]
    window = None
    if options.viewport:
        window = (options.viewport[0], options.viewport[1] + chrome_height)
    if options.kiosk and options.display:
        width, height = options.viewport or DEFAULT_SCREEN
        argv += ["--kiosk", f"--window-size={width},{height}", "--window-position=0,0"]
    if not options.display:
        screen = (max(DEFAULT_SCREEN[0], window[0]), max(DEFAULT_SCREEN[1], window[1])) if window else DEFAULT_SCREEN
        argv.append(f"--screen-info={{0,0 {screen[0]}x{screen[1]}}}")
    if options.locale:
        language = options.locale.split("-")[0]
        accept = options.locale if language == options.locale else f"{options.locale},{language}"
        argv += [f"--lang={options.locale}", f"--accept-lang={accept}"]
    if options.timezone:
        env["TZ"] = options.timezone
    if options.extension_dirs:
        folders = [str(Path(folder).resolve()) for folder in options.extension_dirs]
        if any("," in folder for folder in folders):
            raise ValueError(f"an extension folder's path may not hold a comma: {folders}")
        argv.append("--load-extension=" + ",".join(folders))
    if options.allowed_hosts is not None:
        argv.append(f"--host-resolver-rules={host_resolver_rules(options.allowed_hosts)}")
    if options.stealth:
        argv += [f"--user-agent={stealth_user_agent(binary)}", "--disable-blink-features=AutomationControlled"]
    argv.append("about:blank")  # the session's start page is its capture's to load, once attached (server.py)
    return argv, env


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
        with open(log_path, "ab") as log_file:
            process = box.popen(argv, env, binds=[(box.extensions, sandbox.INSIDE_EXTENSIONS),
                                                  *box.chrome_policy_binds(options.chrome_policy)], screen=screen,
                                devtools=True, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            devtools = _wait_for_devtools(process, time.monotonic() + timeout, box.find_devtools)
        except LaunchError as error:
            box.stop_browser(process, grace=0)
            raise type(error)(f"{error}; chromium.log ends:\n{_tail(log_path)}") from None
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


def headful(options):
    """Whether the options start a browser on a screen (a display given, or one its sandbox starts)."""
    return bool(options.display) or not options.headless


def kiosk(options):
    """Whether the options start a kiosk: only a headful browser has browser UI to take away."""
    return options.kiosk and headful(options)


# Chromium's own window frame on a display without a window manager: a shadow around the window, inside its
# X window (measured: the page starts 10 px from the window's left and right edges, and 10 below its top).
FRAME_MARGIN = 10


def screen_for(viewport, chrome_height=CHROME_HEIGHT, *, kiosk=False):
    """The X screen of a headful browser: DEFAULT_SCREEN, or larger than the window with its frame, so that the
    whole page is on the screen (the computer API's screenshots grab it there), and a window as wide or as high
    as its screen is never made a pixel smaller (a 1920x1080 page on a 1920-wide screen measures 1919). A kiosk's
    screen is its window's (the viewport, at the screen's corner) and that pixel."""
    if kiosk:
        width, height = viewport or DEFAULT_SCREEN
        return width + 1, height + 1
    if not viewport:
        return DEFAULT_SCREEN
    return (max(DEFAULT_SCREEN[0], viewport[0] + 2 * FRAME_MARGIN + 1),
            max(DEFAULT_SCREEN[1], viewport[1] + chrome_height + 2 * FRAME_MARGIN + 1))


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


def _tail(path):
    try:
        return Path(path).read_text(errors="replace")[-LOG_TAIL_CHARS:]
    except OSError:
        return ""
