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

The inotify instance the watches share, its reader and its limits are inotify.py's."""
import errno
import logging
import os
import threading
import uuid

from .http import AgentError, Request, check_path, empty, json_answer, sse
from .inotify import (
    EVENTS,
    IN_CREATE,
    IN_DELETE,
    IN_DELETE_SELF,
    IN_DONT_FOLLOW,
    IN_IGNORED,
    IN_ISDIR,
    IN_MODIFY,
    IN_MOVE_SELF,
    IN_MOVED_FROM,
    IN_MOVED_TO,
    IN_ONLYDIR,
    IN_Q_OVERFLOW,
    MAX_WATCHED_FOLDERS,
    Inotify,
)
from .output import Journal

log = logging.getLogger("agent")

MAX_WATCHES = 16
BUFFER_EVENTS = 1024
HELD_EVENTS = BUFFER_EVENTS  # events held for a watch being built: its journal could keep no more
UNWATCHABLE = ("/proc", "/sys")  # kernel files: inotify tells nothing of their changes, and /proc is every pid's


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
