"""The agent's process routes (/process/...): exec (run to the end, answer its output), spawn (run in the
background, on a terminal if asked), and status, stdin, the output stream, kill and resize of a spawned process.

Everything is checked before anything runs; a process starts with a clean environment in a session of its own;
at most MAX_LIVE run at once; a spawned process's output goes into a ring every reader sees; an exited process
stays visible KEEP_EXITED_SECONDS, then is forgotten."""
import base64
import binascii
import errno
import functools
import logging
import os
import pwd
import signal
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone

from . import confine, proctree, running
from .http import AgentError, Request, check_path, json_answer, sse, trickle
from .output import Journal

MAX_LIVE = 64
KEEP_EXITED_SECONDS = 300.0
MAX_KEPT_EXITED = 128  # beyond it the oldest exited go first: each keeps its ring, memory of the agent
RING_BYTES = 1024 * 1024
EXEC_OUTPUT_BYTES = 8 * 1024 * 1024  # kept per stream of an exec; the rest is dropped and said so
TIMEOUT_RANGE = (1, 86400)
SIZE_RANGE = (1, 4096)  # a terminal's cols and rows
DEFAULT_SIZE = (80, 24)
STDIN_WAIT_SECONDS = 10.0  # well below the SDKs' read timeout: a stdin call is answered, never resent
ARGUMENT_LIMIT = 128 * 1024  # bytes of one argument or variable, as Linux's MAX_ARG_STRLEN
DEFAULT_PATH = "/usr/bin:/bin"
SESSION_HOME = "/home/session"
log = logging.getLogger("agent")
SIGNALS = {"TERM": signal.SIGTERM, "KILL": signal.SIGKILL, "INT": signal.SIGINT, "HUP": signal.SIGHUP}


@functools.cache
def confined() -> bool:
    """Whether the agent (and so what it runs) is in a Landlock domain: __main__ confines the agent before it
    serves, which succeeds exactly when the kernel has Landlock."""
    return confine.landlock_abi() >= 1


def home() -> str:
    """The session's home: the agent's own HOME (the sandbox sets it to /home/session)."""
    return os.environ.get("HOME") or SESSION_HOME


@dataclass
class Launch:
    """A checked exec or spawn request."""
    argv: list[str]
    env: dict[str, str]
    cwd: str
    timeout: int | None
    size: tuple[int, int] | None = None  # (cols, rows) of its terminal, None without one


def read_launch(body: dict, spawn: bool) -> Launch:
    """The request's fields checked in the order the brief gives (AgentError 400 at the first bad one)."""
    check_user(body.get("as_root"), body.get("as_user"))
    cwd = read_cwd(body.get("cwd"))
    env = read_env(body.get("env"))
    timeout = read_int(body, "timeout_sec", TIMEOUT_RANGE, None)
    size = read_size(body) if spawn else None  # checked even when there is no terminal to use it
    if not (spawn and read_bool(body, "allocate_tty")):
        size = None
    if size is not None:
        env.setdefault("TERM", "xterm-256color")
    argv = [resolve(body.get("command"), env["PATH"], cwd), *read_args(body.get("args"))]
    return Launch(argv, env, cwd, timeout, size)


def check_user(as_root, as_user) -> None:
    if as_root is not None and not isinstance(as_root, bool):
        raise AgentError(400, "invalid_as_root", "as_root must be a boolean")
    if as_root:
        raise AgentError(400, "as_root_not_supported", "processes run as the session's user: there is no root in "
                         "a session's sandbox")
    if as_user is None:
        return
    if not isinstance(as_user, str) or as_user not in session_user_names():
        raise AgentError(400, "as_user_not_supported", "a session has one user: as_user may only name it "
                         f"({', '.join(sorted(session_user_names()))})")


def session_user_names() -> set[str]:
    uid, gid = os.getuid(), os.getgid()
    names = {"session", "kernel", str(uid), f"{uid}:{gid}"}
    try:
        names.add(pwd.getpwuid(uid).pw_name)
    except KeyError:
        pass
    return names


def read_cwd(value) -> str:
    if value is None:
        return home()
    cwd = check_path(value, "cwd")
    if not os.path.isdir(cwd) or not os.access(cwd, os.X_OK):
        raise AgentError(400, "invalid_cwd", f"cwd {cwd} is not a directory the session can enter")
    return cwd


def read_env(value) -> dict[str, str]:
    env = {"PATH": DEFAULT_PATH, "HOME": home(), "TMPDIR": "/tmp", "LANG": "C.UTF-8"}
    if value is None:
        return env
    if not isinstance(value, dict):
        raise AgentError(400, "invalid_env", "env must be an object of strings")
    for name, text in value.items():
        if not name or "=" in name or not clean_string(name) or not clean_string(text):
            raise AgentError(400, "invalid_env", f"env {name[:64]!r}: names and values are strings without NUL "
                             "(names without '=')")
        env[name] = text
    return env


def read_args(value) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(clean_string(arg) for arg in value):
        raise AgentError(400, "invalid_args", "args must be a list of strings without NUL")
    return value


def clean_string(value) -> bool:
    return isinstance(value, str) and "\0" not in value and len(value) <= ARGUMENT_LIMIT


def read_bool(body: dict, name: str) -> bool:
    value = body.get(name)
    if value is not None and not isinstance(value, bool):
        raise AgentError(400, f"invalid_{name}", f"{name} must be a boolean")
    return bool(value)


def read_int(body: dict, name: str, bounds: tuple[int, int], default):
    value = body.get(name)
    if value is None:
        return default
    if not isinstance(value, int) or isinstance(value, bool) or not bounds[0] <= value <= bounds[1]:
        raise AgentError(400, f"invalid_{name}", f"{name} must be a whole number from {bounds[0]} to {bounds[1]}")
    return value


def read_size(body: dict) -> tuple[int, int]:
    return read_int(body, "cols", SIZE_RANGE, DEFAULT_SIZE[0]), read_int(body, "rows", SIZE_RANGE, DEFAULT_SIZE[1])


def resolve(command, search_path: str, cwd: str) -> str:
    """The executable `command` names: a path (relative to cwd) or a name looked up in PATH, as execvp would."""
    if not clean_string(command) or not command:
        raise AgentError(400, "invalid_command", "command must be a non-empty string without NUL")
    if "/" in command:
        candidates = [os.path.join(cwd, command)]
    else:
        candidates = [os.path.join(folder or cwd, command) for folder in search_path.split(":")]
    for candidate in candidates:
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return os.path.normpath(candidate)
    raise AgentError(400, "command_not_startable", f"{command[:256]}: no executable file of that name "
                     f"(PATH {search_path[:256]})")


class Slots:
    """The count of live processes (exec'd and spawned), at most MAX_LIVE."""

    def __init__(self):
        self.live = 0
        self.lock = threading.Lock()

    def take(self) -> None:
        with self.lock:
            if self.live >= MAX_LIVE:
                raise AgentError(400, "too_many_processes", f"a session runs at most {MAX_LIVE} processes at once")
            self.live += 1

    def give_back(self) -> None:
        with self.lock:
            self.live -= 1


SLOTS = Slots()


def start(launch: Launch, stdin_pipe: bool) -> running.Run:
    """Start the checked launch in a live slot; AgentError 400 when the system refuses it."""
    SLOTS.take()
    try:
        return running.start(launch.argv, launch.env, launch.cwd, stdin_pipe, launch.size)
    except OSError as error:
        SLOTS.give_back()
        code = "too_many_processes" if error.errno == errno.EAGAIN else "command_not_startable"  # pids cap
        raise AgentError(400, code, f"{launch.argv[0]}: {error.strerror}") from None
    except BaseException:
        SLOTS.give_back()
        raise


def deadline_of(launch: Launch, run: running.Run) -> float | None:
    return None if launch.timeout is None else run.started + launch.timeout


class Capture:
    """Up to EXEC_OUTPUT_BYTES of a stream; what passes it is dropped and `truncated` set."""

    def __init__(self):
        self.data = bytearray()
        self.truncated = False

    def add(self, chunk: bytes) -> None:
        room = EXEC_OUTPUT_BYTES - len(self.data)
        if len(chunk) > room:
            self.truncated = True
        self.data += chunk[:room]


def exec_process(request: Request):
    check_confined()
    launch = read_launch(request.json(), spawn=False)
    run = start(launch, stdin_pipe=False)
    return trickle(200, lambda: run_to_end(launch, run))


def run_to_end(launch: Launch, run: running.Run) -> dict:
    captures = {"stdout": Capture(), "stderr": Capture()}
    try:
        ending = running.follow(run, lambda stream, data: captures[stream].add(data), deadline_of(launch, run))
    finally:
        SLOTS.give_back()
    answer = {"exit_code": None if ending.timed_out else ending.exit_code,
              "stdout_b64": base64.b64encode(captures["stdout"].data).decode(),
              "stderr_b64": base64.b64encode(captures["stderr"].data).decode(),
              "duration_ms": ending.duration_ms, "timed_out": ending.timed_out,
              "stdout_truncated": captures["stdout"].truncated, "stderr_truncated": captures["stderr"].truncated}
    if ending.signal:
        answer["signal"] = ending.signal
    return answer


class Spawned:
    """A spawned process: its run, the ring of its output, its end once it came; followed by a thread of its own
    that drains its output and reaps it."""

    def __init__(self, launch: Launch, run: running.Run):
        self.id = str(uuid.uuid4())
        self.run = run
        self.tty = launch.size is not None
        self.ring = Journal(RING_BYTES)
        self.started_at = datetime.now(timezone.utc)
        self.ending: running.Ending | None = None
        self.exited_at: float | None = None
        self.sample = (0, run.started)  # (CPU ticks, monotonic time) when cpu_pct was last measured
        self.sample_lock = threading.Lock()
        thread = threading.Thread(target=self.follow, args=(deadline_of(launch, run),), daemon=True,
                                  name=f"process {run.pid}")
        thread.start()

    def follow(self, deadline: float | None) -> None:
        try:
            ending = running.follow(self.run, lambda stream, data: self.ring.append((stream, data), len(data)),
                                    deadline)
        except Exception:  # its stream and status must still end
            log.exception("following process %d failed", self.run.pid)
            ending = running.Ending(None, None, False, round((time.monotonic() - self.run.started) * 1000))
        finally:
            SLOTS.give_back()
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


def check_confined() -> None:
    if not confined():
        raise AgentError(501, "processes_not_confined", "this host's kernel has no Landlock: a session's processes "
                         "could not be kept from Chromium's, so they are not run")


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
    return {"event": "overflow", "dropped_bytes": dropped_bytes,
            "message": f"{dropped_bytes} bytes of output fell out of the process's {RING_BYTES}-byte ring"}


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
