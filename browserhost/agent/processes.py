"""The agent's routes of spawned processes (/process/...): spawn (run in the background, on a terminal if asked),
and status, stdin, the output stream, kill and resize of a spawned process; exec's route is execs.py's.

Requests are checked (launch.py) before anything runs; a process starts with a clean environment in a session of
its own, in one of lifecycle.MAX_LIVE slots, followed from its start by a thread of its own; a spawned process's
output goes into a ring every reader sees; an exited process stays visible KEEP_EXITED_SECONDS (at most
MAX_KEPT_EXITED of them), then is forgotten.

Memory the agent holds for processes (it counts in the tenant cgroup's cap, 3/4 of the session's: 768 MiB on the
smallest, 1 GiB, session): rings of RING_BYTES for at most 64 live and 32 kept exited processes, each chunk costing
RING_ENTRY_COST more against it (96 MiB in all); the output of running execs, execs.EXEC_CAPTURE_BUDGET (32 MiB)
for all of them together, held about four times over while an answer is made and sent (bytes, base64 text, JSON:
128 MiB). With the watches' journals (watches.py: at most 72 MiB) and the interpreter and its threads (some
30 MiB), the agent's worst case is under 330 MiB."""
import base64
import binascii
import logging
import signal
import threading
import time
import uuid
from datetime import datetime, timezone

from . import proctree, running
from .execs import exec_process
from .http import AgentError, Request, json_answer, sse
from .launch import Launch, read_launch, read_size
from .lifecycle import check_confined, deadline_of, follow_in_background, follow_to_end, start
from .output import Journal

KEEP_EXITED_SECONDS = 300.0
MAX_KEPT_EXITED = 32  # beyond it the oldest exited go first: each keeps its ring, memory of the agent
RING_BYTES = 1024 * 1024
RING_ENTRY_COST = 256  # what a chunk of the ring costs beside its bytes (its objects), counted against RING_BYTES
STDIN_WAIT_SECONDS = 10.0  # well below the SDKs' read timeout: a stdin call is answered, never resent
log = logging.getLogger("agent")
SIGNALS = {"TERM": signal.SIGTERM, "KILL": signal.SIGKILL, "INT": signal.SIGINT, "HUP": signal.SIGHUP}


class Spawned:
    """A spawned process: its run, the ring of its output, its end once it came; followed from its start by a
    thread of its own that drains its output and reaps it."""

    def __init__(self, launch: Launch, run: running.Run):
        self.id = str(uuid.uuid4())
        self.run = run
        self.tty = launch.size is not None
        self.ring = Journal(RING_BYTES, RING_ENTRY_COST)
        self.started_at = datetime.now(timezone.utc)
        self.ending: running.Ending | None = None
        self.exited_at: float | None = None
        self.sample = (0, run.started)  # (CPU ticks, monotonic time) when cpu_pct was last measured
        self.sample_lock = threading.Lock()
        deadline = deadline_of(launch, run)
        follow_in_background(run, lambda: self.follow(deadline), f"process {run.pid}")

    def follow(self, deadline: float | None) -> None:
        ending = follow_to_end(self.run, lambda stream, data: self.ring.append((stream, data), len(data)), deadline)
        if ending is None:  # its stream and status must still end
            ending = running.Ending(None, None, False, round((time.monotonic() - self.run.started) * 1000))
        exit_event = {"event": "exit", "exit_code": ending.exit_code}
        if ending.signal:
            exit_event["signal"] = ending.signal
        if ending.timed_out:
            exit_event["timed_out"] = True
        self.ending, self.exited_at = ending, time.monotonic()
        self.ring.append(("exit", exit_event))
        self.ring.close()

    def status(self) -> dict:
        if self.ending is not None:
            return {"state": "exited", "exit_code": self.ending.exit_code, "cpu_pct": 0.0, "mem_bytes": 0}
        ticks, resident = proctree.usage(self.run.pid)
        with self.sample_lock:
            then_ticks, then = self.sample
            now = time.monotonic()
            self.sample = (ticks, now)
        seconds = (max(ticks - then_ticks, 0)) / proctree.CLOCK_TICKS
        cpu_pct = round(100.0 * seconds / (now - then), 1) if now > then else 0.0
        return {"state": "running", "exit_code": None, "cpu_pct": cpu_pct, "mem_bytes": resident}


class Table:
    """Spawned processes by id; an exited one is forgotten KEEP_EXITED_SECONDS after its end (sooner when more
than MAX_KEPT_EXITED have exited)."""

    def __init__(self):
        self.processes: dict[str, Spawned] = {}
        self.lock = threading.Lock()

    def add(self, spawned: Spawned) -> None:
        with self.lock:
            self.processes[spawned.id] = spawned
            self.forget_old()

    def get(self, process_id: str) -> Spawned:
        with self.lock:
            self.forget_old()
            spawned = self.processes.get(process_id)
        if spawned is None:
            raise AgentError(404, "process_not_found", f"no process {process_id[:64]} (an exited process is kept "
                             f"{int(KEEP_EXITED_SECONDS)} s)")
        return spawned

    def forget_old(self) -> None:
        limit = time.monotonic() - KEEP_EXITED_SECONDS
        exited = sorted((spawned.exited_at, key) for key, spawned in self.processes.items()
                        if spawned.exited_at is not None)
        for index, (exited_at, process_id) in enumerate(exited):
            if exited_at < limit or index < len(exited) - MAX_KEPT_EXITED:
                del self.processes[process_id]


TABLE = Table()


def spawn_process(request: Request):
    check_confined()
    launch = read_launch(request.json(), spawn=True)
    run = start(launch, stdin_pipe=True)
    spawned = Spawned(launch, run)
    TABLE.add(spawned)
    started_at = spawned.started_at.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return json_answer(200, {"process_id": spawned.id, "pid": run.pid, "started_at": started_at})


def found(request: Request) -> Spawned:
    check_confined()
    return TABLE.get(request.params["id"])


def process_status(request: Request):
    return json_answer(200, found(request).status())


def process_stdin(request: Request):
    spawned = found(request)
    value = request.json().get("data_b64")
    if not isinstance(value, str):
        raise AgentError(400, "invalid_data_b64", "data_b64 must be a base64 string")
    try:
        data = base64.b64decode(value, validate=True)
    except binascii.Error:
        raise AgentError(400, "invalid_data_b64", "data_b64 is not valid base64") from None
    try:
        written = running.write_input(spawned.run, data, STDIN_WAIT_SECONDS)
    except running.InputClosed:
        raise exited_error(spawned) from None
    return json_answer(200, {"written_bytes": written})


def exited_error(spawned: Spawned) -> AgentError:
    if spawned.ending is not None or spawned.run.reaped:
        return AgentError(400, "process_exited", "the process has exited")
    return AgentError(400, "stdin_closed", "the process closed its stdin")


def process_stream(request: Request):
    spawned = found(request)
    after = spawned.ring.check_key(request.headers.get("Last-Event-ID"))
    return sse(spawned.ring.follow(after, frame_of, missed_frame))


def frame_of(entry) -> dict:
    stream, data = entry
    if stream == "exit":
        return data
    return {"stream": stream, "data_b64": base64.b64encode(data).decode()}


def missed_frame(dropped_bytes: int) -> dict:
    """An empty chunk telling how many bytes of output fell out of the ring before the reader's point (a frame
    the SDKs' models take: `event` may only be "exit")."""
    return {"stream": "stdout", "data_b64": "", "dropped_bytes": dropped_bytes}


def process_kill(request: Request):
    spawned = found(request)
    name = request.json().get("signal")
    if name not in SIGNALS:
        raise AgentError(400, "invalid_signal", f"signal must be one of {', '.join(SIGNALS)}")
    if spawned.ending is not None or not spawned.run.signal_group(SIGNALS[name]):
        raise AgentError(400, "process_exited", "the process has exited")
    return json_answer(200, {"ok": True})


def process_resize(request: Request):
    spawned = found(request)
    body = request.json()
    for name in ("cols", "rows"):
        if body.get(name) is None:
            raise AgentError(400, f"invalid_{name}", f"{name} is required")
    cols, rows = read_size(body)
    if not spawned.tty:
        raise AgentError(400, "no_tty", "the process was spawned without allocate_tty: it has no terminal to resize")
    if not running.resize(spawned.run, cols, rows):
        raise AgentError(400, "process_exited", "the process has exited")
    return json_answer(200, {"ok": True})


ROUTES = [
    ("POST", "/process/exec", exec_process),
    ("POST", "/process/spawn", spawn_process),
    ("GET", "/process/{id}/status", process_status),
    ("POST", "/process/{id}/stdin", process_stdin),
    ("GET", "/process/{id}/stdout/stream", process_stream),
    ("POST", "/process/{id}/kill", process_kill),
    ("POST", "/process/{id}/resize", process_resize),
]
