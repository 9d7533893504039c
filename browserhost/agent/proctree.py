"""What /proc says about a process and those it started: who descends from it, their CPU time and memory, and
how to kill them all, those that left its process group or session included.

Inside the sandbox the agent's pid namespace holds only the session's processes, so walking /proc is cheap and
sees nothing else."""
import os
import signal
from dataclasses import dataclass

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
KILL_ROUNDS = 10  # a process forking while it is killed shows new children; a few rounds catch them


@dataclass
class Stat:
    pid: int
    ppid: int
    session: int
    cpu_ticks: int  # its own CPU time and that of the children it reaped
    rss_pages: int
    zombie: bool


def read_stat(pid: int) -> Stat | None:
    """/proc/<pid>/stat, or None once the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            text = file.read()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: the fields start after its last ")".
    fields = text[text.rindex(b")") + 2:].split()
    return Stat(pid=pid, ppid=int(fields[1]), session=int(fields[3]),
                cpu_ticks=sum(int(value) for value in fields[11:15]), rss_pages=int(fields[21]),
                zombie=fields[0] == b"Z")


def all_stats() -> dict[int, Stat]:
    stats = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            stat = read_stat(int(name))
            if stat is not None:
                stats[stat.pid] = stat
    return stats


def family(pid: int, stats: dict[int, Stat], session: int | None = None) -> list[Stat]:
    """`pid` and its live descendants by parentage; with `session`, also every process of that session (the
    orphans of its descendants, whose parentage now leads to init)."""
    children: dict[int, list[int]] = {}
    for stat in stats.values():
        children.setdefault(stat.ppid, []).append(stat.pid)
    found, todo = set(), [pid]
    while todo:
        current = todo.pop()
        if current in found or current not in stats:
            continue
        found.add(current)
        todo.extend(children.get(current, ()))
    if session is not None:
        found.update(stat.pid for stat in stats.values() if stat.session == session)
    return [stats[member] for member in found]


def usage(pid: int) -> tuple[int, int]:
    """(CPU ticks, resident bytes) of `pid` and its live descendants."""
    members = family(pid, all_stats())
    return (sum(stat.cpu_ticks for stat in members),
            sum(stat.rss_pages for stat in members) * PAGE_BYTES)


def kill_family(pid: int) -> int:
    """SIGKILL to `pid` (not reaped yet, so its pid and session id are still its own), its descendants and every
    process of its session, until a round finds none left alive; how many were signalled."""
    killed = set()
    for _ in range(KILL_ROUNDS):
        alive = [stat.pid for stat in family(pid, all_stats(), session=pid) if not stat.zombie]
        if not alive:
            break
        for member in alive:
            try:
                os.kill(member, signal.SIGKILL)
            except ProcessLookupError:
                pass
            killed.add(member)
    return len(killed)
