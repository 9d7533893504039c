"""One process of a tenant from its start to its end: started in a session and process group of its own (on a
terminal of its own when asked), first in line for the OOM killer, killed with the agent; its output drained as it
comes into a sink; past its deadline killed with all it started; reaped, its end told as an exit code and signal.

Nothing here waits on a reader: output goes to the sink (a bounded buffer or journal) as fast as it is read."""
import errno
import fcntl
import os
import queue
import select
import selectors
import signal
import struct
import subprocess
import termios
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from .proctree import kill_family

READ_BYTES = 64 * 1024
# After the process ends, output its descendants still write to the pipes it shared is read this long, no longer:
# a daemon it left behind must not hold its answer (or its stream's end) forever.
LINGER_SECONDS = 1.0
OOM_SCORE_ADJ = "1000"  # the most: the kernel's OOM killer ends a tenant's process before the agent or Chromium
SETSID = "/usr/bin/setsid"
SETPRIV = "/usr/bin/setpriv"
CHOOM = "/usr/bin/choom"


@dataclass
class Ending:
    exit_code: int | None
    signal: str | None
    timed_out: bool
    duration_ms: int


@dataclass
class Run:
    """A started process: its pid, a pidfd (readable once it ended), its output fds and stream names, where its
    stdin goes (a pipe or the terminal's master side), the terminal's master when it has one."""
    popen: subprocess.Popen
    pidfd: int | None  # None once closed
    outputs: dict[int, str]
    stdin_fd: int | None
    master: int | None
    started: float = field(default_factory=time.monotonic)
    reaped: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)  # reaping vs signalling: a reaped pid is not ours
    io_lock: threading.Lock = field(default_factory=threading.Lock)  # writing to stdin or resizing vs closing

    @property
    def pid(self) -> int:
        return self.popen.pid

    def signal_group(self, signum: int) -> bool:
        """`signum` to its process group; False when it was reaped already (its ids may be another's by now)."""
        with self.lock:
            if self.reaped:
                return False
            try:
                os.killpg(self.pid, signum)
            except ProcessLookupError:  # a terminal's process between its start and its setsid
                os.kill(self.pid, signum)
            return True

    def reap(self) -> int:
        with self.lock:
            _, status, _ = os.wait4(self.pid, 0)
            self.reaped = True
            self.popen.returncode = os.waitstatus_to_exitcode(status)  # so subprocess never waits for it again
            return status


class Launcher:
    """Starts processes from one thread that lives as long as the agent: a child's parent-death signal fires when
    the thread that forked it ends, and the agent's request threads end with their request."""

    def __init__(self):
        self.jobs: queue.Queue = queue.Queue()
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()

    def call(self, function: Callable[[], object]):
        with self.lock:
            if self.thread is None:
                thread = threading.Thread(target=self.serve, name="launcher", daemon=True)
                thread.start()  # may fail (the pids cap): the next call tries again
                self.thread = thread
        done: queue.Queue = queue.Queue(maxsize=1)
        self.jobs.put((function, done))
        succeeded, value = done.get()
        if not succeeded:
            raise value
        return value

    def serve(self):
        while True:
            function, done = self.jobs.get()
            try:
                done.put((True, function()))
            except BaseException as error:
                done.put((False, error))


LAUNCHER = Launcher()


def wrapped(argv: list[str], tty: bool) -> list[str]:
    """`argv` behind the wrappers that set what a child must have from its first instruction, each exec'ing the
    next (subprocess's preexec_fn is unsafe in a threaded program): a parent-death signal, the OOM score, and for a
    terminal a new session whose controlling terminal is its stdin."""
    command = [SETPRIV, "--pdeathsig", "KILL", CHOOM, "-n", OOM_SCORE_ADJ, "--", *argv]
    return [SETSID, "--ctty", *command] if tty else command


def start(argv: list[str], env: dict[str, str], cwd: str, stdin_pipe: bool,
          size: tuple[int, int] | None = None) -> Run:
    """Start `argv` (argv[0] a resolved executable). With `size` (cols, rows) on a new terminal: its stdin, stdout
    and stderr; otherwise stdout and stderr are pipes, stdin a pipe or /dev/null. OSError when it cannot start."""
    return LAUNCHER.call(lambda: start_now(argv, env, cwd, stdin_pipe, size))


def start_now(argv, env, cwd, stdin_pipe, size) -> Run:
    if size is not None:
        master, terminal = os.openpty()
        set_size(terminal, *size)
        ends = {"stdin": terminal, "stdout": terminal, "stderr": terminal}
        outputs, stdin_fd, theirs = {master: "stdout"}, master, [terminal]
    else:
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        in_read, stdin_fd = os.pipe() if stdin_pipe else (None, None)
        ends = {"stdin": subprocess.DEVNULL if in_read is None else in_read, "stdout": out_write,
                "stderr": err_write}
        outputs, theirs = {out_read: "stdout", err_read: "stderr"}, [out_write, err_write]
        theirs += [in_read] if in_read is not None else []
    ours = [*outputs] + ([stdin_fd] if stdin_fd is not None and stdin_fd not in outputs else [])
    try:
        popen = subprocess.Popen(wrapped(argv, size is not None), env=env, cwd=cwd, close_fds=True,
                                 start_new_session=size is None, **ends)
    except BaseException:
        for fd in ours + theirs:
            os.close(fd)
        raise
    for fd in theirs:
        os.close(fd)
    for fd in ours:
        os.set_blocking(fd, False)
    return Run(popen, os.pidfd_open(popen.pid), outputs, stdin_fd, master if size is not None else None)


def set_size(fd: int, cols: int, rows: int) -> None:
    """The terminal's size; the kernel sends SIGWINCH to its foreground process group when it changes."""
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def follow(run: Run, sink: Callable[[str, bytes], None], deadline: float | None) -> Ending:
    """Drain the process's output into `sink(stream, data)` until it ended (and its pipes closed, or
    LINGER_SECONDS passed); past `deadline` (monotonic) kill it and all it started. Closes its fds."""
    selector = selectors.DefaultSelector()
    for fd, stream in run.outputs.items():
        selector.register(fd, selectors.EVENT_READ, stream)
    selector.register(run.pidfd, selectors.EVENT_READ, None)
    status, timed_out, linger_until = None, False, None
    try:
        while status is None or (selector.get_map().keys() - {run.pidfd} and time.monotonic() < linger_until):
            for key, _ in selector.select(wait_seconds(status, deadline, linger_until)):
                if key.data is None:
                    status = run.reap()
                    selector.unregister(run.pidfd)
                    linger_until = time.monotonic() + LINGER_SECONDS
                elif not drain(key.fd, key.data, sink):
                    selector.unregister(key.fd)
            if status is None and deadline is not None and time.monotonic() >= deadline:
                kill_family(run.pid)  # not reaped yet: its pid and session id are still its own
                timed_out, deadline = True, None
    finally:
        selector.close()
        close(run)
    return ending(status, timed_out, run.started)


def wait_seconds(status, deadline, linger_until) -> float | None:
    now = time.monotonic()
    if status is not None:
        return max(linger_until - now, 0)
    return None if deadline is None else max(deadline - now, 0)


def drain(fd: int, stream: str, sink: Callable[[str, bytes], None]) -> bool:
    """Read what `fd` has into the sink; False at its end (a terminal's master says EIO once no one holds it)."""
    try:
        data = os.read(fd, READ_BYTES)
    except BlockingIOError:
        return True
    except OSError as error:
        if error.errno == errno.EIO:
            return False
        raise
    if data:
        sink(stream, data)
    return bool(data)


def close(run: Run) -> None:
    """Close the process's fds (once: a second call finds none)."""
    with run.io_lock:
        fds = [run.pidfd, *run.outputs] + ([run.stdin_fd] if run.stdin_fd not in (None, run.master) else [])
        for fd in fds:
            if fd is not None:
                os.close(fd)
        run.pidfd, run.outputs, run.stdin_fd, run.master = None, {}, None, None


def abandon(run: Run) -> None:
    """End a process nobody will follow (no thread could start to): kill it and all it started, reap it, close
    its fds."""
    with run.lock:
        reaped = run.reaped
    if not reaped:
        kill_family(run.pid)  # not reaped yet: its pid and session id are still its own
        run.reap()
    close(run)


def ending(status: int, timed_out: bool, started: float) -> Ending:
    code = os.waitstatus_to_exitcode(status)
    duration_ms = round((time.monotonic() - started) * 1000)
    if code < 0:
        return Ending(128 - code, signal_name(-code), timed_out, duration_ms)
    return Ending(code, None, timed_out, duration_ms)


def signal_name(number: int) -> str:
    """A signal's name without "SIG" ("KILL"); a real-time one as "RTMIN+n" (Python names only its first and
    last); any other the number itself."""
    try:
        return signal.Signals(number).name.removeprefix("SIG")
    except ValueError:
        if signal.SIGRTMIN < number < signal.SIGRTMAX:
            return f"RTMIN+{number - signal.SIGRTMIN}"
        return str(number)


class InputClosed(Exception):
    """The process's stdin is gone: it ended, or closed its end."""


def write_input(run: Run, data: bytes, seconds: float) -> int:
    """Write `data` to the process's stdin; the bytes written when it is done or `seconds` passed (a process that
    does not read fills the pipe, and the caller must not wait on it forever)."""
    deadline = time.monotonic() + seconds
    written = 0
    with run.io_lock:
        if run.stdin_fd is None:
            raise InputClosed()
        while written < len(data):
            try:
                written += os.write(run.stdin_fd, data[written:])
            except BlockingIOError:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([], [run.stdin_fd], [], left)[1]:
                    break
            except OSError as error:
                if error.errno in (errno.EPIPE, errno.EIO):  # no reader left (EIO: a terminal nobody holds)
                    raise InputClosed() from None
                raise
    return written


def resize(run: Run, cols: int, rows: int) -> bool:
    """Set the terminal's size; False once the process's fds are closed."""
    with run.io_lock:
        if run.master is None:
            return False
        set_size(run.master, cols, rows)
        return True
