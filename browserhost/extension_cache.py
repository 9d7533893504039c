"""Extension archives by the SHA-256 of their content: fetched from the app's internal API once (GET
lantern_wire.reports.EXTENSIONS/<sha256>, streamed to disk and checked against its hash), then kept in this host's
folder up to `max_bytes`, the least recently used going first. A create request names its extensions by hash
instead of carrying each archive (up to 100 MiB) in its body.
"""
import collections
import hashlib
import logging
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

from browserhost.uplink import AppUnreachable
from lantern_wire.control import SHA256
from lantern_wire.reports import EXTENSIONS

logger = logging.getLogger(__name__)
# The largest archive the app takes (app/extensions: an upload's limit).
MAX_ARCHIVE_BYTES = 100 * 1024 * 1024
# How long a fetch may wait for the app (no answer, a 5xx) at most: a start gives it its time left.
FETCH_PATIENCE_SECONDS = 20.0


class ArchiveMismatch(Exception):
    """What the app sent is not the archive of that hash (cut short, or another file): nothing is kept."""


class _Hashing:
    """A binary file that hashes what is written to it."""

    def __init__(self, file):
        self.file, self.sha256 = file, hashlib.sha256()

    def write(self, data):
        self.sha256.update(data)
        return self.file.write(data)


class ExtensionCache:
    def __init__(self, folder, client, max_bytes):
        self.folder, self.client, self.max_bytes = Path(folder), client, max_bytes
        self.folder.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._fetching = {}  # sha256 -> [lock, users]: one fetch per hash at a time, gone once no start asks
        self._sizes = collections.OrderedDict()  # sha256 -> bytes, least recently used first
        for path in sorted(self.folder.iterdir(), key=lambda path: path.lstat().st_mtime):
            if len(path.name) == 64 and path.is_file() and not path.is_symlink():  # a previous run's, checked
                self._sizes[path.name] = path.stat().st_size
            elif path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)  # nothing of the cache's: it would stop the host's start at every start
            else:
                path.unlink()  # a fetch a crash cut short
        self._evict(keep=None)

    def open(self, sha256, patience=FETCH_PATIENCE_SECONDS):
        """The archive of that hash, open for reading (an eviction meanwhile does not take it away); fetched
        first when this host does not have it, all within `patience` seconds (a start's time left). AppUnreachable
        (also when another start's fetch of it takes past that), Refused (not an extension of a session this host
        was asked to start), ArchiveMismatch."""
        if not SHA256.fullmatch(sha256):
            raise ValueError(f"{sha256!r} is not a SHA-256 in hex")
        deadline = time.monotonic() + patience
        with self._lock:
            fetching = self._fetching.setdefault(sha256, [threading.Lock(), 0])
            fetching[1] += 1
        try:
            if not fetching[0].acquire(timeout=max(deadline - time.monotonic(), 0.0)):
                raise AppUnreachable(f"extension {sha256[:12]}… is being fetched for another start, past this one's "
                                     "deadline")
            try:
                with self._lock:
                    if sha256 in self._sizes:
                        self._sizes.move_to_end(sha256)
                        return open(self.folder / sha256, "rb")
                size = self._fetch(sha256, max(deadline - time.monotonic(), 0.0))
                with self._lock:  # kept, opened and room made at once: no other start's eviction comes between
                    self._sizes[sha256] = size
                    archive = open(self.folder / sha256, "rb")
                    self._evict(keep=sha256)
                    return archive
            finally:
                fetching[0].release()
        finally:
            with self._lock:
                fetching[1] -= 1
                if not fetching[1]:
                    self._fetching.pop(sha256, None)

    def _fetch(self, sha256, patience):
        """The archive into the cache's folder, checked against its hash; its size (the caller keeps it)."""
        descriptor, temporary = tempfile.mkstemp(dir=self.folder, suffix=".part")
        try:
            with os.fdopen(descriptor, "wb") as out:
                hashing = _Hashing(out)
                size = self.client.download(f"{EXTENSIONS}/{sha256}", hashing, patience=patience,
                                            limit=MAX_ARCHIVE_BYTES)
            if hashing.sha256.hexdigest() != sha256:
                raise ArchiveMismatch(f"the app sent {size} bytes for extension {sha256[:12]}…, not its archive")
            os.replace(temporary, self.folder / sha256)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        logger.info("extension archive %s fetched from the app (%s bytes)", sha256[:12], size)
        return size

    def _evict(self, keep):
        """Remove the least recently used archives until the rest fit (never `keep`, just asked for)."""
        total = sum(self._sizes.values())
        for sha256 in list(self._sizes):
            if total <= self.max_bytes:
                break
            if sha256 == keep:
                continue
            total -= self._sizes.pop(sha256)
            (self.folder / sha256).unlink(missing_ok=True)
