"""A host's own folder (<BROWSER_HOST_DIR>/<host name>/) belongs to one running host at a time, and so does its
credential.

A host holds an exclusive `flock` on the folder's `host.lock` for as long as its process lives (the kernel
lets go of it however the process ends, `kill -9` included), and writes its pid there. A second host started
for the same folder (two `make run` stacks of one checkout, both named `local`) finds the lock held and
refuses to start: it never sweeps what it would take for a previous run's leftovers, which are the running
host's sessions.

Its credential it holds the same way, before it registers (`hold_credential`: a lock file in BROWSER_HOST_DIR
named by the credential's hash, as the host's name is told only at registration): the app ends every session
of a host that registers, so a second host with the same credential (a unit started twice, a run by hand
beside systemd's) must refuse before it registers, not after.
"""
import fcntl
import os
from pathlib import Path

from lantern_wire.hosts import credential_hash

LOCK_FILE = "host.lock"


class FolderInUse(RuntimeError):
    """Another running host holds the folder (or the credential); `pid` is its process id as it wrote it (None if
    unreadable), `lock` the lock file."""

    def __init__(self, folder, pid, lock):
        super().__init__(f"browser host folder {folder} is in use by the host with pid {pid}")
        self.folder, self.pid, self.lock = folder, pid, lock


def hold(folder, lock_file=LOCK_FILE):
    """Take `folder` (made if missing) for this process: the open descriptor holding its lock, to keep open for the
    process's life; FolderInUse when another process holds it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    # Not inherited by the processes a host starts (Python's descriptors are close-on-exec): a browser that
    # outlives its host must not keep its folder taken.
    descriptor = os.open(folder / lock_file, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        text = os.pread(descriptor, 32, 0).decode(errors="replace").strip()
        os.close(descriptor)
        raise FolderInUse(folder, int(text) if text.isdigit() else None, folder / lock_file) from None
    os.ftruncate(descriptor, 0)
    os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)
    return descriptor


def credential_lock(credential):
    """The name of a host credential's lock file: a prefix of the hash the app keeps of it, never the credential."""
    return f"credential-{credential_hash(credential)[:16]}.lock"


def hold_credential(root, credential):
    """Take `credential` for this process, in `root` (BROWSER_HOST_DIR): as `hold`."""
    return hold(root, credential_lock(credential))
