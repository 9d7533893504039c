"""An unsandboxed session's box (BROWSER_SANDBOX=off): the interface of browserhost/sandbox.py's Sandbox on this
host itself, so that starting a browser (launch.py), acting on its display (display.py, computer.py) and ending a
session (registry.py) take one path whatever the host.

Its processes run here as the host's user: the browser on a profile and TMPDIR under the session's folder (through
a short link in /tmp when that path is long), in a process group of its own that stopping it ends (renderers and
the crash handler included), on an Xvfb of its own when headful; a browser's DevTools listen on a port Chromium
chooses and names in DevToolsActivePort. Also here: this host's process groups, which a host restarted after
`kill -9` ends from the ids its session folders recorded (launch.kill_leftovers).
"""
import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from lantern_wire.devtools import DevTools

# A Unix socket path holds 107 bytes; Chromium adds /org.chromium.Chromium.XXXXXX/SingletonSocket (46).
MAX_TMPDIR_LENGTH = 60
SINGLETON_FILES = ("SingletonLock", "SingletonSocket", "SingletonCookie")
HOST_PATH = "/usr/bin:/bin"


class XvfbError(RuntimeError):
    """Xvfb did not start (its log's tail is in the message)."""


class HostBox:
    """A session's processes on this host, no sandbox around them (`workdir`: the host's folder for the session;
    without one, a box for commands only, such as a display's)."""

    sandboxed = False

    def __init__(self, workdir=None):
        self.workdir = Path(workdir or "/nonexistent").absolute()
        self.inside_home = str(self.workdir)  # where the browser's profile is, as it sees it
        self.extensions = self.workdir / "extensions"
        self.memory_mb = None  # no cap of its own
        self.tmpdir = None  # TMPDIR as the browser got it: workdir/tmp or a short link to it
        self.display = None  # ":N" of its own Xvfb, once started
        self.xvfb = None

    def create(self):
        self.workdir.mkdir(parents=True, exist_ok=True)
        return self

    def destroy(self):
        """Its display ends: the one thing of the session's it started itself (the browser was stopped before, by
        launch.Browser.stop through stop_browser)."""
        self._stop_display()

    def start_display(self, screen):
        """The X display name of a new Xvfb of `screen` (width, height) for a headful browser."""
        self._stop_display()  # a previous browser's, whose size was another
        self.xvfb, self.display = start_xvfb(self.workdir, screen=screen)
        (self.workdir / "xvfb.pgid").write_text(str(self.xvfb.pid))  # found after a restart (kill_leftovers)
        return self.display

    def _stop_display(self):
        if self.xvfb is not None:
            kill_group(self.xvfb.pid, grace=1)
            self.xvfb.wait()
            self.xvfb = None

    def inside_extensions(self, folders):
        return list(folders)

    def chrome_policy_binds(self, policies):
        return []  # the host refuses policies without a sandbox to put them in (starts.py)

    def popen(self, argv, variables=None, *, binds=(), screen=None, devtools=False, **options):
        """subprocess.Popen of `argv` here with `variables`; the browser (`devtools`) in this host's environment,
        with a TMPDIR of its own and its profile rid of a killed browser's lock files. `binds` and `screen` are a
        sandbox's: here the files are the host's, and a headful browser's display was started by start_display."""
        if devtools:
            user_data, tmp = self.workdir / "user-data", self.workdir / "tmp"
            user_data.mkdir(parents=True, exist_ok=True)
            tmp.mkdir(parents=True, exist_ok=True)
            remove_stale_files(user_data)
            self.tmpdir = short_path_to(tmp)
            environment = {**os.environ, "TMPDIR": self.tmpdir, **(variables or {})}
        else:
            environment = {"PATH": HOST_PATH, **(variables or {})}
        return subprocess.Popen(argv, env=environment, close_fds=True, **options)

    def helper(self, argv, variables=None, **options):
        """A program the host runs for the session (xdotool, ffmpeg): here, as any of its processes."""
        return self.popen(argv, variables, **options)

    def find_devtools(self):
        """Chromium's DevTools on the port DevToolsActivePort names (`--remote-debugging-port=0`), once it answers,
        else None."""
        active_port = self.workdir / "user-data" / "DevToolsActivePort"
        lines = active_port.read_text().splitlines() if active_port.exists() else []
        if len(lines) < 2:
            return None
        devtools = DevTools(lines[1], port=int(lines[0]))
        try:
            devtools.get_json("/json/version", timeout=1)
        except (OSError, ValueError):
            return None
        return devtools

    @staticmethod
    def browser_pid(process):
        return process.pid  # also its process group's id

    @staticmethod
    def exit_status(code):
        return code

    def bound_cpu(self):
        pass

    def oom_kills(self):
        return 0

    def stop_browser(self, process, grace):
        """SIGTERM to the browser's group, SIGKILL to what is left after `grace` seconds, its display and TMPDIR's
        link gone too; its exit status."""
        if process.poll() is None:
            _signal_group(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        kill_group(process.pid, grace=0)  # the renderers may outlive the browser process
        self._stop_display()
        if self.tmpdir and os.path.islink(self.tmpdir):
            os.unlink(self.tmpdir)
        return process.wait()


def remove_stale_files(user_data):
    """Left by a Chromium that was killed: a lock would make the new one hand over to the dead one and
    exit, an old DevToolsActivePort would name a closed port. In the folder itself, never through a link."""
    folder = os.open(user_data, os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for name in (*SINGLETON_FILES, "DevToolsActivePort"):
            try:
                os.unlink(name, dir_fd=folder)
            except FileNotFoundError:
                pass
    finally:
        os.close(folder)


def short_path_to(tmp):
    """`tmp`, or a short link to it in /tmp when its path is long: Chromium puts its singleton socket
    in TMPDIR/org.chromium.Chromium.XXXXXX/, and a Unix socket's path may not exceed 107 bytes
    (a longer one aborts the start with "Socket path too long")."""
    if len(str(tmp)) <= MAX_TMPDIR_LENGTH:
        return str(tmp)
    for old in Path(tempfile.gettempdir()).glob("lantern-chromium-*"):
        if old.is_symlink() and not old.exists():  # its workdir was removed without a stop()
            old.unlink(missing_ok=True)
    link = Path(tempfile.gettempdir()) / f"lantern-chromium-{hashlib.sha1(str(tmp).encode()).hexdigest()[:16]}"
    if not (link.is_symlink() and os.readlink(link) == str(tmp)):
        link.unlink(missing_ok=True)
        link.symlink_to(tmp)
    return str(link)


def xvfb_available():
    return shutil.which("Xvfb") is not None


def start_xvfb(workdir, *, screen=(1920, 1080), first_display=99, timeout=10.0):
    """Start `Xvfb :N` (a `screen` of (width, height)) on the first free display number from
    `first_display`; (process, ":N"). Its output goes to workdir/xvfb.log; the caller stops it."""
    binary = shutil.which("Xvfb")
    if binary is None:
        raise XvfbError("Xvfb is not installed")
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    for number in range(first_display, first_display + 100):
        if Path(f"/tmp/.X{number}-lock").exists() or Path(f"/tmp/.X11-unix/X{number}").exists():
            continue
        with open(workdir / "xvfb.log", "ab") as log_file:
            process = subprocess.Popen([binary, f":{number}", "-screen", "0", f"{screen[0]}x{screen[1]}x24",
                                        "-nolisten", "tcp"],
                                       stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                                       start_new_session=True)
        deadline = time.monotonic() + timeout
        while process.poll() is None and time.monotonic() < deadline:
            if Path(f"/tmp/.X11-unix/X{number}").exists():
                return process, f":{number}"
            time.sleep(0.05)
        if process.poll() is None:
            process.kill()
            process.wait()
            log = (workdir / "xvfb.log").read_text(errors="replace")[-3000:]
            raise XvfbError(f"Xvfb :{number} did not start in time: {log}")
        # Lost a race for that number to another X server: try the next.
    raise XvfbError("no free X display number")


# -- this host's process groups -------------------------------------------------------------------

def kill_group(pgid, grace=2.0, *, expect_in_cmdline=None):
    """End process group `pgid` (SIGTERM, then SIGKILL after `grace` s) and wait until none of its
    processes runs; True if it had any. Usable for a group recorded before a restart: with
    `expect_in_cmdline` (e.g. the user-data-dir), a group none of whose processes' command line
    contains it is left alone, in case its id now belongs to something else."""
    members = group_members(pgid)
    if not members:
        return False
    if expect_in_cmdline and not any(expect_in_cmdline in cmdline(pid) for pid in members):
        return False
    if grace > 0:
        _signal_group(pgid, signal.SIGTERM)
        _wait_group_gone(pgid, time.monotonic() + grace)
    _signal_group(pgid, signal.SIGKILL)
    _wait_group_gone(pgid, time.monotonic() + 5)
    return True


def group_alive(pgid):
    return bool(group_members(pgid))


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as arguments:
            return arguments.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _signal_group(pgid, signum):
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _wait_group_gone(pgid, deadline):
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.02)


def group_members(pgid):
    """Live (not zombie) processes of group `pgid`, from /proc."""
    members = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as stat:
                # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses, so split after the last ')'
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != b"Z":
            members.append(int(entry.name))
    return members
