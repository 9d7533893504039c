"""exec: a process run to its end, its output captured and answered as one JSON, trickled (a space every 10 s
while it runs, so a client's read timeout never fires and it never resends an exec that ran).

Output kept: EXEC_OUTPUT_BYTES per stream of one exec and EXEC_CAPTURE_BUDGET for all running execs together;
past either the rest is dropped and *_truncated set. The budget is given back once the answer is sent (or cut)."""
import base64
import logging
import threading

from . import running
from .http import Request, trickle
from .launch import Launch, read_launch
from .lifecycle import Counter, check_confined, deadline_of, follow_in_background, follow_to_end, start

EXEC_OUTPUT_BYTES = 8 * 1024 * 1024
EXEC_CAPTURE_BUDGET = 32 * 1024 * 1024
log = logging.getLogger("agent")


CAPTURE_BUDGET = Counter(EXEC_CAPTURE_BUDGET)


class Capture:
    """Up to EXEC_OUTPUT_BYTES of a stream, as far as the shared CAPTURE_BUDGET allows; what passes either is
    dropped and `truncated` set. `taken` is what it holds of the budget."""

    def __init__(self):
        self.data = bytearray()
        self.taken = 0
        self.truncated = False

    def add(self, chunk: bytes) -> None:
        granted = CAPTURE_BUDGET.take(min(len(chunk), EXEC_OUTPUT_BYTES - len(self.data)))
        self.taken += granted
        if granted < len(chunk):
            self.truncated = True
        self.data += chunk[:granted]


class Exec:
    """An exec'd process followed by a thread started with it, so it is drained, reaped and its slot given back
    even when its answer is never sent; `result()` waits for its answer. Its output's share of CAPTURE_BUDGET is
    given back once both the thread and the answer (sent, cut or never begun) are done with it."""

    def __init__(self, launch: Launch, run: running.Run):
        self.run = run
        self.captures = {"stdout": Capture(), "stderr": Capture()}
        self.answer: dict | None = None
        self.done = threading.Event()
        self.holders = {"follower", "answer"}
        self.lock = threading.Lock()
        deadline = deadline_of(launch, run)
        follow_in_background(run, lambda: self.follow(deadline), f"exec {run.pid}")

    def follow(self, deadline: float | None) -> None:
        try:
            ending = follow_to_end(self.run, lambda stream, data: self.captures[stream].add(data), deadline)
            self.answer = exec_answer(ending, self.captures) if ending else failed_answer("following it failed")
            for capture in self.captures.values():
                capture.data = bytearray()  # the answer holds it now, as base64; `taken` stays until sent
        except Exception as error:  # the answer must still come, whole
            log.exception("exec %d failed", self.run.pid)
            self.answer = failed_answer(str(error))
        finally:
            self.let_go("follower")
            self.done.set()

    def result(self) -> dict:
        self.done.wait()
        return self.answer

    def let_go(self, holder: str) -> None:
        with self.lock:
            if holder not in self.holders:
                return
            self.holders.discard(holder)
            last = not self.holders
        if last:
            CAPTURE_BUDGET.give_back(sum(capture.taken for capture in self.captures.values()))


def exec_answer(ending: running.Ending, captures: dict[str, Capture]) -> dict:
    answer = {"exit_code": None if ending.timed_out else ending.exit_code,
              "stdout_b64": base64.b64encode(captures["stdout"].data).decode(),
              "stderr_b64": base64.b64encode(captures["stderr"].data).decode(),
              "duration_ms": ending.duration_ms, "timed_out": ending.timed_out,
              "stdout_truncated": captures["stdout"].truncated, "stderr_truncated": captures["stderr"].truncated}
    if ending.signal:
        answer["signal"] = ending.signal
    return answer


def failed_answer(reason: str) -> dict:
    """exec's answer when the agent failed after its 200 went out: the error and exec's fields, all empty."""
    return {"code": "internal_error", "message": f"the session's agent failed while running the command: {reason}",
            "exit_code": None, "stdout_b64": "", "stderr_b64": "", "duration_ms": 0, "timed_out": False,
            "stdout_truncated": False, "stderr_truncated": False}


class Releasing:
    """An answer's chunks that call `release` when the server closes them (sent, cut, or never begun)."""

    def __init__(self, chunks, release):
        self.chunks = chunks
        self.release = release

    def __iter__(self):
        return iter(self.chunks)

    def close(self) -> None:
        try:
            close = getattr(self.chunks, "close", None)
            if close:
                close()
        finally:
            self.release()


def exec_process(request: Request):
    check_confined()
    launch = read_launch(request.json(), spawn=False)
    execution = Exec(launch, start(launch, stdin_pipe=False))
    answer = trickle(200, execution.result)
    answer.chunks = Releasing(answer.chunks, lambda: execution.let_go("answer"))
    return answer
