"""The browser host's settings, from `LANTERN_<NAME>` environment variables (the names the app's settings use,
so one environment file can serve both on one machine); the command line's options come on top.

The host reads no file of the app: no database URL, no encryption keys. What it needs of the app is
where to reach it (APP_URL) and its own credential (`flask browsers hosts add NAME` prints it once).
"""
import os
from pathlib import Path

# Settings whose default is None but whose value is a whole number.
WHOLE_NUMBERS = ("BROWSER_HOST_CAPACITY", "BROWSER_SANDBOXES_MEMORY_MB")
DEFAULTS = {
    # The app's base URL as this host reaches it (its internal API for hosts), e.g. http://10.0.0.5:8000.
    "APP_URL": "http://127.0.0.1:8000",
    # This host's credential, or a file holding it (mode 0600; the credential wins when both are set).
    "BROWSER_HOST_CREDENTIAL": None,
    "BROWSER_HOST_CREDENTIAL_FILE": None,
    # Most browsers at once (None: 80% of the machine's memory / BROWSER_HOST_MEMORY_PER_BROWSER_MB, as an
    # idle headless Chromium is ~380 MB PSS here).
    "BROWSER_HOST_CAPACITY": None,
    "BROWSER_HOST_MEMORY_PER_BROWSER_MB": 512,
    # The browsers' folders (None: instance/browser-host under the working folder).
    "BROWSER_HOST_DIR": None,
    # Chromium (None: Debian's /usr/lib/chromium/chromium).
    "BROWSER_CHROMIUM_PATH": None,
    # Reports (telemetry, log lines) waiting for the app, at most: past it they are dropped and counted (the
    # app may be away; capture never waits for it).
    "BROWSER_HOST_REPORT_QUEUE": 200_000,
    # Extension archives this host keeps once fetched from the app (browserhost/extension_cache.py), in MiB at most:
    # past it the least recently used go, fetched again when a session names them.
    "BROWSER_EXTENSION_CACHE_MB": 1024,
    # The most of one CDP message a session's telemetry capture holds, in MiB: a longer one (a page logging a
    # 200 MB string) is skipped while it is read and counted as dropped, so the host's memory stays bounded.
    "BROWSER_CAPTURE_MAX_MESSAGE_MB": 16,
    # Sandboxes (browserhost/sandbox.py; docs/browsers.md, "Isolation"). "on": each session's browser runs in
    # a sandbox of its own (own files, unprivileged user, network namespace, cgroup), and a host that cannot
    # make one starts no browser and says why; "off": browsers run as the host's user on its files and
    # network, with a warning at the host's start.
    "BROWSER_SANDBOX": "on",
    # The unprivileged user sandboxes run as (a name or a uid); `make run` creates lantern-browser.
    "BROWSER_SANDBOX_USER": "lantern-browser",
    # Where sandboxes keep their folders (home, DevTools socket): a path the sandbox user can walk, so not
    # under a home folder; every host of the machine may share it.
    "BROWSER_SANDBOX_DIR": "/var/lib/lantern/sandboxes",
    # Host loopback ports sandboxes may reach, at the same http://127.0.0.1:PORT inside ("18000-18099,3000";
    # none by default): for a development server, or tests.
    "BROWSER_LOOPBACK_PORTS": "",
    # Private, shared or link-local ranges sandboxes may reach (CIDRs, comma-separated; none by default).
    "BROWSER_ALLOWED_NETWORKS": "",
    # A session's sandbox may hold as much memory as the session's `memory` (1GiB headless and 8GiB headful
    # by default; past it the session ends with end_reason "oom"), and this many processes and threads.
    "BROWSER_SANDBOX_PIDS": 1024,
    # The cores one session's sandbox may keep busy at most (a fraction is fine: "0.5"), slirp4netns and its
    # helpers included; with cores contended, sessions share them in proportion. One session spinning on every
    # core must not slow the others' starts and the API.
    "BROWSER_SANDBOX_CPUS": 1.0,
    # The resolvers sessions' own dnsmasq asks ("192.0.2.53, 127.0.0.1#5353"; none: the machine's own, those of its
    # /etc/resolv.conf). Whatever they answer, a session never gets a private, loopback or link-local address.
    "BROWSER_DNS_SERVERS": "",
    # What every sandbox of this machine may hold together, in MiB (None: 80% of the machine's memory). Each
    # session asks for its own cap, and they may add up past the machine: past this, the kernel ends a browser
    # (a session ends "oom"), not the app, its database or this host.
    "BROWSER_SANDBOXES_MEMORY_MB": None,
}


def load(environ=None, **overrides):
    """The settings: DEFAULTS, then LANTERN_<NAME> variables (read as the default's type), then `overrides`."""
    environ = os.environ if environ is None else environ
    settings = dict(DEFAULTS)
    for name, default in DEFAULTS.items():
        value = environ.get(f"LANTERN_{name}")
        if value is not None:
            settings[name] = int(value) if isinstance(default, int) or name in WHOLE_NUMBERS else value
    unknown = set(overrides) - set(DEFAULTS)
    if unknown:
        raise KeyError(f"no such host setting: {', '.join(sorted(unknown))}")
    settings.update({name: value for name, value in overrides.items() if value is not None})
    settings["BROWSER_HOST_DIR"] = Path(settings["BROWSER_HOST_DIR"] or Path("instance") / "browser-host").absolute()
    settings["BROWSER_SANDBOXES_MEMORY_MB"] = settings["BROWSER_SANDBOXES_MEMORY_MB"] or browsers_memory_mb()
    return settings


def credential(settings):
    """This host's credential: the setting, else the file's first line; None when neither is given."""
    if settings["BROWSER_HOST_CREDENTIAL"]:
        return settings["BROWSER_HOST_CREDENTIAL"].strip()
    if settings["BROWSER_HOST_CREDENTIAL_FILE"]:
        return Path(settings["BROWSER_HOST_CREDENTIAL_FILE"]).read_text().strip() or None
    return None


def browsers_memory_mb():
    """80% of the machine's memory, in MiB: what its browsers may take together."""
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * 0.8) // (1024 * 1024)


def memory_capacity(per_browser_mb):
    """As many browsers as 80% of the machine's memory holds."""
    return max(1, browsers_memory_mb() // per_browser_mb)
