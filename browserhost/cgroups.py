"""A session's cgroup (browserhost/sandbox.py makes one per sandbox): its memory, process and CPU caps, its
processes, how to end them, and what the OOM killer did in it. cgroup v2, or v1's memory, pids and cpu
controllers; every sandbox's cgroup is in one (`lantern`) whose memory cap holds them all together.

A session's cgroup has a child, `tenant`, for what runs through its agent (browserhost/agents.py: its files and
processes), capped below the session (TENANT_MEMORY_SHARE, TENANT_PIDS_SHARE): a tenant's process that allocates
too much is the one the OOM killer ends, within the tenant's cap, and Chromium goes on. Under cgroup v2 a cgroup
with processes gives no controller to its children, so there the session's own processes are in a leaf of their own
(`own`) beside `tenant`; under v1 they are in the session's cgroup itself.
"""
import errno
import logging
import os
import re
import signal
import time
from pathlib import Path

log = logging.getLogger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")
CGROUP_PARENT = "lantern"
CPU_PERIOD_US = 100_000  # the kernel's default period for a CPU bound
KILL_SECONDS = 5.0
TENANT = "tenant"
OWN = "own"  # v2 only: the leaf of the session's own processes (the browser, its network, its machine's holder)
# Of the session's caps: what its tenant's processes may take, so that the browser always keeps the rest.
TENANT_MEMORY_SHARE = 3 / 4
TENANT_PIDS_SHARE = 1 / 2
# Of the tenant's memory, what the session may not fill with files: its agent's own (its Python, its calls'
# buffers), so that a session full of files still has an agent to delete them with. With no swap, tmpfs pages
# charged to the tenant are never given back, and an agent without it would be killed at its next allocation.
AGENT_HEADROOM = 64 * 1024 * 1024


class Cgroup:
    """A session's cgroup: one directory under cgroup v2, or one under each of v1's memory, pids and cpu."""

    def __init__(self, name):
        self.name = name
        # The sandbox's own processes (its network stack), which outlive a browser stopped and started again
        # in it, and end with the sandbox.
        self.spared = set()
        # The session machine's holder (browserhost/machine.py), spared as they are: what is orphaned to its init
        # (a browser's or a tenant's process) is not.
        self.kept = set()

    @staticmethod
    def unified():
        return (CGROUP_ROOT / "cgroup.controllers").exists()

    @classmethod
    def parents(cls):
        if cls.unified():
            return [CGROUP_ROOT / CGROUP_PARENT]
        return [CGROUP_ROOT / controller / CGROUP_PARENT for controller in ("memory", "pids", "cpu")]

    @classmethod
    def parent_ready(cls):
        """Make the parent cgroups (OSError when this machine does not let us)."""
        for parent in cls.parents():
            parent.mkdir(exist_ok=True)
        if cls.unified():
            for folder in (CGROUP_ROOT, CGROUP_ROOT / CGROUP_PARENT):
                (folder / "cgroup.subtree_control").write_text("+memory +pids +cpu")

    @classmethod
    def cap_all(cls, memory_mb):
        """Cap the memory of every sandbox together, swap included (None: leave it as it is)."""
        if not memory_mb:
            return
        parent, cap = cls.parents()[0], memory_mb * 1024 * 1024
        if cls.unified():
            _write(parent / "memory.max", cap)
            _write(parent / "memory.swap.max", 0, required=False)
            return
        # v1 keeps memory + swap at or above memory alone: lift it, set memory, then bring it down to match.
        _write(parent / "memory.memsw.limit_in_bytes", -1, required=False)
        _write(parent / "memory.limit_in_bytes", cap)
        _write(parent / "memory.memsw.limit_in_bytes", cap, required=False)

    def folders(self):
        """The session's cgroup: its caps hold every process of the session, its tenant's included."""
        return [parent / self.name for parent in self.parents()]

    def tenant_folders(self):
        return [folder / TENANT for folder in self.folders()]

    def own_folders(self):
        """Where the session's own processes are (not its tenant's)."""
        return [folder / OWN for folder in self.folders()] if self.unified() else self.folders()

    def procs_files(self, *, tenant=False):
        """The cgroup.procs files a process of the session (its tenant's with `tenant`) writes itself into."""
        return [str(folder / "cgroup.procs") for folder in (self.tenant_folders() if tenant else self.own_folders())]

    def exists(self):
        return any(folder.exists() for folder in self.folders())

    def create(self, memory_bytes, pids_max, cpus=None):
        """Make it with its caps; with cores contended, sessions share them in proportion to their `cpus`, which
        `bound_cpu` makes a bound (until then it has none)."""
        self.parent_ready()
        for folder in self.folders():
            folder.mkdir(exist_ok=True)
        if self.unified():
            folder = self.folders()[0]
            _write(folder / "memory.max", memory_bytes)
            _write(folder / "memory.swap.max", 0, required=False)
            _write(folder / "pids.max", pids_max)
            _write(folder / "cpu.weight", min(10_000, max(1, round(100 * (cpus or 1)))))
            (folder / OWN).mkdir(exist_ok=True)
            _write(folder / "cgroup.subtree_control", "+memory +pids +cpu")
        else:
            memory, pids, cpu = self.folders()
            _write(memory / "memory.limit_in_bytes", memory_bytes)
            _write(memory / "memory.memsw.limit_in_bytes", memory_bytes, required=False)  # no swapping past it
            _write(pids / "pids.max", pids_max)
            _write(cpu / "cpu.shares", min(262_144, max(2, round(1024 * (cpus or 1)))))
        self._create_tenant(int(memory_bytes * TENANT_MEMORY_SHARE), max(1, int(pids_max * TENANT_PIDS_SHARE)))
        self.bound_cpu(None)

    def _create_tenant(self, memory_bytes, pids_max):
        """The tenant's child cgroup, its memory (no swap) and process caps; its CPU is the session's."""
        for folder in self.tenant_folders():
            folder.mkdir(exist_ok=True)
        if self.unified():
            tenant = self.tenant_folders()[0]
            _write(tenant / "memory.max", memory_bytes)
            _write(tenant / "memory.swap.max", 0, required=False)
            _write(tenant / "pids.max", pids_max)
            return
        memory, pids, _ = self.tenant_folders()
        _write(memory / "memory.limit_in_bytes", memory_bytes)
        _write(memory / "memory.memsw.limit_in_bytes", memory_bytes, required=False)
        _write(pids / "pids.max", pids_max)

    def tenant_limits(self):
        """(memory cap in bytes, most processes and threads) of the tenant's cgroup, as the kernel holds them."""
        if self.unified():
            tenant = self.tenant_folders()[0]
            return int((tenant / "memory.max").read_text()), int((tenant / "pids.max").read_text())
        memory, pids, _ = self.tenant_folders()
        return int((memory / "memory.limit_in_bytes").read_text()), int((pids / "pids.max").read_text())

    def memory_left(self):
        """What the tenant's processes may still take: the least, over the session's cgroup and its tenant's, of its
        memory cap less what it holds that cannot be given back (anonymous and tmpfs pages, there being no swap);
        negative when a cap was lowered below what it holds."""
        folders = (self.folders()[0], self.tenant_folders()[0])
        return min(_memory_left(folder, self.unified()) for folder in folders)

    def room(self):
        """The bytes the session may still store (in its home, /tmp, /dev/shm: memory) through its agent: what its
        tenant may take less AGENT_HEADROOM; never negative."""
        return max(0, self.memory_left() - AGENT_HEADROOM)

    def bound_cpu(self, cpus):
        """At most `cpus` cores busy from now on (None: no bound)."""
        quota = None if cpus is None else max(1000, round(cpus * CPU_PERIOD_US))
        if self.unified():
            _write(self.folders()[0] / "cpu.max", f"{quota or 'max'} {CPU_PERIOD_US}")
        else:
            cpu = self.folders()[2]
            _write(cpu / "cpu.cfs_period_us", CPU_PERIOD_US)
            _write(cpu / "cpu.cfs_quota_us", quota or -1)

    def limits(self):
        """(memory cap in bytes, most processes and threads, cores at most or None) as the kernel holds them."""
        if self.unified():
            folder = self.folders()[0]
            quota, period = (folder / "cpu.max").read_text().split()
            return (int((folder / "memory.max").read_text()), int((folder / "pids.max").read_text()),
                    None if quota == "max" else int(quota) / int(period))
        memory, pids, cpu = self.folders()
        quota, period = (int((cpu / name).read_text()) for name in ("cpu.cfs_quota_us", "cpu.cfs_period_us"))
        return (int((memory / "memory.limit_in_bytes").read_text()), int((pids / "pids.max").read_text()),
                None if quota < 0 else quota / period)

    def pids(self, *, everything=False):
        """The session's own processes; with `everything`, its tenant's too (those of every cgroup under it)."""
        if everything:
            return _members(Path(top) / "cgroup.procs" for folder in self.folders() for top, _, _ in os.walk(folder))
        return _members(self.procs_files())

    def tenant_pids(self):
        return _members(self.procs_files(tenant=True))

    def kill(self, grace=0.0, *, everything=False):
        """SIGTERM to the session's own processes but the spared ones when `grace`, SIGKILL to what is left; waits
        until none is left. A tenant's processes outlive it (they go on across a browser's restart); with
        `everything`, every process of the session goes, its tenant's too."""
        def targets():
            pids = self.pids(everything=everything)
            return pids if everything else pids - _with_descendants(self.spared, pids) - self.kept

        if grace > 0:
            self._signal_all(signal.SIGTERM, targets())
            deadline = time.monotonic() + grace
            while targets() and time.monotonic() < deadline:
                time.sleep(0.02)
        deadline = time.monotonic() + KILL_SECONDS
        while targets() and time.monotonic() < deadline:
            self._signal_all(signal.SIGKILL, targets())
            time.sleep(0.02)

    @staticmethod
    def _signal_all(signum, pids):
        for pid in pids:
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass

    def remove(self):
        """Its cgroups, children first (a cgroup with children cannot go)."""
        for top in self.folders():
            for folder in [Path(path) for path, _, _ in os.walk(top, topdown=False)]:
                self._remove_one(folder)

    @staticmethod
    def _remove_one(folder):
        for _ in range(50):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as error:
                    if error.errno != errno.EBUSY:
                        log.warning("could not remove cgroup %s: %s", folder, error)
                        break
                    time.sleep(0.05)  # the last exiting processes are still being released

    def oom_kills(self, *, tenant=False):
        """How many of the session's own processes (its tenant's with `tenant`) the OOM killer ended so far. v1
        counts a kill in the victim's cgroup alone; v2's memory.events counts it in every parent too, so the
        session's own are its leaf's."""
        name = "memory.events" if self.unified() else "memory.oom_control"
        folder = (self.tenant_folders() if tenant else self.own_folders())[0]
        try:
            text = (folder / name).read_text()
        except OSError:
            return 0
        match = re.search(r"^oom_kill (\d+)$", text, re.MULTILINE)
        return int(match.group(1)) if match else 0

    def cpu_throttled(self):
        """How many periods the kernel held this cgroup back at its CPU bound (0 when it has none)."""
        folder = self.folders()[0 if self.unified() else 2]
        try:
            stat = dict(line.split() for line in (folder / "cpu.stat").read_text().splitlines())
        except (OSError, ValueError):
            return 0
        return int(stat.get("nr_throttled", 0))

    def peak_memory_kb(self):
        folder = self.folders()[0]
        for name in ("memory.peak", "memory.max_usage_in_bytes"):
            try:
                return int((folder / name).read_text()) // 1024
            except (OSError, ValueError):
                continue
        return 0


def _members(procs_files):
    found = set()
    for path in procs_files:
        try:
            found.update(int(line) for line in Path(path).read_text().split())
        except OSError:
            pass
    return found


def _memory_left(folder, unified):
    """`folder`'s memory cap less its anonymous and tmpfs pages (the memory.stat of v2, or v1's totals)."""
    cap_file, names = ("memory.max", ("anon", "shmem")) if unified else \
        ("memory.limit_in_bytes", ("total_rss", "total_shmem"))
    cap = (folder / cap_file).read_text().strip()
    stat = dict(line.split() for line in (folder / "memory.stat").read_text().splitlines() if line.strip())
    held = sum(int(stat.get(name, 0)) for name in names)
    return (int(cap) if cap.isdigit() else 2 ** 63 - 1) - held


def _with_descendants(roots, pids):
    """`roots` and those of `pids` whose parent, or its parent and so on, is one of them."""
    parents = {}
    for pid in pids:
        try:
            parents[pid] = int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    found = set(roots)
    for pid in pids:
        chain, ancestor = [], pid
        while ancestor in parents and ancestor not in found:
            chain.append(ancestor)
            ancestor = parents[ancestor]
        if ancestor in found:
            found.update(chain)
    return found


def _write(path, value, *, required=True):
    try:
        Path(path).write_text(str(value))
    except OSError:
        if required:
            raise


# -- what the OOM killer did -----------------------------------------------------------------------

# The cgroup named is the victim's own: the cap reached may be its parent's (every sandbox's together).
OOM_TASK = re.compile(r"oom-kill:.*?task_memcg=(?P<memcg>[^,]+),task=(?P<task>[^,]+),pid=(?P<pid>\d+)")
OOM_KILLED = re.compile(r"Killed process (?P<pid>\d+) \((?P<name>[^)]*)\).*?anon-rss:(?P<anon>\d+)kB, "
                        r"file-rss:(?P<file>\d+)kB, shmem-rss:(?P<shmem>\d+)kB")


def oom_report(cgroup):
    """The SDK's system_oom_kill data for the last process the OOM killer ended in `cgroup`, from the
    kernel's log (/dev/kmsg) where it is readable; else what the cgroup itself tells."""
    victim = None
    for line in _kernel_log():
        task = OOM_TASK.search(line)
        if task and task.group("memcg").rstrip("/").endswith((f"/{cgroup.name}", f"/{cgroup.name}/{OWN}")):
            victim = {"pid": int(task.group("pid")), "process_name": task.group("task"), "rss_kb": 0}
        killed = OOM_KILLED.search(line)
        if killed and victim and int(killed.group("pid")) == victim["pid"]:
            victim["rss_kb"] = sum(int(killed.group(part)) for part in ("anon", "file", "shmem"))
    if victim is None:
        return {"pid": 0, "process_name": "unknown", "rss_kb": cgroup.peak_memory_kb(), "constraint": "memcg"}
    return {**victim, "constraint": "memcg"}


def _kernel_log():
    """The kernel log's records still in its buffer, as text ([] when it cannot be read)."""
    try:
        fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return []
    lines = []
    try:
        while True:
            try:
                record = os.read(fd, 8192)
            except BlockingIOError:
                break
            except OSError as error:
                if error.errno == errno.EPIPE:  # a record was overwritten while reading: skip it
                    continue
                break
            lines.append(record.decode(errors="replace").partition(";")[2].strip())
    finally:
        os.close(fd)
    return lines
