"""The agent's inotify layer (through libc with ctypes: the agent has only the standard library): the one instance
all its watches share, the thread reading it, the events parsed from the kernel's structs and handed to the watches
using each descriptor, and the count of kernel watches (folders) they hold. A module apart from watches.py (what a
watch makes of its events, its journal, the routes) because it is the kernel's interface and the limits all of a
session's watches share.

One inotify instance per agent. inotify's limits (fs.inotify.max_user_instances, 128 by default, and
max_user_watches) are counted per uid across user namespaces, and every session's agent and Chromium run as the
one sandbox user: all sessions of a host share them. With an instance per watch, 8 sessions of 16 watches took
every instance, Chromium's too; so the agent's watches share one instance, made with the first and closed with
the last, one thread reading it and handing each event to the watches using its descriptor. A session
then takes at most 3 instances (the agent's, and Chromium's 2: its browser and network processes) and at most
MAX_WATCHED_FOLDERS kernel watches besides Chromium's handful. The default max_user_watches is 1% of the host's
memory at some 1.25 KiB a watch, from 8192 to 1048576 (192530 on a host of 23 GiB): divided by 8192, the sessions
that can all watch their full MAX_WATCHED_FOLDERS at once (23 there; past that, a session's watch may be refused
400 too_many_watched_folders although it holds fewer). Operators running more sessions that watch big trees raise
`sysctl fs.inotify.max_user_watches` to sessions x 8192 + 1024, and past some 40 sessions
fs.inotify.max_user_instances to 3 a session and some to spare.
"""
import ctypes
import errno
import logging
import os
import selectors
import struct
import threading
from typing import Protocol

from .output import Journal

log = logging.getLogger("agent")

MAX_WATCHED_FOLDERS = 8192  # kernel watches of all the session's watches together
READ_BYTES = 64 * 1024

IN_MODIFY = 0x00000002
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_MASK_ADD = 0x20000000  # a folder another watch watches keeps the events it asked for
IN_ISDIR = 0x40000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC
EVENTS = IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF
EVENT_HEADER = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len (of the name that follows)


class Watch(Protocol):
    """What the inotify layer uses of a watch (watches.Watch): it hands it the events of its descriptors."""

    path: str
    journal: Journal
    held: list | None
    announced: set[str]

    def hold(self, event: tuple[int, int, str]) -> bool: ...

    def take_held(self) -> list: ...

    def handle(self, wd: int, mask: int, name: str) -> None: ...


class Inotify:
    """The agent's one inotify instance (through libc: the agent has only the standard library), shared by all its
    watches. A folder has one kernel watch however many watches cover it (inotify gives a path added again its
    descriptor): it is counted once, kept while a watch uses it and removed when the last one lets it go; at most
    MAX_WATCHED_FOLDERS of them. One thread reads the events and hands each to the watches using its descriptor;
    a watch still being built gets them once it is."""

    def __init__(self):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if self.fd < 0:
            raise_errno("inotify_init1")
        self.lock = threading.Lock()
        self.users: dict[int, set[Watch]] = {}  # kernel watch descriptor -> the watches using it
        self.watches: set[Watch] = set()
        self.built: list[Watch] = []  # watches whose held events the reader has yet to hand over
        self.ending = self.closed = False
        try:
            self.wake_read, self.wake_write = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
        except BaseException:
            os.close(self.fd)
            raise
        try:
            threading.Thread(target=self.serve, name="inotify", daemon=True).start()
        except RuntimeError:  # no thread left under the session's pids cap
            self.close_fds()
            raise OSError(errno.EAGAIN, "no thread left to read inotify's events") from None

    def attach(self, watch: "Watch") -> None:
        with self.lock:
            if self.closed or self.ending:
                raise OSError(errno.EBADF, "the agent's inotify is closed")
            self.watches.add(watch)

    def add(self, watch: "Watch", path: str, mask: int) -> int:
        """The kernel watch of `path` for `watch` (one another watch made already, its events asked for too);
        OSError ENOSPC past MAX_WATCHED_FOLDERS (as inotify's own limit says it)."""
        with self.lock:
            if self.closed or watch not in self.watches:
                raise OSError(errno.ECANCELED, "the watch was stopped", path)
            wd = self.libc.inotify_add_watch(self.fd, os.fsencode(path), ctypes.c_uint32(mask | IN_MASK_ADD))
            if wd < 0:
                raise_errno("inotify_add_watch", path)
            if wd not in self.users:
                if len(self.users) >= MAX_WATCHED_FOLDERS:
                    self.libc.inotify_rm_watch(self.fd, wd)
                    raise OSError(errno.ENOSPC, f"the session watches {MAX_WATCHED_FOLDERS} folders already", path)
                self.users[wd] = set()
            self.users[wd].add(watch)
            return wd

    def release(self, watch: "Watch", wd: int) -> None:
        with self.lock:
            self.let_go(watch, wd)

    def let_go(self, watch: "Watch", wd: int) -> None:
        """(Under the lock.) `watch` no longer uses `wd`; the kernel watch goes with its last user."""
        users = self.users.get(wd)
        if users is None or watch not in users:
            return
        users.discard(watch)
        if not users:
            del self.users[wd]
            if not self.closed:
                self.libc.inotify_rm_watch(self.fd, wd)  # an error means the kernel removed it already

    def detach(self, watch: "Watch") -> None:
        """Hand `watch` nothing more and let go of its kernel watches."""
        with self.lock:
            self.watches.discard(watch)
            for wd in [wd for wd, users in self.users.items() if watch in users]:
                self.let_go(watch, wd)

    def hand_over(self, watch: "Watch") -> None:
        """`watch` is built: the reader tells it the events held meanwhile, then each as it comes."""
        with self.lock:
            self.built.append(watch)
            self.wake()

    def kernel_watches(self) -> int:
        with self.lock:
            return len(self.users)

    def close(self) -> None:
        """End the reader; it closes the instance, and the kernel removes the watches left with it."""
        with self.lock:
            self.ending = True
            self.wake()

    def wake(self) -> None:
        """(Under the lock.)"""
        if not self.closed:
            try:
                os.write(self.wake_write, b"x")
            except BlockingIOError:
                pass  # the pipe is full: the reader wakes already

    def serve(self) -> None:
        selector = selectors.DefaultSelector()
        selector.register(self.fd, selectors.EVENT_READ)
        selector.register(self.wake_read, selectors.EVENT_READ)
        try:
            while True:
                selector.select()
                while self.read_wake():
                    pass
                if self.ending:
                    return
                self.read_queue()
        except Exception:
            log.exception("the agent's inotify failed")
        finally:
            selector.close()
            with self.lock:
                left = list(self.watches)
                self.watches.clear()
                self.users.clear()
                self.closed = True
                self.close_fds()
            for watch in left:  # their streams end: nothing more can be told
                watch.journal.close()

    def read_wake(self) -> bool:
        try:
            return bool(os.read(self.wake_read, 512))
        except BlockingIOError:
            return False

    def close_fds(self) -> None:
        for fd in (self.fd, self.wake_read, self.wake_write):
            os.close(fd)

    def read_queue(self) -> None:
        while True:
            self.tell_held()
            batch = self.read()
            if not batch:
                break
            for wd, mask, name in batch:
                self.dispatch(wd, mask, name)
        # The queue was read empty: it held every event made before the scans that announced entries.
        with self.lock:
            serving = [watch for watch in self.watches if watch.held is None]
        for watch in serving:
            watch.announced.clear()

    def tell_held(self) -> None:
        with self.lock:
            built, self.built = self.built, []
            held = [(watch, watch.take_held()) for watch in built if watch in self.watches]
        for watch, events in held:
            for wd, mask, name in events:
                self.tell(watch, wd, mask, name)

    def dispatch(self, wd: int, mask: int, name: str) -> None:
        with self.lock:
            # The kernel's queue overflowed (wd -1): every watch may have lost events.
            targets = list(self.watches) if mask & IN_Q_OVERFLOW else list(self.users.get(wd, ()))
            if mask & IN_IGNORED:
                self.users.pop(wd, None)  # the kernel removed it: its folder is gone
            now = [watch for watch in targets if not watch.hold((wd, mask, name))]
        for watch in now:
            self.tell(watch, wd, mask, name)

    def tell(self, watch: "Watch", wd: int, mask: int, name: str) -> None:
        try:
            watch.handle(wd, mask, name)
        except Exception:  # that watch ends; the others go on
            log.exception("watch %s failed", watch.path)
            self.detach(watch)
            watch.journal.close()

    def read(self) -> list[tuple[int, int, str]]:
        """The events queued now: (wd, mask, name)."""
        try:
            data = os.read(self.fd, READ_BYTES)
        except BlockingIOError:
            return []
        events, offset = [], 0
        while offset < len(data):
            wd, mask, _, length = EVENT_HEADER.unpack_from(data, offset)
            offset += EVENT_HEADER.size
            name = os.fsdecode(data[offset:offset + length].rstrip(b"\0"))
            offset += length
            events.append((wd, mask, name))
        return events


def raise_errno(call: str, path: str | None = None):
    number = ctypes.get_errno()
    raise OSError(number, f"{call}: {os.strerror(number)}", path)
