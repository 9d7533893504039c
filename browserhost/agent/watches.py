"""The agent's file watches (/fs/watch...): inotify on a path (and, when recursive, on every folder under it, new
ones as they appear), its events kept in a journal of BUFFER_EVENTS per watch that any number of readers follow as
server-sent events, resumable with Last-Event-ID, an OVERFLOW event telling a reader what it missed.

Events as Go's fsnotify (Kernel's) names them: IN_CREATE and IN_MOVED_TO are CREATE, IN_MODIFY is WRITE,
IN_DELETE is DELETE, IN_MOVED_FROM is RENAME (the old path; the new one is a CREATE where it is watched)."""
import ctypes
import errno
import logging
import os
import selectors
import struct
import threading
import uuid

from .http import AgentError, Request, check_path, empty, json_answer, sse
from .output import Journal

log = logging.getLogger("agent")

MAX_WATCHES = 16
BUFFER_EVENTS = 1024
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
IN_ISDIR = 0x40000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC
EVENTS = IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF
EVENT_HEADER = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len (of the name that follows)


class Inotify:
    """An inotify instance through libc (the agent has only the standard library)."""

    def __init__(self):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if self.fd < 0:
            raise_errno("inotify_init1")

    def add(self, path: str, mask: int) -> int:
        wd = self.libc.inotify_add_watch(self.fd, os.fsencode(path), ctypes.c_uint32(mask))
        if wd < 0:
            raise_errno("inotify_add_watch", path)
        return wd

    def remove(self, wd: int) -> None:
        self.libc.inotify_rm_watch(self.fd, wd)  # an error means the kernel removed it already

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


class Watch:
    """One watch: its inotify, the folder of each watch descriptor, its journal, and a thread turning inotify's
    events into the journal's until the watch is stopped."""

    def __init__(self, path: str, recursive: bool):
        self.id = str(uuid.uuid4())
        self.path, self.recursive = path, recursive
        self.journal = Journal(BUFFER_EVENTS)
        self.inotify = Inotify()
        self.folders: dict[int, str] = {}
        self.announced: set[str] = set()  # entries of new folders told by a scan, which inotify may tell again
        self.root_is_dir = os.path.isdir(path)
        self.wake_read, self.wake_write = os.pipe2(os.O_CLOEXEC)
        self.closed = False
        self.close_lock = threading.Lock()  # a stop never writes to a wake pipe closed (its fd maybe reused)
        try:
            self.folders[self.inotify.add(path, EVENTS)] = path
            if recursive and self.root_is_dir:
                self.add_tree(path, announce=False)
        except BaseException:
            self.close()
            raise
        threading.Thread(target=self.serve, name=f"watch {self.id}", daemon=True).start()

    def add_tree(self, top: str, announce: bool) -> None:
        """Watch every folder under `top` (not through links); with `announce`, a CREATE for each entry found
        (made in a new folder before its watch was in place, so inotify never told)."""
        for folder, folders, files in os.walk(top):
            if folder != top:
                try:
                    self.folders[self.inotify.add(folder, EVENTS | IN_ONLYDIR | IN_DONT_FOLLOW)] = folder
                except OSError as error:
                    if error.errno == errno.ENOSPC:
                        raise
                    folders[:] = []  # gone or closed to us meanwhile: nothing under it to watch
                    continue
            if announce:
                for name in folders + files:
                    self.record("CREATE", os.path.join(folder, name), name in folders)
                    self.announced.add(os.path.join(folder, name))

    def serve(self) -> None:
        selector = selectors.DefaultSelector()
        selector.register(self.inotify.fd, selectors.EVENT_READ)
        selector.register(self.wake_read, selectors.EVENT_READ)
        try:
            while not any(key.fd == self.wake_read for key, _ in selector.select()):
                batch = self.inotify.read()
                while batch:
                    for wd, mask, name in batch:
                        self.handle(wd, mask, name)
                    batch = self.inotify.read()
                # inotify's queue was read empty: it held every event made before the scans that announced these
                self.announced.clear()
        except Exception:
            log.exception("watch %s failed", self.path)
        finally:
            selector.close()
            self.close()
            self.journal.close()

    def handle(self, wd: int, mask: int, name: str) -> None:
        if mask & IN_Q_OVERFLOW:
            self.journal.append({"type": "OVERFLOW", "path": self.path, "dropped": None,
                                 "message": "the kernel's queue of this watch's events overflowed"})
            return
        folder = self.folders.get(wd)
        if mask & IN_IGNORED:
            self.folders.pop(wd, None)
            return
        if folder is None:
            return
        path = os.path.join(folder, name) if name else folder
        if mask & IN_CREATE and path in self.announced:
            self.announced.discard(path)  # made after its folder's watch, before the scan that announced it
            return
        if mask & (IN_DELETE | IN_MOVED_FROM):
            self.announced.discard(path)  # a CREATE after this one is new
        is_dir = bool(mask & IN_ISDIR)
        if mask & (IN_DELETE_SELF | IN_MOVE_SELF):
            if folder == self.path:  # a folder under it is told by its parent's event
                self.record("DELETE" if mask & IN_DELETE_SELF else "RENAME", path, self.root_is_dir)
            return
        if mask & IN_MOVED_FROM and is_dir:
            self.forget_tree(path)  # its watches would report it under its old path
        kind = ("CREATE" if mask & (IN_CREATE | IN_MOVED_TO) else "WRITE" if mask & IN_MODIFY
                else "DELETE" if mask & IN_DELETE else "RENAME" if mask & IN_MOVED_FROM else None)
        if kind:
            self.record(kind, path, is_dir)
        if mask & (IN_CREATE | IN_MOVED_TO) and is_dir and self.recursive:
            self.watch_new(path, announce=bool(mask & IN_CREATE))

    def record(self, kind: str, path: str, is_dir: bool) -> None:
        event = {"type": kind, "path": path, "name": os.path.basename(path), "is_dir": is_dir}
        # A file written in many writes is one WRITE until a reader takes it: the buffer keeps other events.
        self.journal.append(event, merges=(lambda last: last == event) if kind == "WRITE" else None)

    def watch_new(self, path: str, announce: bool) -> None:
        try:
            self.folders[self.inotify.add(path, EVENTS | IN_ONLYDIR | IN_DONT_FOLLOW)] = path
            self.add_tree(path, announce)
        except OSError as error:
            log.info("watch %s: %s not watched (%s)", self.path, path, error)

    def forget_tree(self, top: str) -> None:
        for wd, folder in list(self.folders.items()):
            if folder == top or folder.startswith(top + "/"):
                self.inotify.remove(wd)
                del self.folders[wd]

    def stop(self) -> None:
        with self.close_lock:
            if not self.closed:
                os.write(self.wake_write, b"x")

    def close(self) -> None:
        with self.close_lock:
            if not self.closed:
                self.closed = True
                for fd in (self.wake_read, self.wake_write, self.inotify.fd):
                    os.close(fd)


class Watches:
    """The session's watches by id, at most MAX_WATCHES."""

    def __init__(self):
        self.watches: dict[str, Watch] = {}
        self.lock = threading.Lock()

    def start(self, path: str, recursive: bool) -> Watch:
        with self.lock:
            if len(self.watches) >= MAX_WATCHES:
                raise AgentError(400, "too_many_watches", f"a session has at most {MAX_WATCHES} watches: stop one")
            try:
                watch = Watch(path, recursive)
            except OSError as error:
                raise refusal(error, path) from None
            self.watches[watch.id] = watch
            return watch

    def get(self, watch_id: str) -> Watch:
        with self.lock:
            watch = self.watches.get(watch_id)
        if watch is None:
            raise AgentError(404, "watch_not_found", f"no watch {watch_id[:64]}")
        return watch

    def stop(self, watch_id: str) -> None:
        with self.lock:
            watch = self.watches.pop(watch_id, None)
        if watch is None:
            raise AgentError(404, "watch_not_found", f"no watch {watch_id[:64]}")
        watch.stop()


def refusal(error: OSError, path: str) -> AgentError:
    if error.errno == errno.ENOENT:
        return AgentError(404, "not_found", f"{path}: no such file or directory")
    if error.errno == errno.ENOSPC:
        return AgentError(400, "too_many_watched_folders", f"{path}: the session cannot watch more folders "
                          "(inotify's limit of watches is reached)")
    if error.errno == errno.EMFILE:
        return AgentError(400, "too_many_watches", "the session cannot open more inotify instances")
    return AgentError(400, "cannot_watch", f"{path}: {os.strerror(error.errno)}")


WATCHES = Watches()


def start_watch(request: Request):
    body = request.json()
    path = check_path(body.get("path"), "path")
    recursive = body.get("recursive")
    if recursive is not None and not isinstance(recursive, bool):
        raise AgentError(400, "invalid_recursive", "recursive must be a boolean")
    if not os.path.exists(path):
        raise AgentError(404, "not_found", f"{path}: no such file or directory")
    return json_answer(200, {"watch_id": WATCHES.start(path, bool(recursive)).id})


def watch_events(request: Request):
    watch = WATCHES.get(request.params["watch_id"])
    after = watch.journal.check_key(request.headers.get("Last-Event-ID"))
    return sse(watch.journal.follow(after, dict, lambda dropped: {"type": "OVERFLOW", "path": watch.path,
                                                                   "dropped": dropped}))


def stop_watch(request: Request):
    WATCHES.stop(request.params["watch_id"])
    return empty(204)


ROUTES = [
    ("POST", "/fs/watch", start_watch),
    ("GET", "/fs/watch/{watch_id}/events", watch_events),
    ("DELETE", "/fs/watch/{watch_id}", stop_watch),
]
