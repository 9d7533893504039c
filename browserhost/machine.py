"""A session's machine (browserhost/sandbox.py's Sandbox has one): the processes the host starts for the session,
Chromium's and a tenant's alike, share one user and pid namespace and one home, /tmp and /dev/shm, as programs of
one computer do: a file Chromium downloads is there for the next process, which sees Chromium in its `ps`.

- **Folders**: home/, tmp/ and shm/ (and run/, Xvfb's log) are tmpfs mounts the host makes once, under the
  sandbox's folder, owned by the sandbox's user; each process gets them at /home/session (also /home/kernel, a link
  to it: Kernel's name), /tmp and /dev/shm. Their
  pages count in the memory cgroup of the session process that writes them, so what a page stores fills the
  session's memory cap, never the host's disk. They go when the sandbox does.
- **Namespaces**: a holder (`sleep infinity` under bubblewrap's init) makes the session's user and pid namespaces
  when the sandbox is created, and lives as long as it. Every process then starts in a bubblewrap of its own that
  joins them (`--userns`/`--pidns` on the namespaces the host holds open), rather than `nsenter` into Chromium's:
  so each still gets what bubblewrap sets today (no capabilities, an empty bounding set, no_new_privs, the
  read-only /usr, the openers made /usr/bin/false, its own mount, IPC and UTS namespaces with the folders above
  bound in, --die-with-parent, so that killing the host's process kills it), and the machine outlives a browser
  restarted in it. The holder has no /dev of bubblewrap's: with one, bubblewrap nests a second user namespace
  (it mounts devpts as uid 0), which a joining process could enter only with a bounding set left full.
  The launcher closes the namespaces' descriptors, which bubblewrap leaves open, before the process runs.
  Only the session's own processes join (the browser, a tenant's): the host's helpers (`join=False`: xdotool,
  ffmpeg, the resolver, the relay) get namespaces of their own, since every process of the machine, one user,
  can trace the others or take their descriptors.
- **Who**: `setpriv` drops to the sandbox's user before bubblewrap runs; the network namespace is joined by
  `ip netns exec` and the session's cgroup before anything else runs (JOIN_CGROUP).
"""
import glob
import json
import logging
import os
import selectors
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from browserhost.cgroups import KILL_SECONDS

logger = logging.getLogger(__name__)

INSIDE_HOME = "/home/session"
# Kernel's name for the session's home, a link to it in every process of the machine: code written for Kernel
# (/home/kernel/Downloads) works unchanged.
KERNEL_HOME = "/home/kernel"
INSIDE_RUN = "/run/lantern"
RUN_BYTES = 1024 * 1024  # run/: Xvfb's log
# Read-only from the host's /etc: what Chromium, fontconfig, TLS and the C library read.
ETC_FILES = ("fonts", "ssl", "ca-certificates", "ld.so.cache", "alternatives", "nsswitch.conf", "localtime",
             "mime.types", "X11")
# Read-only caches of the host that save every start work: without fontconfig's, each Chromium scans every
# font again (a sandboxed start took 0.8 s instead of 0.35 s here).
SHARED_CACHES = ("/var/cache/fontconfig",)
# Written for each sandbox: its user, its loopback names, its own resolver.
ETC_GENERATED = ("passwd", "group", "hosts", "resolv.conf")
# What Chromium runs on Linux besides itself (named in its binary: xdg-open for downloads it opens and external
# links, xdg-email for mailto:, xdg-settings and xdg-mime for the default browser, the xdg-desktop-*/icon tools
# for web apps' shortcuts, kdialog and zenity for file dialogs, the desktops' settings for the proxy's), and
# what opens a file or link with the program that files of the session's name (.desktop files, mimeapps.list,
# mailcap): /usr/bin/false inside, over the file each resolves to on the host (the x-www-browser alternatives lead
# to a browser, which would start without Lantern's flags).
OPENERS = ("xdg-open", "xdg-email", "xdg-settings", "xdg-mime", "xdg-desktop-menu", "xdg-desktop-icon",
           "xdg-icon-resource", "update-desktop-database", "kdialog", "zenity", "gnome-control-center",
           "unity-control-center", "dde-control-center", "gnome-network-properties", "kcmshell4", "kcmshell5",
           "kcmshell6", "systemsettings", "gio", "gtk-launch", "gvfs-open", "gnome-open", "kde-open", "kde-open5",
           "kfmclient", "exo-open", "mimeopen", "run-mailcap", "see", "sensible-browser", "x-www-browser",
           "www-browser", "gnome-www-browser", "open")
# Where they are: /usr/bin (the sandbox's PATH), and GLib's gio-launch-desktop, which starts a .desktop file's
# program (its folder looked for once: a glob for each sandboxed process, xdotool's too, took a millisecond).
OPENER_PATHS = (*(f"/usr/bin/{name}" for name in OPENERS), "/usr/libexec/gio-launch-desktop",
                *glob.glob("/usr/lib/*/glib-2.0/gio-launch-desktop"))
INERT = "/usr/bin/false"
HOLDER_SECONDS = 10.0
# What the session's processes add to their OOM score: the OOM killer ends what filled the session, not the holder
# (its namespaces would go, and every process of the session with them), the resolver or the DevTools relay.
# Raising it takes no privilege (lowering it would: CAP_SYS_RESOURCE); a process may lower its own back to 0.
JOINED_OOM_SCORE = 500


class Machine:
    """The session's shared folders and namespaces (under `root`, the sandbox's folder); `command` builds the
    bubblewrap that runs a process in it."""

    def __init__(self, root, name, cgroup, memory_mb):
        self.root, self.name, self.cgroup, self.memory_mb = root, name, cgroup, memory_mb
        self.run, self.etc = root / "run", root / "etc"
        self.home, self.tmp, self.shm = root / "home", root / "tmp", root / "shm"
        self.holder = None
        self.namespaces = None  # (user, pid): the holder's, open while the sandbox is

    def mount(self, uid, gid):
        """The session's run/, home, /tmp and /dev/shm: tmpfs mounts of the sandbox user's."""
        for folder, options in ((self.run, f"size={RUN_BYTES},nosuid,nodev,noexec"),
                                (self.home, f"size={self.memory_mb * 1024 * 1024},nosuid,nodev"),
                                (self.tmp, "nosuid,nodev"), (self.shm, "nosuid,nodev")):
            folder.mkdir(exist_ok=True)
            if not os.path.ismount(folder):
                subprocess.run(["mount", "-t", "tmpfs", "-o", f"{options},mode=0700,uid={uid},gid={gid}", "tmpfs",
                                str(folder)], check=True, capture_output=True, timeout=10)

    def start(self, ids):
        """The holder of the session's user and pid namespaces, in the session's cgroup and network; kept by
        the cgroup's kill of a browser's processes (not the processes orphaned to its init)."""
        info_read, info_write = os.pipe()
        try:
            argv = ["bwrap", "--unshare-user", "--unshare-pid", "--die-with-parent", "--new-session", "--clearenv",
                    *_system_binds(), "--proc", "/proc", "--info-fd", str(info_write), "--", "/usr/bin/sleep",
                    "infinity"]
            self.holder = spawn(self._joined(argv, ids), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True, pass_fds=(info_write,))
            os.close(info_write)
            info_write = None
            init = json.loads(_read_all(info_read, HOLDER_SECONDS) or b"{}").get("child-pid")
        finally:
            os.close(info_read)
            if info_write is not None:
                os.close(info_write)
        if not init:
            raise OSError("the session's namespaces were not made")
        user = os.open(f"/proc/{init}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
        try:
            pid = os.open(f"/proc/{init}/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
        except BaseException:
            os.close(user)  # stop() closes only what was kept in self.namespaces
            raise
        self.namespaces = (user, pid)
        self.cgroup.kept.update({self.holder.pid, init, *_children(init, HOLDER_SECONDS)})

    @property
    def ended(self):
        """Its holder exited (a process of the session may kill it: one user) and every process of the machine with
        its pid namespace (Chromium's exit ends the session, registry.watch); nothing can join it again."""
        return self.holder is None or self.holder.poll() is not None

    def stop(self):
        """After the cgroup's processes were killed: the holder reaped, its namespaces let go."""
        if self.holder is not None:
            end(self.holder)
            self.holder = None
        for fd in self.namespaces or ():
            os.close(fd)
        self.namespaces = None
        self.cgroup.kept.clear()

    def unmount(self):
        unmount_all(self.root)

    def command(self, argv, variables, mounts, screen, *, ids, join=True, relay=False, tenant=False):
        """(command, fds it needs) that runs `argv` in a bubblewrap as `ids` (uid, gid): joining the machine, with
        its folders, when `join`, else in namespaces and empty folders of its own (the resolver, the relay); in the
        session's tenant cgroup with `tenant` (the session's agent), else its own."""
        inner = ["bwrap", *(("--userns", str(self.namespaces[0]), "--pidns", str(self.namespaces[1])) if join
                            else ("--unshare-user", "--unshare-pid")),
                 "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent", "--new-session",
                 "--hostname", "session", "--clearenv", *_system_binds()]
        for path in openers(keep=argv[0]):
            inner += ["--ro-bind", INERT, path]
        inner += ["--proc", "/proc", "--dev", "/dev"]
        if join:
            inner += ["--bind", self.tmp, "/tmp", "--bind", self.shm, "/dev/shm", "--bind", self.home, INSIDE_HOME,
                      "--symlink", INSIDE_HOME, KERNEL_HOME]
        else:
            inner += ["--tmpfs", "/tmp", "--tmpfs", "/dev/shm", "--perms", "0700", "--size",
                      str(self.memory_mb * 1024 * 1024), "--tmpfs", INSIDE_HOME]
        for option, outside, inside in mounts:
            inner += [option, str(outside), inside]
        variables = {"HOME": INSIDE_HOME, "TMPDIR": "/tmp", "PATH": "/usr/bin:/bin", **(variables or {})}
        for name, value in variables.items():
            inner += ["--setenv", name, value]
        # bash, not sh: it closes descriptors past 9 (the namespaces', given to bubblewrap, which keeps them open).
        inner += ["--chdir", INSIDE_HOME, "--", "/bin/bash", "-c", LAUNCHER, "launcher"]
        if join:
            inner += ["--close", " ".join(map(str, self.namespaces))]
        if relay:
            inner += ["--relay"]
        if screen:
            inner += ["--screen", f"{screen[0]}x{screen[1]}x24"]
        inner += ["--", *argv]
        return self._joined(list(map(str, inner)), ids, JOINED_OOM_SCORE if join else 0, tenant=tenant), \
            (self.namespaces if join else ())

    def _joined(self, inner, ids, oom_score=0, *, tenant=False):
        # The cgroup is joined first (by the shell that then becomes the rest), so every process of
        # the sandbox is in it from its start; `ip netns exec` and `setpriv` exec in turn.
        uid, gid = ids
        procs = self.cgroup.procs_files(tenant=tenant)
        return ["/bin/sh", "-c", JOIN_CGROUP, "join", str(oom_score), str(len(procs)), *procs,
                "ip", "netns", "exec", self.name, "setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
                "--inh-caps=-all", *inner]


def _system_binds():
    binds = ["--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
             "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin"]
    for path in (*(f"/etc/{name}" for name in ETC_FILES), *SHARED_CACHES):
        if os.path.exists(path):
            binds += ["--ro-bind", path, path]
    return binds


def spawn(command, **options):
    return _SPAWNER.submit(subprocess.Popen, command, **options).result()


def end(process):
    """Reap a process of the sandbox, whose cgroup was killed; SIGKILL when it is still there after KILL_SECONDS,
    and then give up after as long: one stuck in the kernel must not keep the rest of the sandbox."""
    try:
        process.wait(timeout=KILL_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        try:
            process.wait(timeout=KILL_SECONDS)
        except subprocess.TimeoutExpired:
            pass


def openers(keep=None):
    """The files of OPENER_PATHS on this host, each followed to its file (under /usr, which the sandbox sees as
    the host does), but `keep`'s: a host configured to run a browser through its /usr/bin wrapper runs it still."""
    kept = os.path.realpath(keep) if keep else None
    found = {os.path.realpath(path) for path in OPENER_PATHS if os.path.exists(path)}
    return sorted(path for path in found - {kept, os.path.realpath(INERT)}
                  if path.startswith("/usr/") and os.path.isfile(path))


def unmount_all(root):
    """Unmount the sandbox's tmpfs folders (its processes are gone: nothing holds them; lazily if something
    does)."""
    for name in ("run", "home", "tmp", "shm"):
        path = root / name
        if os.path.ismount(path):
            result = subprocess.run(["umount", str(path)], capture_output=True, timeout=10, check=False)
            if result.returncode != 0:
                subprocess.run(["umount", "--lazy", str(path)], capture_output=True, timeout=10, check=False)


def every_step(what, *steps):
    """Each of `steps` (callables) run, whichever fails: a tear-down that stopped at a failing step would leave the
    rest (a namespace's mounts, a cgroup) for ever. Failures are logged; the first is raised once all ran."""
    first = None
    for step in steps:
        try:
            step()
        except Exception as error:  # noqa: BLE001 - raised below, after the other steps
            logger.warning("%s: a step failed (%s: %s); the others go on", what, type(error).__name__, error)
            first = first or error
    if first is not None:
        raise first


def read_with_deadline(fd, seconds):
    with selectors.DefaultSelector() as selector:  # not select(): a busy host's descriptors pass 1023
        selector.register(fd, selectors.EVENT_READ)
        return os.read(fd, 1) if selector.select(seconds) else b""


def _read_all(fd, seconds):
    """What is written to `fd` until its writers close it, or what came within `seconds`."""
    data, deadline = b"", time.monotonic() + seconds
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while selector.select(max(deadline - time.monotonic(), 0)):
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            data += chunk
    return data


def _children(pid, seconds):
    """The children of `pid` once it has one (bubblewrap's init starts the holder's command a moment after)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            children = {int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}
        except OSError:
            children = set()
        if children or time.monotonic() > deadline:
            return children
        time.sleep(0.01)


# bwrap's --die-with-parent is the kernel's parent-death signal, which fires when the *thread* that
# started it ends, not the process: sandboxes are started from this one thread, which lives as long as
# the host (an idle executor thread waits for work until the process ends), never from a request's thread.
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sandbox-spawner")

# The launcher inside the sandbox: for a process joining the machine, the namespaces' descriptors closed (what it
# runs must not hold the holder's namespaces); for the DevTools relay, its listening socket (which comes as stdin)
# as fd 3, as systemd's socket activation wants it, with LISTEN_PID its own pid, and SIGPIPE ignored as systemd
# ignores it for its services (IgnoreSIGPIPE=): systemd-socket-proxyd counts on it, and an answer spliced to a
# client that had left killed the relay, cutting the host from a browser that ran on; an X display when asked (a
# fixed number: the network namespace, where X's abstract socket lives, is the sandbox's own; what a previous
# browser's display left in the machine's /tmp goes first, since its pid may now be another process's), then the
# command in its place (so the sandbox ends when the browser does).
LAUNCHER = r"""
set -e
if [ "$1" = --close ]; then
  for fd in $2; do exec {fd}<&-; done
  shift 2
fi
if [ "$1" = --relay ]; then
  trap '' PIPE
  exec 3<&0 </dev/null
  export LISTEN_FDS=1 LISTEN_PID=$$
  shift
fi
if [ "$1" = --screen ]; then
  mkdir -p -m 1777 /tmp/.X11-unix
  rm -f /tmp/.X99-lock /tmp/.X11-unix/X99
  Xvfb :99 -screen 0 "$2" -nolisten tcp >/run/lantern/xvfb.log 2>&1 &
  shift 2
  tries=0
  until [ -S /tmp/.X11-unix/X99 ]; do
    tries=$((tries + 1)); [ $tries -lt 200 ] || { echo "Xvfb did not start" >&2; exit 1; }; sleep 0.05
  done
  export DISPLAY=:99
fi
shift
exec "$@"
"""
# Raise our OOM score by the first argument, write our pid into each cgroup.procs given (their count first), then
# run the rest.
JOIN_CGROUP = r"""
[ "$1" = 0 ] || echo "$1" > /proc/self/oom_score_adj || exit 125
shift
count=$1; shift
while [ "$count" -gt 0 ]; do echo $$ > "$1" || exit 125; shift; count=$((count - 1)); done
exec "$@"
"""
