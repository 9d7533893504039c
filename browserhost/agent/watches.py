"""The agent's file watches (/fs/watch...): inotify on a path (and, when recursive, on every folder under it, new
ones as they appear), its events kept in a journal of BUFFER_EVENTS per watch that any number of readers follow as
server-sent events, resumable with Last-Event-ID, an OVERFLOW event telling a reader what it missed.

Events as Go's fsnotify (Kernel's) names them: IN_CREATE and IN_MOVED_TO are CREATE, IN_MODIFY is WRITE,
IN_DELETE is DELETE, IN_MOVED_FROM is RENAME (the old path; the new one is a CREATE where it is watched).

When events were lost (a reader's point fell out of the journal, the kernel's queue overflowed, a new folder could
not be watched) the reader gets an overflow notice, an event the SDKs' models take: {"type": "WRITE", "path": the
folder, "name", "is_dir", "overflow": true, "dropped": N}, meaning "this folder changed in ways not listed: rescan
it" (N is 0 when the count is unknown: the kernel does not say how many it dropped).

A recursive watch watches a new folder before it tells its CREATE: a reader that saw the CREATE may use the folder
at once and be told what happens in it.

Limits: MAX_WATCHES watches and MAX_WATCHED_FOLDERS folders watched in all per session; /proc and /sys are not
watched (refused, and left out of a recursive watch's walk). inotify's own limits (fs.inotify.max_user_watches and
max_user_instances, 128 by default) are per uid, and every session's agent runs as the one sandbox user: all
sessions on a host share them, each watch taking one instance and a watch per folder. A journal holds at most
BUFFER_EVENTS events of a path of at most 4096 bytes: some 4.5 MiB per watch, 72 MiB for 16."""
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
MAX_WATCHED_FOLDERS = 8192  # inotify watches of all the session's watches together
BUFFER_EVENTS = 1024
UNWATCHABLE = ("/proc", "/sys")  # kernel files: inotify tells nothing of their changes, and /proc is every pid's
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


class FolderCount:
    """The folders watched by all the session's watches, at most MAX_WATCHED_FOLDERS."""

    def __init__(self):
        self.used = 0
        self.lock = threading.Lock()

    def take(self, path: str) -> None:
        """One more, or OSError ENOSPC (as inotify's own limit says it)."""
        with self.lock:
            if self.used >= MAX_WATCHED_FOLDERS:
                raise OSError(errno.ENOSPC, f"the session watches {MAX_WATCHED_FOLDERS} folders already", path)
            self.used += 1

    def give_back(self, count: int = 1) -> None:
        with self.lock:
            self.used -= count


FOLDERS = FolderCount()


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
            self.add_folder(path, EVENTS)
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
                    self.add_folder(folder, EVENTS | IN_ONLYDIR | IN_DONT_FOLLOW)
                except OSError as error:
                    if error.errno == errno.ENOSPC:
                        raise
                    folders[:] = []  # gone or closed to us meanwhile: nothing under it to watch
                    continue
            if announce:
                for name in folders + files:
                    self.record("CREATE", os.path.join(folder, name), name in folders)
                    self.announced.add(os.path.join(folder, name))
            folders[:] = [name for name in folders if not unwatchable(os.path.join(folder, name))]

    def add_folder(self, folder: str, mask: int) -> None:
        """An inotify watch on `folder`, counted in FOLDERS (once: inotify gives a folder watched twice, as a
        folder moved, its old descriptor)."""
        FOLDERS.take(folder)
        try:
            wd = self.inotify.add(folder, mask)
        except BaseException:
            FOLDERS.give_back()
            raise
        if wd in self.folders:
            FOLDERS.give_back()
        self.folders[wd] = folder

    def drop_folder(self, wd: int) -> None:
        if self.folders.pop(wd, None) is not None:
            FOLDERS.give_back()

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
        if mask & IN_Q_OVERFLOW:  # the kernel does not say how many it dropped
            self.journal.append(overflow_notice(self.path, self.root_is_dir, 0))
            return
        folder = self.folders.get(wd)
        if mask & IN_IGNORED:
            self.drop_folder(wd)
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
        new_folder = bool(mask & (IN_CREATE | IN_MOVED_TO)) and is_dir and self.recursive
        # Watched before its CREATE is told: a reader that saw it may write in it at once and be told.
        watched = new_folder and self.watch_new(path)
        if kind:
            self.record(kind, path, is_dir)
        if watched:
            self.watch_tree(path, announce=bool(mask & IN_CREATE))

    def record(self, kind: str, path: str, is_dir: bool) -> None:
        event = {"type": kind, "path": path, "name": os.path.basename(path), "is_dir": is_dir}
        # A file written in many writes is one WRITE until a reader takes it: the buffer keeps other events.
        self.journal.append(event, merges=(lambda last: last == event) if kind == "WRITE" else None)

    def watch_new(self, path: str) -> bool:
        """Watch a new folder; False (and an overflow notice) when it cannot be."""
        try:
            self.add_folder(path, EVENTS | IN_ONLYDIR | IN_DONT_FOLLOW)
            return True
        except OSError as error:
            self.not_watched(path, error)
            return False

    def watch_tree(self, path: str, announce: bool) -> None:
        try:
            self.add_tree(path, announce)
        except OSError as error:
            self.not_watched(path, error)

    def not_watched(self, path: str, error: OSError) -> None:
        """What happens in `path` (or in a folder under it) is not told: say so."""
        log.info("watch %s: %s not watched (%s)", self.path, path, error)
        self.journal.append(overflow_notice(path, True, 0))

    def forget_tree(self, top: str) -> None:
        for wd, folder in list(self.folders.items()):
            if folder == top or folder.startswith(top + "/"):
                self.inotify.remove(wd)
                self.drop_folder(wd)

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
                FOLDERS.give_back(len(self.folders))
                self.folders = {}


def overflow_notice(path: str, is_dir: bool, dropped: int) -> dict:
    """Events of `path` were lost (`dropped` of them, 0 when unknown): a WRITE of it (a type the SDKs' models
    take) marked `overflow`, meaning rescan it."""
    return {"type": "WRITE", "path": path, "name": os.path.basename(path), "is_dir": is_dir, "overflow": True,
            "dropped": dropped}


def unwatchable(path: str) -> bool:
    return any(path == top or path.startswith(top + "/") for top in UNWATCHABLE)


class Watches:
    """The session's watches by id, at most MAX_WATCHES."""

    def __init__(self):
        self.watches: dict[str, Watch] = {}
        self.starting = 0  # watches being made (their trees walked) outside the lock
        self.lock = threading.Lock()

    def start(self, path: str, recursive: bool) -> Watch:
        with self.lock:
            if len(self.watches) + self.starting >= MAX_WATCHES:
                raise AgentError(400, "too_many_watches", f"a session has at most {MAX_WATCHES} watches: stop one")
            self.starting += 1
        watch = None
        try:
            watch = Watch(path, recursive)
        except OSError as error:
            raise refusal(error, path) from None
        finally:
            with self.lock:
                self.starting -= 1
                if watch is not None:
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
        return AgentError(400, "too_many_watched_folders", f"{path}: the session cannot watch more folders (at "
                          f"most {MAX_WATCHED_FOLDERS} in all its watches, and the host's inotify limit)")
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
    if unwatchable(path) or unwatchable(os.path.realpath(path)):
        raise AgentError(400, "path_not_watchable", f"{path}: {' and '.join(UNWATCHABLE)} are not watched")
    if not os.path.exists(path):
        raise AgentError(404, "not_found", f"{path}: no such file or directory")
    return json_answer(200, {"watch_id": WATCHES.start(path, bool(recursive)).id})


def watch_events(request: Request):
    watch = WATCHES.get(request.params["watch_id"])
    after = watch.journal.check_key(request.headers.get("Last-Event-ID"))
    return sse(watch.journal.follow(after, dict, lambda dropped: overflow_notice(watch.path, watch.root_is_dir,
                                                                                   dropped)))


def stop_watch(request: Request):
    WATCHES.stop(request.params["watch_id"])
    return empty(204)


ROUTES = [
    ("POST", "/fs/watch", start_watch),
    ("GET", "/fs/watch/{watch_id}/events", watch_events),
    ("DELETE", "/fs/watch/{watch_id}", stop_watch),
]
