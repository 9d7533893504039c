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

Limits: MAX_WATCHES watches per session and MAX_WATCHED_FOLDERS kernel watches (folders) for all of them together
(a folder two watches cover counts once); /proc and /sys are not watched (refused, and left out of a recursive
watch's walk). A journal holds at most BUFFER_EVENTS events of a path of at most 4096 bytes: some 4.5 MiB per
watch, 72 MiB for 16.

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
fs.inotify.max_user_instances to 3 a session and some to spare."""
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
MAX_WATCHED_FOLDERS = 8192  # kernel watches of all the session's watches together
BUFFER_EVENTS = 1024
HELD_EVENTS = BUFFER_EVENTS  # events held for a watch being built: its journal could keep no more
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
IN_MASK_ADD = 0x20000000  # a folder another watch watches keeps the events it asked for
IN_ISDIR = 0x40000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC
EVENTS = IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF
EVENT_HEADER = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len (of the name that follows)


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


class Watch:
    """One watch: the folder of each kernel watch descriptor it uses (by its own names: two watches may reach a
    folder by different paths), its journal, and what it makes of the events the agent's inotify hands it (in the
    reader's thread, once the watch is built)."""

    def __init__(self, inotify: Inotify, path: str, recursive: bool):
        self.id = str(uuid.uuid4())
        self.path, self.recursive = path, recursive
        self.journal = Journal(BUFFER_EVENTS)
        self.inotify = inotify
        self.folders: dict[int, str] = {}
        self.announced: set[str] = set()  # entries of new folders told by a scan, which inotify may tell again
        self.held: list | None = []  # events handed while the watch is built; None once they were told
        self.root_is_dir = os.path.isdir(path)
        inotify.attach(self)
        try:
            self.add_folder(path, EVENTS)
            if recursive and self.root_is_dir:
                self.add_tree(path, announce=False)
        except BaseException:
            inotify.detach(self)
            raise
        inotify.hand_over(self)

    def hold(self, event: tuple[int, int, str]) -> bool:
        """(Under the inotify's lock.) Keep `event` while the watch is built (past HELD_EVENTS, a note that
        events were lost); False once it is built."""
        if self.held is None:
            return False
        if len(self.held) < HELD_EVENTS:
            self.held.append(event)
        elif self.held[-1][1] != IN_Q_OVERFLOW:
            self.held.append((-1, IN_Q_OVERFLOW, ""))
        return True

    def take_held(self) -> list:
        """(Under the inotify's lock.)"""
        held, self.held = self.held or [], None
        return held

    def add_tree(self, top: str, announce: bool) -> None:
        """Watch every folder under `top` (not through links); with `announce`, a CREATE for each entry found
        (made in a new folder before its watch was in place, so inotify never told)."""
        for folder, folders, files in os.walk(top):
            if folder != top:
                try:
                    self.add_folder(folder, EVENTS | IN_ONLYDIR | IN_DONT_FOLLOW)
                except OSError as error:
                    if error.errno in (errno.ENOSPC, errno.ECANCELED):
                        raise
                    folders[:] = []  # gone or closed to us meanwhile: nothing under it to watch
                    continue
            if announce:
                for name in folders + files:
                    self.record("CREATE", os.path.join(folder, name), name in folders)
                    self.announced.add(os.path.join(folder, name))
            folders[:] = [name for name in folders if not unwatchable(os.path.join(folder, name))]

    def add_folder(self, folder: str, mask: int) -> None:
        """Use the kernel watch of `folder` (a folder moved, watched again, keeps its descriptor)."""
        self.folders[self.inotify.add(self, folder, mask)] = folder

    def handle(self, wd: int, mask: int, name: str) -> None:
        if mask & IN_Q_OVERFLOW:  # the kernel does not say how many it dropped
            self.journal.append(overflow_notice(self.path, self.root_is_dir, 0))
            return
        folder = self.folders.get(wd)
        if mask & IN_IGNORED:
            self.folders.pop(wd, None)  # the agent's inotify let go of it for every watch
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
                self.inotify.release(self, wd)
                del self.folders[wd]

    def stop(self) -> None:
        """Nothing more is told; its streams end."""
        self.inotify.detach(self)
        self.journal.close()


def overflow_notice(path: str, is_dir: bool, dropped: int) -> dict:
    """Events of `path` were lost (`dropped` of them, 0 when unknown): a WRITE of it (a type the SDKs' models
    take) marked `overflow`, meaning rescan it."""
    return {"type": "WRITE", "path": path, "name": os.path.basename(path), "is_dir": is_dir, "overflow": True,
            "dropped": dropped}


def unwatchable(path: str) -> bool:
    return any(path == top or path.startswith(top + "/") for top in UNWATCHABLE)


class Watches:
    """The session's watches by id, at most MAX_WATCHES, and the inotify instance they share: made with the first
    watch, closed with the last."""

    def __init__(self):
        self.watches: dict[str, Watch] = {}
        self.starting = 0  # watches being made (their trees walked) outside the lock
        self.inotify: Inotify | None = None
        self.lock = threading.Lock()

    def start(self, path: str, recursive: bool) -> Watch:
        with self.lock:
            if len(self.watches) + self.starting >= MAX_WATCHES:
                raise AgentError(400, "too_many_watches", f"a session has at most {MAX_WATCHES} watches: stop one")
            if self.inotify is None or self.inotify.closed:  # closed: its reader failed
                try:
                    self.inotify = Inotify()
                except OSError as error:
                    raise refusal(error, path) from None
            inotify = self.inotify
            self.starting += 1
        watch = None
        try:
            watch = Watch(inotify, path, recursive)
        except OSError as error:
            raise refusal(error, path) from None
        finally:
            with self.lock:
                self.starting -= 1
                if watch is not None:
                    self.watches[watch.id] = watch
                self.close_if_unused()
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
            self.close_if_unused()

    def close_if_unused(self) -> None:
        """(Under the lock.)"""
        if self.inotify is not None and not self.watches and not self.starting:
            self.inotify.close()
            self.inotify = None


def refusal(error: OSError, path: str) -> AgentError:
    if error.errno == errno.ENOENT:
        return AgentError(404, "not_found", f"{path}: no such file or directory")
    if error.errno == errno.ENOSPC:
        return AgentError(400, "too_many_watched_folders", f"{path}: the session cannot watch more folders (at "
                          f"most {MAX_WATCHED_FOLDERS} in all its watches, and the host's inotify limit)")
    if error.errno == errno.EMFILE:
        return AgentError(400, "too_many_watches", "the host's inotify instances are all in use "
                          "(fs.inotify.max_user_instances): no watch can start now")
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
