"""Reading what a session's processes write, within bounds: the host's memory, disk and threads are not the session's
to fill or hold (#36: a process of the session could take another's pipe and write into it without end).

    out = communicate(process, stdin, timeout, limit=OUTPUT_BYTES)  # a command's stdout, Display.run's
    pump = LogPump(log_path, max_bytes).start(read_end)             # a pipe to a log file of a bounded size
    tail(log_path)                                                  # a log file's last lines, read as much
"""
import os
import select
import selectors
import subprocess
import threading
import time

CHUNK = 64 * 1024
# What is kept of a command's stderr (its last bytes: the error is at the end).
ERROR_BYTES = 4096
# How long a process killed at its deadline may take to be reaped (it can be stuck in the kernel).
REAP_SECONDS = 5


def communicate(process, stdin, timeout, *, limit):
    """(stdout, stderr's last ERROR_BYTES) of a subprocess.Popen with piped stdout and stderr (and stdin when
    `stdin`, bytes, is given), read until both end and the process exits, within `timeout` seconds:
    subprocess.TimeoutExpired past them, SubprocessError when stdout passes `limit` bytes. Either way the process is
    killed and the host's ends of its pipes closed, so that nothing writing into them, or holding them open, keeps
    the host's memory or this thread."""
    deadline = time.monotonic() + timeout
    out, err, pending = bytearray(), bytearray(), memoryview(stdin or b"")
    try:
        with selectors.DefaultSelector() as selector:  # not select(): a busy host's descriptors pass 1023
            for pipe, events in ((process.stdout, selectors.EVENT_READ), (process.stderr, selectors.EVENT_READ),
                                 (process.stdin, selectors.EVENT_WRITE)):
                if pipe is not None:
                    selector.register(pipe, events)
            if process.stdin is not None and not pending:
                _close_input(selector, process)
            while selector.get_map():
                ready = selector.select(deadline - time.monotonic())
                if not ready:
                    raise subprocess.TimeoutExpired(process.args, timeout)
                for key, _ in ready:
                    if key.fileobj is process.stdin:
                        try:
                            # A pipe said writable takes PIPE_BUF bytes without blocking.
                            written = os.write(key.fd, pending[:select.PIPE_BUF])
                        except BrokenPipeError:
                            written = len(pending)  # it reads no more of it: what it wrote says why
                        pending = pending[written:]
                        if not pending:
                            _close_input(selector, process)
                        continue
                    chunk = os.read(key.fd, CHUNK)
                    if not chunk:
                        selector.unregister(key.fileobj)
                    elif key.fileobj is process.stdout:
                        out += chunk
                        if len(out) > limit:
                            raise subprocess.SubprocessError(f"{process.args[0]} wrote more than {limit} bytes")
                    else:
                        err = (err + chunk)[-ERROR_BYTES:]
        process.wait(timeout=max(deadline - time.monotonic(), 0))
    except BaseException:
        process.kill()
        raise
    finally:
        for pipe in (process.stdin, process.stdout, process.stderr):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass
        if process.returncode is None:
            try:
                process.wait(timeout=REAP_SECONDS)
            except subprocess.TimeoutExpired:
                pass  # stuck: left to its sandbox's end, not this thread
    return bytes(out), bytes(err)


def _close_input(selector, process):
    selector.unregister(process.stdin)
    try:
        process.stdin.close()
    except OSError:
        pass


class LogPump:
    """Copies what comes through a pipe (a process's stdout and stderr) into a log file, appending, on a thread of
    its own, at most `max_bytes` of it: the rest is read (the writer must not block) and dropped. The log is the
    host's file: the process is given only the pipe's other end, never the file."""

    def __init__(self, path, max_bytes):
        self.path, self.max_bytes = path, max_bytes
        self.written = 0
        self._thread = None

    def start(self, read_end):
        """Read `read_end` (an fd this pump closes) until every writer has closed it."""
        self._thread = threading.Thread(target=self._run, args=(read_end,), name=f"log-pump {self.path}",
                                        daemon=True)
        self._thread.start()
        return self

    def wait(self, timeout):
        """True once the pipe has ended and all of it is in the file (or dropped)."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self, read_end):
        try:
            with open(read_end, "rb", buffering=0, closefd=True) as pipe, open(self.path, "ab") as log:
                while chunk := pipe.read(CHUNK):
                    room = self.max_bytes - self.written
                    if room > 0:
                        log.write(chunk[:room])
                        log.flush()  # read as it comes (capture's LogTail follows the file)
                        self.written += min(len(chunk), room)
        except OSError:
            pass


def pipe_to_log(path, max_bytes):
    """(the write end for a process to start with, the LogPump that reads the other end into `path`): the caller
    closes the write end once the process has it."""
    read_end, write_end = os.pipe()
    return write_end, LogPump(path, max_bytes).start(read_end)


def tail(path, chars):
    """The last `chars` characters (about) of a log file, reading no more of it than that."""
    try:
        with open(path, "rb") as log:
            log.seek(max(log.seek(0, os.SEEK_END) - chars * 4, 0))  # a character takes at most 4 bytes of UTF-8
            return log.read().decode(errors="replace")[-chars:]
    except OSError:
        return ""
