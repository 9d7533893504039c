"""Each session's browser in a sandbox of its own: a small machine per session.

    policy = SandboxPolicy.from_settings(settings)
    missing = probe(policy)                 # [] when this machine can sandbox, else what it lacks
    box = Sandbox(workdir, policy, memory_mb=1024, allowed_hosts=None)
    box.create()                            # its network, firewall, cgroup, folders and machine
    process = box.popen(argv, {"TZ": "UTC"}, stdout=...)  # a process of the session's machine
    helper = box.helper(["xdotool", ...], {"DISPLAY": ...})  # the host's own, outside the machine
    box.find_devtools()                     # its browser's DevTools, reachable by this host alone
    agent = box.popen(argv, tenant=True, stdin=box.listener(AGENT_SOCKET))  # the session's agent (agents.py)
    box.room()                              # the bytes its tenant may still store
    box.stop_browser(process, grace=2)      # the session's processes but the machine's own end
    box.destroy()                           # every process of it killed; nothing of it left

browserhost/unsandboxed.py's HostBox is the same for a host without sandboxes (BROWSER_SANDBOX=off).

Everything is built from Debian's well-kept tools, nothing home-made at the namespace level:
- **Files and processes**: one machine per session (browserhost/machine.py): each of its processes (the
  browser; a tenant's) is a bubblewrap (`bwrap`) that joins the session's user and pid namespaces, with
  read-only /usr and the few /etc files Chromium needs, /proc of the session's pid namespace, and the session's
  /tmp, /dev/shm and home (/home/session, the profile's folder): tmpfs mounts the host makes once, whose pages
  count in the session's memory cgroup, so what a page stores (its origin's storage quota is a tenth of the
  disk) fills the session's memory cap, never the host's disk. `--die-with-parent`: the sandbox dies with the
  host, whatever kills it. The host's own helpers (xdotool, xmodmap, ffmpeg: `helper`) join the network and
  cgroup only, in namespaces of their own: the session's processes, which can trace each other (one uid), see
  no pid of them. What the host reads of any process is bounded (browserhost/bounded.py), and it hands none a
  file of its own: Chromium's output comes through a pipe (launch.py).
- **User**: `setpriv` drops to the unprivileged sandbox user (BROWSER_SANDBOX_USER) before bwrap
  runs, so no process of a session is uid 0 on the host; Chromium's own sandbox stays on.
- **No opener**: every program that hands a file or a link to another program (xdg-open, xdg-email, gio, the
  x-www-browser alternatives, ...: OPENERS) is /usr/bin/false inside. A page can download files into the
  session's home that name which program opens what (a .desktop file, mimeapps.list), and Chromium runs
  xdg-open for a download it opens or an external link the user lets through: the program would be the
  session's, running beside the browser. Nothing is opened outside the browser.
- **Network**: a network namespace made by `ip netns add`, given egress by `slirp4netns` (a user-mode
  stack: the host's routing tables never see the session's packets), and an nftables ruleset inside
  it, which the session cannot change (the namespace belongs to the host's root). The ruleset
  rejects the host's own addresses, loopback, link-local, private, shared and reserved ranges
  (BROWSER_ALLOWED_NETWORKS opens some), lets through the host loopback ports the operator lists
  (BROWSER_LOOPBACK_PORTS, at the same http://127.0.0.1:PORT inside, translated to slirp4netns'
  gateway), and, for a session with a `network.allowed_hosts` list, nothing but those hosts'
  addresses on ports 80 and 443 (names resolved by the host when the session starts).
- **DNS**: a dnsmasq of the session's own (browserhost/resolver.py), inside its sandbox as Debian's
  `dnsmasq` user, at 127.0.0.1 of its namespace: it refuses answers in the ranges the firewall closes
  (closed_networks) and, with an allowlist, answers only the listed names. Only that user's packets reach the upstream
  resolvers (slirp4netns' forwarder to the machine's, or BROWSER_DNS_SERVERS); any other to port 53 is
  refused.
- **DevTools**: Chromium listens on port 9222 of the namespace's own loopback; the host binds its Unix
  socket in a folder of root's that nothing of the sandbox sees (`devtools/`: a CDP client could point
  downloads at any folder the session can write, and a file named like the socket would replace it), and
  hands the listening end to systemd's `systemd-socket-proxyd`, which relays each connection to port 9222.
  The relay runs in a bubblewrap of its own in the session's network namespace and cgroup, as Debian's
  `nobody` (RELAY_USER), not as the browser's user: no process of the session sees it (its own pid
  namespace) or could take its socket (pidfd_getfd, ptrace) and answer the host in Chromium's place.
  Only this host and the workers on this machine (root) open the socket, never through a link and only as a
  socket of the sandbox's user (lantern_wire/splice.connect_unix). No host TCP port.
  `run/` (Xvfb's log) is a 1 MiB tmpfs the host mounts, since downloads may be pointed there too.
- **Limits** (browserhost/cgroups.py): a cgroup per session (v2, or v1's memory, pids and cpu
  controllers), memory and process caps and a CPU bound (BROWSER_SANDBOX_CPUS cores at most once its
  browser answers, `bound_cpu`, and a weight in proportion when cores are contended); every process of
  the session is in it from its start, slirp4netns and the relays included. The session's agent and what it runs
  (browserhost/agents.py: a tenant's files and processes) are in a child of it, `tenant`, capped below it, which a
  browser's restart leaves running and the sandbox's end kills with the rest.
  The kernel's OOM killer acts inside it, and `oom_kills()` tells the host. Sessions choose their
  caps, which may add up past the machine's memory: the cgroup all sandboxes are in has a cap of its own
  (BROWSER_SANDBOXES_MEMORY_MB), so the OOM killer then ends a browser, not the app or its database.

All names (namespace, cgroup, folder) derive from the host's folder for the session, so a host restarted
after `kill -9` finds and removes what a previous run left (`remove_leftovers`).
"""
import grp
import hashlib
import json
import os
import shutil
import socket
import subprocess
import threading
import time
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

from browserhost import resolver
from browserhost.cgroups import KILL_SECONDS, Cgroup
from browserhost.machine import ETC_GENERATED, INSIDE_HOME, INSIDE_RUN, Machine, end, every_step, spawn, unmount_all
from browserhost.network import Network, SandboxError, closed_networks, remove_netns
from browserhost.sandbox_policy import DEVTOOLS_PORT, RELAY
from lantern_wire.devtools import DevTools

INSIDE_EXTENSIONS = "/opt/extensions"
# Where Debian's Chromium reads enterprise policies an administrator sets (chrome://policy shows them).
INSIDE_MANAGED_POLICIES = "/etc/chromium/policies/managed"
DEVTOOLS_SOCKET = "devtools.sock"
AGENT_SOCKET = "agent.sock"  # the session's agent's (browserhost/agents.py), beside the DevTools socket
PROFILE = "user-data"  # the browser's profile, in the session's home
NETNS_PREFIX = "lantern-"
HOST_ENVIRONMENT = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}  # for ip, setpriv and bwrap


class Sandbox:
    """One session's sandbox, named after its host's folder for the session (`workdir`), its own folders
    (run/, home/, tmp/, shm/, etc/, extensions/) under the policy's root, its processes one machine
    (browserhost/machine.py). browserhost/unsandboxed.py's HostBox has the same interface, for a host without."""

    sandboxed = True
    inside_home = INSIDE_HOME  # where the browser's profile is, as it sees it
    tmpdir = "/tmp"
    display = ":99"  # a headful browser's, started inside (a fixed number: the network namespace is its own)

    def __init__(self, workdir, policy, *, memory_mb, allowed_hosts=None):
        self.workdir = Path(workdir).absolute()
        self.policy = policy
        self.memory_mb = memory_mb
        self.allowed_hosts = allowed_hosts
        self.name = sandbox_name(self.workdir)
        # Under the policy's root, which the sandbox user can walk (bubblewrap opens the folders it mounts
        # as that user, and a host's own folder may be in a home it cannot enter).
        self.root = policy.root / self.name
        self.cgroup = Cgroup(self.name)
        self.machine = Machine(self.root, self.name, self.cgroup, memory_mb)
        self.run, self.etc, self.home = self.machine.run, self.machine.etc, self.machine.home
        self.devtools_folder = self.root / "devtools"  # root's, and mounted nowhere inside
        self.extensions = self.root / "extensions"  # unpacked by the host, mounted read-only
        self.network = Network(self.name, self.cgroup, self.workdir, policy, allowed_hosts)
        self._resolver = None
        self._relay = None
        self._tenants = []  # processes started in the tenant's cgroup (the agent), reaped when the sandbox ends
        self._tenants_lock = threading.Lock()  # none starts once its end began (the cgroup's kill would miss it)
        self._ending = False

    # -- set-up and tear-down -----------------------------------------------------------------

    def create(self):
        """Folders, cgroup, network namespace with its firewall and egress; SandboxError on failure. Whatever ends
        it part-way (any error, a thread's exit), what was made is removed again."""
        try:
            self._make_folders()
            self.cgroup.create(self.memory_mb * 1024 * 1024, self.policy.pids_max, self.policy.cpus)
            self.network.make()
            self._start_resolver()
            self.machine.start(self.policy.ids())
        except BaseException as error:
            try:
                self.destroy()
            except Exception:  # noqa: BLE001 - logged by destroy; the error that stopped the creation is the one
                pass
            if isinstance(error, (OSError, subprocess.SubprocessError, ValueError, SandboxError, KeyError)):
                raise SandboxError(f"setting up the sandbox failed: {error}") from None
            raise
        return self

    def destroy(self):
        """Every process of the sandbox is killed, then its network and cgroup go. Each step
        is tried even when one before it failed (logged); the first failure is raised at the end. Idempotent; the
        workdir itself is the caller's to remove."""
        with self._tenants_lock:
            self._ending = True
        every_step(f"removing sandbox {self.name}", lambda: self.cgroup.kill(0, everything=True),
                   self.network.stop, lambda: self._end_helper("_resolver"), lambda: self._end_helper("_relay"),
                   self._end_tenants, self.machine.stop, lambda: remove_netns(self.name), self.cgroup.remove,
                   self.machine.unmount, lambda: shutil.rmtree(self.root, ignore_errors=True))

    def _end_helper(self, name):
        process = getattr(self, name)
        setattr(self, name, None)
        if process is not None:
            end(process)

    def _end_tenants(self):
        while self._tenants:
            end(self._tenants.pop())

    def _make_folders(self):
        uid, gid = self.policy.ids()
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.policy.root.mkdir(mode=0o711, parents=True, exist_ok=True)
        self.root.mkdir(exist_ok=True)
        self.root.chmod(0o711)  # walkable by the sandbox user, not listable
        for folder in (self.etc, self.extensions, self.devtools_folder):
            folder.mkdir(exist_ok=True)
            os.chown(folder, 0, 0)
            folder.chmod(0o700 if folder == self.devtools_folder else 0o755)
        self.machine.mount(uid, gid)
        group = grp.getgrgid(gid).gr_name if gid else "root"
        (self.etc / "passwd").write_text(f"root:x:0:0:root:/:/usr/sbin/nologin\n"
                                         f"session:x:{uid}:{gid}:session:{INSIDE_HOME}:/usr/sbin/nologin\n")
        (self.etc / "group").write_text(f"root:x:0:\n{group}:x:{gid}:\n")
        (self.etc / "hosts").write_text("127.0.0.1 localhost\n::1 localhost\n")
        (self.etc / "resolv.conf").write_text(f"nameserver {resolver.LISTEN}\noptions edns0\n")
        for name in ETC_GENERATED:
            (self.etc / name).chmod(0o644)

    def chrome_policy_binds(self, policies):
        """The (outside, inside) binds that give the sandbox's Chromium `policies` (a dict of enterprise policies,
        or None for none) as its managed policies: a file of root's under etc/, read-only inside."""
        if not policies:
            return []
        folder = self.etc / "chromium-policies"
        folder.mkdir(exist_ok=True)
        folder.chmod(0o755)  # whatever the host's umask: the sandbox's user binds and reads it
        path = folder / "lantern.json"
        # Compact and in UTF-8, as the app counts it against its 5 MiB cap (escaped, 4 MiB of emoji took 12.6 MB).
        path.write_text(json.dumps(policies, separators=(",", ":"), ensure_ascii=False), encoding="utf-8")
        path.chmod(0o644)
        return [(folder, INSIDE_MANAGED_POLICIES)]

    def _start_resolver(self):
        """The session's dnsmasq, once it listens (SandboxError when it does not)."""
        mounts = [("--ro-bind", self.etc / name, f"/etc/{name}") for name in ETC_GENERATED]
        argv = resolver.dnsmasq_argv(self.allowed_hosts, self.policy.dns_servers,
                                     closed_networks(self.policy.allowed_networks))
        command, _ = self.machine.command(argv, None, mounts, None, ids=self.policy.resolver_ids(), join=False)
        # Its log would hold a line per refused answer, as many as a page asks for: it goes nowhere.
        self._resolver = spawn(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
        self.cgroup.spared.add(self._resolver.pid)
        listening = "0100007F:0035"  # 127.0.0.1:53 as /proc/net/udp writes it
        deadline = time.monotonic() + 10.0
        while True:
            if self._resolver.poll() is not None:
                raise SandboxError(f"the session's dnsmasq exited with {self._resolver.returncode}")
            try:
                if listening in Path(f"/proc/{self._resolver.pid}/net/udp").read_text():
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise SandboxError("the session's dnsmasq did not listen in time")
            time.sleep(0.01)

    # -- running inside -------------------------------------------------------------------------

    def popen(self, argv, variables=None, *, binds=(), screen=None, devtools=False, tenant=False, **options):
        """subprocess.Popen of `argv` in the session's machine (`binds`: (host folder, inside path) pairs mounted
        read-only), with `variables` as its whole environment besides HOME, TMPDIR and PATH, on an X display of
        `screen` (width, height) started inside when given, and, when `devtools` (for the browser), the DevTools
        socket bound anew and relayed to port 9222 until the sandbox's processes are killed, and the profile's
        folder emptied of what a previous browser left (its lock names a process id that may now be another's).
        With `tenant` (the session's agent), in the tenant's cgroup, where a browser's stop leaves it running.
        SandboxError when the machine has ended (its holder was killed)."""
        if tenant:
            with self._tenants_lock:
                if self._ending:
                    raise SandboxError("the session's sandbox is being removed")
                process = self._popen(argv, variables, binds=binds, screen=screen, tenant=True, **options)
                self._tenants.append(process)
                return process
        return self._popen(argv, variables, binds=binds, screen=screen, devtools=devtools, **options)

    def _popen(self, argv, variables, *, binds, screen=None, devtools=False, tenant=False, **options):
        if self.machine.ended:
            raise SandboxError("the session's machine has ended: its holder exited")
        mounts = [("--bind", self.run, INSIDE_RUN),
                  *(("--ro-bind", self.etc / name, f"/etc/{name}") for name in ETC_GENERATED),
                  *(("--ro-bind", outside, inside) for outside, inside in binds)]
        if devtools:
            shutil.rmtree(self.home / PROFILE, ignore_errors=True)  # never through a link: rmtree follows none
            self._start_relay()
        command, fds = self.machine.command(argv, variables, mounts, screen, ids=self.policy.ids(), tenant=tenant)
        options.setdefault("env", HOST_ENVIRONMENT)
        return spawn(command, pass_fds=(*fds, *options.pop("pass_fds", ())), **options)

    def helper(self, argv, variables=None, **options):
        """subprocess.Popen of a program the host runs for the session (xdotool, xmodmap, ffmpeg), with `variables`
        as popen's: as the sandbox's user, in its network namespace (where its X display's socket is) and cgroup,
        but in user and pid namespaces and folders of its own, outside the session's machine. A process of the
        session sees no pid of it, so it cannot take its pipes (pidfd_getfd) or trace it: what the host reads of
        it is the helper's."""
        command, _ = self.machine.command(argv, variables, [], None, ids=self.policy.ids(), join=False)
        options.setdefault("env", HOST_ENVIRONMENT)
        return spawn(command, **options)

    def _start_relay(self):
        """systemd-socket-proxyd on a new DevTools socket, as RELAY_USER in a bubblewrap of its own (a previous
        browser's relay, killed with it, is reaped first)."""
        if self._relay is not None:
            self._relay.kill()  # its bubblewrap: what it runs dies with it (--die-with-parent)
            end(self._relay)
            self._relay = None
        listener = self.listener(DEVTOOLS_SOCKET)
        try:
            # The socket as fd 3, as socket activation hands it; its "connection refused" while Chromium starts,
            # which the host's first looks meet, goes nowhere.
            command, _ = self.machine.command([RELAY, f"127.0.0.1:{DEVTOOLS_PORT}"], None, [], None, relay=True,
                                              ids=self.policy.relay_ids(), join=False)
            self._relay = spawn(command, stdin=listener, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        finally:
            listener.close()  # the relay holds it now

    def listener(self, name):
        """A Unix socket `name` (the DevTools', the agent's), bound anew by this host (as root, in a folder the
        sandbox cannot see) and listening; it belongs to the sandbox's user, as the workers that open the DevTools
        socket check."""
        path = str(self.devtools_folder / name)
        Path(path).unlink(missing_ok=True)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(path)
            os.chown(path, *self.policy.ids())
            os.chmod(path, 0o600)
            listener.listen(128)
        except OSError:
            listener.close()
            raise
        return listener

    def readable_copy(self, folder):
        """A copy of the host's `folder` (a package the sandbox runs: the agent's) in the sandbox's own folder, which
        the sandbox's user can walk (bubblewrap opens what it binds as that user, and the host's own folder may be in
        a home it cannot enter); root's, readable by all. Made anew each time: the host's may have changed."""
        copy = self.root / folder.name
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        for path in (copy, *copy.rglob("*")):
            os.chown(path, 0, 0, follow_symlinks=False)
            if not path.is_symlink():
                path.chmod(0o755 if path.is_dir() else 0o644)
        return copy

    def start_display(self, screen):
        return self.display  # started with the browser (popen's `screen`), inside

    def inside_extensions(self, folders):
        """Where the extension `folders` (under extensions/) are inside."""
        return [f"{INSIDE_EXTENSIONS}/{Path(folder).resolve().relative_to(self.extensions.resolve())}"
                for folder in folders]

    def find_devtools(self):
        """Chromium's DevTools behind the sandbox's socket, once /json/version answers there (with the browser's
        path), else None."""
        devtools = DevTools("", socket_path=self.devtools_socket(), owner=self.policy.ids()[0])
        try:
            url = devtools.get_json("/json/version", timeout=1)["webSocketDebuggerUrl"]
        except (OSError, ValueError, KeyError):
            return None
        return replace(devtools, browser_path=urlsplit(url).path)

    def browser_pid(self, process):
        """The host pid of the Chromium browser process in the sandbox (the one of its processes whose command line
        is Chromium's without a --type= of a child process), else `process`'s."""
        for pid in sorted(self.cgroup.pids()):
            try:
                arguments = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if arguments[0].endswith(b"/chromium") and not any(a.startswith(b"--type=") for a in arguments):
                return pid
        return process.pid

    @staticmethod
    def exit_status(code):
        """bubblewrap passes on a signal that ended Chromium as 128 + its number: the signal's negative number."""
        return 128 - code if code is not None and code > 128 else code

    def stop_browser(self, process, grace):
        """SIGTERM to every process of the session but the machine's holder and its network's and resolver's,
        SIGKILL to what is left after `grace` seconds; the browser's exit status."""
        self.cgroup.kill(grace)
        return process.wait(timeout=KILL_SECONDS)  # its whole cgroup is gone: bwrap too

    def devtools_socket(self):
        return str(self.devtools_folder / DEVTOOLS_SOCKET)

    def bound_cpu(self):
        """Hold it to the policy's cores from now on: once its browser answers, before anything of a tenant runs.
        Chromium's own start takes several cores for a moment, and a start held to one is much slower."""
        self.cgroup.bound_cpu(self.policy.cpus)

    def oom_kills(self):
        """The session's own processes the OOM killer ended (its tenant's are theirs to report: the session goes on)."""
        return self.cgroup.oom_kills()

    def room(self):
        return self.cgroup.room()

    def memory_left(self):
        return self.cgroup.memory_left()


def sandbox_name(workdir):
    """The namespace's and cgroup's name for a session folder: short, and the same after a restart."""
    return NETNS_PREFIX + hashlib.sha256(str(Path(workdir).absolute()).encode()).hexdigest()[:16]


def remove_leftovers(workdir, policy_root):
    """What a sandbox of `workdir` left when its host was killed: its processes, cgroup, namespace and
    folder (each step tried, the first failure raised at the end). True if there was anything."""
    name = sandbox_name(workdir)
    cgroup = Cgroup(name)
    folder = Path(policy_root) / name
    found = cgroup.exists() or os.path.exists(f"/var/run/netns/{name}") or folder.exists()
    every_step(f"removing what sandbox {name} left", lambda: cgroup.kill(0, everything=True), cgroup.remove,
               lambda: remove_netns(name), lambda: unmount_all(folder),
               lambda: shutil.rmtree(folder, ignore_errors=True))
    return found

