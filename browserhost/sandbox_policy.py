"""What every sandbox of a host gets (BROWSER_SANDBOX_* and BROWSER_* settings: SandboxPolicy), and whether this
machine can make them (`probe`). browserhost/sandbox.py makes one per session.
"""
import ipaddress
import logging
import os
import pwd
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from browserhost import resolver
from browserhost.agent.confine import landlock_abi  # the agent's own probe (standard library only)
from browserhost.cgroups import Cgroup

RELAY = "/usr/lib/systemd/systemd-socket-proxyd"
# The DevTools relay's user: any but the browser's, which could take the relay's socket. Debian's `nobody`, for
# daemons that own no files: the relay owns none (the host binds its socket).
RELAY_USER = "nobody"
TOOLS = {"bwrap": "bubblewrap", "setpriv": "util-linux", "unshare": "util-linux", "ip": "iproute2", "nft": "nftables",
         "slirp4netns": "slirp4netns", "sysctl": "procps", "mount": "mount", "dnsmasq": "dnsmasq-base",
         RELAY: "systemd"}
DEVTOOLS_PORT = 9222
# What a session's agent (browserhost/agents.py: its files and processes) needs of the machine: the system's Python,
# and Landlock (its processes are confined with it, or refused: 501).
AGENT_PYTHON = "/usr/bin/python3"
logger = logging.getLogger(__name__)


def parse_ports(text):
    """'18000-18099,3000' -> ((18000, 18099), (3000, 3000)); ValueError on anything else."""
    ranges = []
    for part in filter(None, (p.strip() for p in str(text or "").split(","))):
        low, _, high = part.partition("-")
        if not (low.strip().isdigit() and (high or low).strip().isdigit()):
            raise ValueError(f"not a port or range of ports: {part!r}")
        low, high = int(low), int(high or low)
        if not 1 <= low <= high <= 65535:
            raise ValueError(f"not a port or range of ports: {part!r}")
        if low <= DEVTOOLS_PORT <= high:
            raise ValueError(f"port {DEVTOOLS_PORT} is the sandbox's own DevTools port; leave it out of {part!r}")
        ranges.append((low, high))
    return tuple(ranges)


def format_ports(ranges):
    """((18000, 18099), (3000, 3000)) -> '18000-18099,3000', as parse_ports reads it."""
    return ",".join(str(low) if low == high else f"{low}-{high}" for low, high in ranges)


def parse_networks(text):
    """'10.1.0.0/16, fd00::/8' -> (IPv4Network('10.1.0.0/16'), ...); ValueError on anything else."""
    items = text if isinstance(text, (list, tuple)) else str(text or "").split(",")
    return tuple(ipaddress.ip_network(item.strip(), strict=False) for item in items if item.strip())


def format_networks(networks):
    """(IPv4Network('10.1.0.0/16'), ...) -> '10.1.0.0/16,...', as parse_networks reads it."""
    return ",".join(str(network) for network in networks)


@dataclass(frozen=True)
class SandboxPolicy:
    """What every sandbox of a host gets (from BROWSER_SANDBOX_* and BROWSER_* settings)."""

    user: str = "lantern-browser"
    root: Path = Path("/var/lib/lantern/sandboxes")
    loopback_ports: tuple = ()
    allowed_networks: tuple = ()
    pids_max: int = 1024
    all_memory_mb: int | None = None  # every sandbox of the machine together (None: as it is)
    cpus: float = 1.0  # cores a session may keep busy at most
    dns_servers: tuple = ()  # ((address, port), ...) its resolver asks (none: the machine's own)

    @classmethod
    def from_settings(cls, settings):
        """The policy of the host's settings (browserhost/settings.py's HostSettings, checked and parsed at start)."""
        return cls(user=settings.browser_sandbox_user, root=Path(settings.browser_sandbox_dir),
                   loopback_ports=settings.browser_loopback_ports, allowed_networks=settings.browser_allowed_networks,
                   pids_max=settings.browser_sandbox_pids, all_memory_mb=settings.browser_sandboxes_memory_mb,
                   cpus=settings.browser_sandbox_cpus, dns_servers=settings.browser_dns_servers)

    def ids(self):
        """(uid, gid) of the sandbox user; KeyError when there is no such user."""
        entry = pwd.getpwuid(int(self.user)) if str(self.user).isdigit() else pwd.getpwnam(self.user)
        return entry.pw_uid, entry.pw_gid

    @staticmethod
    def resolver_ids():
        """(uid, gid) of the user sessions' resolvers run as; KeyError when there is no such user."""
        entry = pwd.getpwnam(resolver.USER)
        return entry.pw_uid, entry.pw_gid

    @staticmethod
    def relay_ids():
        """(uid, gid) of the user sessions' DevTools relays run as; KeyError when there is no such user."""
        entry = pwd.getpwnam(RELAY_USER)
        return entry.pw_uid, entry.pw_gid


def probe(policy):
    """What this machine lacks to sandbox browsers, one sentence each ([]: nothing)."""
    missing = []
    if os.geteuid() != 0:
        missing.append("the browser host does not run as root, which network namespaces and cgroups need")
    absent = [tool for tool in TOOLS if shutil.which(tool) is None]
    if absent:
        packages = " ".join(sorted({TOOLS[tool] for tool in absent}))
        missing.append(f"{', '.join(absent)} not installed (apt-get install {packages})")
    try:
        uid, _ = policy.ids()
        if uid == 0:
            missing.append(f"BROWSER_SANDBOX_USER {policy.user} is root")
    except KeyError:
        uid = None
        missing.append(f"no user {policy.user!r} (BROWSER_SANDBOX_USER; make run creates it: "
                       f"useradd --system --no-create-home --shell /usr/sbin/nologin {policy.user})")
    helpers = ((resolver.USER, policy.resolver_ids, "sessions' resolvers", "apt-get install dnsmasq-base makes it"),
               (RELAY_USER, policy.relay_ids, "sessions' DevTools relays", "Debian's base system has it"))
    for name, ids, who, remedy in helpers:
        try:
            if ids()[0] == uid:
                missing.append(f"BROWSER_SANDBOX_USER {policy.user} is the user {who} run as: the browser must "
                               "run as another")
        except KeyError:
            missing.append(f"no user {name!r}, which {who} run as ({remedy})")
    if missing:
        return missing
    try:
        Cgroup.parent_ready()
    except OSError as error:
        missing.append(f"cgroups: the memory, pids and cpu controllers are not writable here ({error})")
    else:
        try:
            Cgroup.cap_all(policy.all_memory_mb)
        except OSError as error:  # such as a cap below what the machine's sandboxes hold now
            missing.append(f"BROWSER_SANDBOXES_MEMORY_MB {policy.all_memory_mb} cannot be set ({error})")
    uid, gid = policy.ids()
    try:
        policy.root.mkdir(mode=0o711, parents=True, exist_ok=True)
        trial = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "bwrap",
                                "--unshare-user", "--unshare-pid", "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib",
                                "/lib", "--symlink", "usr/lib64", "/lib64", "--proc", "/proc",
                                "--ro-bind", str(policy.root), "/mnt", "/usr/bin/true"],
                               capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as error:
        return [*missing, f"trying a sandbox failed: {error}"]
    for warning in agent_warnings():
        logger.warning("files and processes of sessions: %s", warning)
    if trial.returncode != 0:
        missing.append(f"bubblewrap cannot make a user and pid namespace as {policy.user} with "
                       f"BROWSER_SANDBOX_DIR {policy.root} in it: {trial.stderr.strip() or trial.returncode} "
                       "(are unprivileged user namespaces enabled? can that user walk the path to that folder?)")
    return missing


def agent_warnings():
    """What this machine lacks for sessions' files and processes (browsers run without them), one sentence each."""
    warnings = []
    if not os.access(AGENT_PYTHON, os.X_OK):
        warnings.append(f"no {AGENT_PYTHON} (apt-get install python3): their calls answer 501 agent_not_installed")
    abi = landlock_abi()
    if abi < 1:
        warnings.append("the kernel has no Landlock (Linux 5.13 or later, with landlock in its lsm= list): a session's "
                        "processes cannot be confined, and process calls answer 501 processes_not_confined")
    elif abi < 6:
        warnings.append(f"the kernel's Landlock is ABI {abi}, below 6 (Linux 6.12): a session's processes cannot be "
                        "kept from signalling its browser's")
    return warnings

