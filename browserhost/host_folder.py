"""A host's own folder (<BROWSER_HOST_DIR>/<host name>/) belongs to one running host at a time.

A host holds an exclusive `flock` on the folder's `host.lock` for as long as its process lives (the kernel
lets go of it however the process ends, `kill -9` included), and writes its pid there. A second host started
for the same folder (two `make run` stacks of one checkout, both named `local`) finds the lock held and
refuses to start: it never sweeps what it would take for a previous run's leftovers, which are the running
host's sessions.
"""
import fcntl
import os
from pathlib import Path

LOCK_FILE = "host.lock"


class FolderInUse(RuntimeError):
    """Another running host holds the folder; `pid` is its process id as it wrote it (None if unreadable)."""

    def __init__(self, folder, pid):
        super().__init__(f"browser host folder {folder} is in use by the host with pid {pid}")
        self.folder, self.pid = folder, pid


def hold(folder):
    """Take `folder` (made if missing) for this process: the open descriptor holding its lock, to keep open for the
    process's life; FolderInUse when another process holds it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    # Not inherited by the processes a host starts (Python's descriptors are close-on-exec): a browser that
    # outlives its host must not keep its folder taken.
    descriptor = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        text = os.pread(descriptor, 32, 0).decode(errors="replace").strip()
        os.close(descriptor)
        raise FolderInUse(folder, int(text) if text.isdigit() else None) from None
    os.ftruncate(descriptor, 0)
    os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)
    return descriptor
