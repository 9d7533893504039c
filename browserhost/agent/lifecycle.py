"""A tenant process's life in the agent: whether processes may run at all (Landlock), a live slot (at most
MAX_LIVE), its start, and the thread that follows it from its start to its end (drained, reaped, its slot given
back), whatever becomes of the request that started it."""
import errno
import logging
import threading

from . import confine, running
from .http import AgentError
from .launch import Launch

MAX_LIVE = 64
log = logging.getLogger("agent")


def confined() -> bool:
    """Whether the agent (and so what it runs) is in a Landlock domain: __main__ confines it before it serves."""
    return confine.CONFINED_ABI >= 1


def check_confined() -> None:
    if not confined():
        raise AgentError(501, "processes_not_confined", "this host's kernel has no Landlock: a session's processes "
                         "could not be kept from Chromium's, so they are not run")


class Counter:
    """A count of something the agent has a fixed amount of, taken and given back from any thread."""

    def __init__(self, total: int):
        self.total = total
        self.used = 0
        self.lock = threading.Lock()

    def take(self, wanted: int) -> int:
        """Up to `wanted` of what is left (maybe 0), now taken."""
        with self.lock:
            granted = max(min(wanted, self.total - self.used), 0)
            self.used += granted
            return granted

    def give_back(self, amount: int = 1) -> None:
        with self.lock:
            self.used -= amount


SLOTS = Counter(MAX_LIVE)  # live processes, exec'd and spawned


def start(launch: Launch, stdin_pipe: bool) -> running.Run:
    """Start the checked launch in a live slot; AgentError 400 when there is none or the system refuses it."""
    if not SLOTS.take(1):
        raise AgentError(400, "too_many_processes", f"a session runs at most {MAX_LIVE} processes at once")
    try:
        return running.start(launch.argv, launch.env, launch.cwd, stdin_pipe, launch.size)
    except OSError as error:
        SLOTS.give_back()
        code = "too_many_processes" if error.errno == errno.EAGAIN else "command_not_startable"  # pids cap
        raise AgentError(400, code, f"{launch.argv[0]}: {error.strerror}") from None
    except BaseException:
        SLOTS.give_back()
        raise


def follow_in_background(run: running.Run, target, name: str) -> None:
    """Start `target` (it follows `run` to its end) in a thread; when none can start (the pids cap) the process
    is killed and reaped here and its slot given back: AgentError 400, not a 5xx a client would retry."""
    thread = threading.Thread(target=target, name=name, daemon=True)
    try:
        thread.start()
    except RuntimeError as error:
        running.abandon(run)
        SLOTS.give_back()
        raise AgentError(400, "too_many_processes", f"the session cannot start a thread to follow the process "
                         f"({error})") from None


def follow_to_end(run: running.Run, sink, deadline: float | None) -> running.Ending | None:
    """running.follow, its slot given back at the end; None when following failed (the process is then killed
    and reaped all the same)."""
    try:
        return running.follow(run, sink, deadline)
    except Exception:
        log.exception("following process %d failed", run.pid)
        try:
            running.abandon(run)
        except Exception:
            log.exception("ending process %d failed", run.pid)
        return None
    finally:
        SLOTS.give_back()


def deadline_of(launch: Launch, run: running.Run) -> float | None:
    return None if launch.timeout is None else run.started + launch.timeout
