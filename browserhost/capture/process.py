"""What the host learns of Chromium's process besides CDP: how it ended (`exit_metadata`) and its log
file (`LogTail`).

`LogTail(path, sink).start()` follows Chromium's log file and hands its new lines to `sink` until
`stop()`.
"""
import logging
import os
import signal
import threading

log = logging.getLogger(__package__)  # the name these lines had before capture.py became a package


def exit_metadata(returncode):
    """How a process ended, as service_crashed's source.metadata: {"signal": "SIGKILL"} when a signal
    ended it (a negative returncode), else {"exit_code": "1"}."""
    if returncode is not None and returncode < 0:
        try:
            return {"signal": signal.Signals(-returncode).name}
        except ValueError:
            return {"signal": str(-returncode)}
    return {"exit_code": str(returncode)}


class LogTail:
    """Follows a growing text file from `offset` (its start by default): `sink(lines)` gets each batch
    of new complete lines, without their line ends, each at most `max_line` characters (a longer line
    comes in pieces), on the tail's thread. `stop()` reads what is left, a last unfinished line
    included. A file that shrinks (rewritten) is read again from its start; one that does not exist yet
    is waited for.

    At most `max_bytes` of the file are handed on (a page can make Chromium log without end, such as a
    GPU error per WebGL context): past them `sink` gets one line saying so, and from then on the file,
    which its writer appends to, is emptied at every read, so it takes no more of the disk either."""

    def __init__(self, path, sink, *, poll_seconds=0.1, offset=0, max_line=4096, max_bytes=None):
        self.path = path
        self.poll_seconds = poll_seconds
        self.max_line = max_line
        self.max_bytes = max_bytes
        self._sink = sink
        self._offset = offset
        self._handed_on = 0
        self._partial = b""
        self._stopping = threading.Event()
        self._thread = None

    def start(self):
        self._thread = threading.Thread(target=self._run, name=f"log-tail {self.path}", daemon=True)
        self._thread.start()
        return self

    def stop(self):
        """Read to the end, hand over the rest, end the thread. Idempotent."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self):
        while not self._stopping.wait(self.poll_seconds):
            self._read()
        self._read(final=True)

    def _read(self, final=False):
        if self.max_bytes is not None and self._handed_on >= self.max_bytes:
            self._empty()
            return
        try:
            with open(self.path, "rb") as file:
                size = file.seek(0, 2)
                if size < self._offset:  # rewritten from scratch
                    self._offset, self._partial = 0, b""
                file.seek(self._offset)
                chunk = file.read()
        except OSError:
            chunk = b""
        self._offset += len(chunk)
        if self.max_bytes is not None and self._handed_on + len(chunk) >= self.max_bytes:
            chunk, final = chunk[:self.max_bytes - self._handed_on], True
            self._handed_on = self.max_bytes
            lines = [*self._split(self._partial + chunk, final),
                     f"(the log passed {self.max_bytes} bytes: what follows is not kept)"]
            self._empty()
        else:
            self._handed_on += len(chunk)
            lines = self._split(self._partial + chunk, final)
        if lines:
            try:
                self._sink(lines)
            except Exception:
                log.exception("log tail sink failed for %s", self.path)

    def _empty(self):
        try:
            os.truncate(self.path, 0)
        except OSError:
            pass
        self._offset, self._partial = 0, b""

    def _split(self, data, final):
        *complete, self._partial = data.split(b"\n")
        limit = self.max_line * 4  # bytes: a UTF-8 character takes at most 4
        while len(self._partial) > limit:  # an endless line: pass it on in pieces
            complete.append(self._partial[:limit])
            self._partial = self._partial[limit:]
        if final and self._partial:
            complete.append(self._partial)
            self._partial = b""
        lines = []
        for raw in complete:
            text = raw.rstrip(b"\r").decode("utf-8", errors="replace")
            lines += [text[start:start + self.max_line] for start in range(0, len(text), self.max_line)] or [""]
        return lines
