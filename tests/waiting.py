"""Waiting for what happens elsewhere (another process, a browser, a thread) without a fixed sleep."""
import time


def eventually(check, timeout=10.0, interval=0.01):
    """The first truthy answer of `check()` within `timeout` seconds, else its last answer: tests assert on what
    this returns, so a failure shows what was seen last."""
    deadline = time.monotonic() + timeout
    while True:
        answer = check()
        if answer or time.monotonic() >= deadline:
            return answer
        time.sleep(interval)
