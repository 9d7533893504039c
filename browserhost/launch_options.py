"""What a Chromium of the browser host is started with: its options (LaunchOptions, from the app's BrowserSpec), its
command line and environment (command), and the X screen a headful one needs (screen_for). launch.py starts it.

The viewport. In headless "new" mode Chromium lays out a real browser window, tab strip and
toolbar included, so a window 1024x768 gives a page 1024x681 (Chromium 156). Each window is therefore made
taller by the browser UI's height (CHROME_HEIGHT: 87 px measured here, headless and headful on Xvfb alike),
so every page sees exactly the requested innerWidth x innerHeight. Chromium is started without
`--window-size` (which would give every new window that size for the browser's whole life) and its first
window is sized over CDP (reshape.fit_windows) before anything loads: new windows take the last active
one's size, so new tabs, pages a CDP client such as Playwright opens, and a later new viewport
(running.py's resize) reach every window. `Emulation.setDeviceMetricsOverride` would not do: it is per
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
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from browserhost import resolver, sandbox_policy

# Height of the tab strip and toolbar of a window (measured on Chromium 156, headless and on Xvfb).
CHROME_HEIGHT = 87
DEFAULT_SCREEN = (1920, 1080)


class LaunchError(RuntimeError):
    """Chromium did not start (its log's tail is in the message)."""


class StartTimedOut(LaunchError):
    """Chromium did not answer within the start's time: on a busy machine, a start that may succeed later."""


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
        f"--remote-debugging-port={sandbox_policy.DEVTOOLS_PORT if sandboxed else 0}",
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
    argv.append("about:blank")  # the session's start page is its capture's to load, once attached (starts.py)
    return argv, env


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
