"""The files calls that move bytes: read_file and download_dir_zip stream out; write_file and put_files stream in,
checked against the session's room first, written under temporary names and renamed only when whole.

Nothing holds a whole file in memory: bytes go through in chunks of CHUNK."""
import os
import stat
import threading
import time
import zipfile
from contextlib import contextmanager

from .files import parse_mode, part_name, remove_quietly
from .http import AgentError, Request, check_path, empty, json_object, os_refusal, stream

CHUNK = 1024 * 1024
HEADER_LIMIT = 1024 * 1024  # put_files' first line (its JSON list of files)
MAX_PUT_ENTRIES = 10000
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
ZIP_END = (2107, 12, 31, 23, 59, 58)  # the last moment a zip entry's DOS date and time can hold


def read_file(request: Request):
    path = check_path(request.query.get("path"), "path")
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO must not block the open
    except OSError as error:
        raise os_refusal(error, "path") from None
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise AgentError(400, "not_a_regular_file", f"path: {path} is not a regular file")
    except BaseException:
        os.close(descriptor)
        raise
    return stream(200, "application/octet-stream", FileChunks(descriptor, status.st_size), status.st_size)


class FileChunks:
    """The file's first `size` bytes (its size when the answer began) in chunks; close() closes the file, even
    when the answer never began."""

    def __init__(self, descriptor: int, size: int):
        self.descriptor = descriptor
        self.size = size

    def __iter__(self):
        left = self.size
        while left > 0:
            data = os.read(self.descriptor, min(CHUNK, left))
            if not data:
                raise OSError("the file shrank while it was read")  # the answer would lie about its length
            left -= len(data)
            yield data

    def close(self):
        if self.descriptor >= 0:
            os.close(self.descriptor)
            self.descriptor = -1


class ChunkSink:
    """The unseekable file a ZipFile writes to: it keeps what was written until the answer takes it."""

    def __init__(self):
        self.parts: list[bytes] = []

    def write(self, data) -> int:
        self.parts.append(bytes(data))
        return len(data)

    def flush(self):
        pass

    def take(self) -> bytes:
        data = b"".join(self.parts)
        self.parts.clear()
        return data


def download_dir_zip(request: Request):
    path = check_path(request.query.get("path"), "path")
    try:
        if not stat.S_ISDIR(os.stat(path).st_mode):
            raise AgentError(400, "not_a_directory", f"path: {path} is not a directory")
    except OSError as error:
        raise os_refusal(error, "path") from None
    return stream(200, "application/zip", zip_chunks(path))


def zip_chunks(root: str):
    """A zip of the folder written as it goes: folders, regular files and links (as links); other kinds (FIFOs,
    sockets, devices) and entries that vanish or cannot be read are left out."""
    sink = ChunkSink()
    with zipfile.ZipFile(sink, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for folder, folders, files in os.walk(root):
            relative = os.path.relpath(folder, root)
            if relative != ".":
                archive.mkdir(zip_name(relative))
            for name in sorted(folders) + sorted(files):
                path = os.path.join(folder, name)
                yield from zip_entry(archive, sink, path, zip_name(os.path.relpath(path, root)))
            yield sink.take()
    yield sink.take()


def zip_name(relative: str) -> str:
    """A name zip can hold (UTF-8): bytes of a file name that are not UTF-8 become U+FFFD."""
    return relative.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def zip_entry(archive: zipfile.ZipFile, sink: ChunkSink, path: str, name: str):
    try:
        status = os.lstat(path)
        if stat.S_ISLNK(status.st_mode):
            info = entry_info(name, status)
            archive.writestr(info, os.readlink(path))
        elif stat.S_ISREG(status.st_mode):
            with open(path, "rb") as source:
                info = entry_info(name, status)
                with archive.open(info, "w") as target:
                    while data := source.read(CHUNK):
                        target.write(data)
                        yield sink.take()
    except (FileNotFoundError, PermissionError):
        return


def entry_info(name: str, status: os.stat_result) -> zipfile.ZipInfo:
    entry = zipfile.ZipInfo(name, date_time=zip_time(status.st_mtime))
    entry.external_attr = (status.st_mode & 0xFFFF) << 16  # Unix type and permissions: links stay links (zip -y)
    entry.compress_type = zipfile.ZIP_STORED if stat.S_ISLNK(status.st_mode) else zipfile.ZIP_DEFLATED
    entry.file_size = status.st_size  # the size decides zip64 before the bytes come
    return entry


def zip_time(mtime: float) -> tuple:
    """A zip entry's local time, within what zip can say (1980 to 2107)."""
    try:
        moment = tuple(time.localtime(mtime)[:6])
    except (OverflowError, OSError, ValueError):  # past what the platform's time_t or a year can hold
        return ZIP_END if mtime > 0 else ZIP_EPOCH
    return min(max(moment, ZIP_EPOCH), ZIP_END)


def free_bytes(path: str) -> tuple[int, int]:
    """(device, bytes free) of the filesystem `path` would be written to: that of its nearest existing folder."""
    folder = os.path.dirname(path)
    while not os.path.isdir(folder):
        folder = os.path.dirname(folder)
    status = os.statvfs(folder)
    return os.stat(folder).st_dev, status.f_bavail * status.f_frsize


class InFlight:
    """The bytes that writes in progress were let write and have not finished: the room the host sends counts only
    what is stored already, so two writes at once could each take all of it. A write's bytes count here from its
    check until it ends (some twice, once written: the error is on the safe side)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.bytes = 0

    @contextmanager
    def reserve(self, room: int | None, sizes: list[tuple[str, int]]):
        """check_room against `room` less what other writes hold, then hold these sizes until the block ends."""
        total = sum(size for _, size in sizes)
        with self.lock:
            check_room(None if room is None else max(0, room - self.bytes), sizes)
            self.bytes += total
        try:
            yield
        finally:
            with self.lock:
                self.bytes -= total


IN_FLIGHT = InFlight()


def check_room(room: int | None, sizes: list[tuple[str, int]]) -> None:
    """413 before anything is written when the bytes to write pass the session's room (from the host) or the
    free space of a filesystem they go to."""
    total = sum(size for _, size in sizes)
    if room is not None and total > room:
        raise no_room(total, room)
    needs: dict[int, int] = {}
    frees: dict[int, int] = {}
    for path, size in sizes:
        device, free = free_bytes(path)
        needs[device] = needs.get(device, 0) + size
        frees[device] = free
    for device, need in needs.items():
        if need > frees[device]:
            raise no_room(total, frees[device] if room is None else min(room, frees[device]))


def no_room(wanted: int, left: int) -> AgentError:
    return AgentError(413, "insufficient_room", f"{wanted} bytes do not fit in the session: {left} bytes left",
                      room_bytes=left)


def check_file_target(path: str, field: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        raise AgentError(400, "is_a_directory", f"{field}: {path} is a directory")


class Staging:
    """Files written under temporary names in their folders and renamed together at the end; on a failure every
    temporary and every folder it made are removed, so nothing is left half-written."""

    def __init__(self):
        self.made_folders: list[str] = []
        self.temporaries: list[tuple[str, str]] = []

    def __enter__(self):
        return self

    def __exit__(self, kind, error, trace):
        if kind is not None:
            for temporary, _ in self.temporaries:
                remove_quietly(temporary)
            for folder in reversed(self.made_folders):
                try:
                    os.rmdir(folder)
                except OSError:
                    pass
        return False

    def make_folders(self, path: str, mode: int = 0o755) -> None:
        missing = []
        while not os.path.isdir(path):
            missing.append(path)
            path = os.path.dirname(path)
        for folder in reversed(missing):
            os.mkdir(folder, mode)
            self.made_folders.append(folder)

    def write(self, path: str, mode: int, request: Request, size: int) -> None:
        """Copy the next `size` bytes of the request's body to a temporary beside `path`."""
        folder = os.path.dirname(path)
        self.make_folders(folder)
        temporary = part_name(folder)
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        self.temporaries.append((temporary, path))
        with os.fdopen(descriptor, "wb", buffering=0) as target:
            left = size
            while left > 0:
                data = request.read(min(CHUNK, left))
                if not data:  # a chunked body that ended before `size`
                    raise AgentError(400, "body_incomplete", f"the request's body ended {left} bytes before its end")
                left -= len(data)
                target.write(data)
            os.fchmod(target.fileno(), mode)  # the mode asked for, whatever the umask

    def commit(self) -> None:
        """Rename every temporary onto its target. Should one rename fail, the targets renamed before it get back
        what they held (from hard links made of them first) or go when they are new: a failed commit changes
        nothing."""
        for _, path in self.temporaries:
            check_file_target(path, "path")  # a folder may have been made there since: better none renamed
        backups = back_up(dict.fromkeys(path for _, path in self.temporaries))
        renamed: list[str] = []
        try:
            for temporary, path in self.temporaries:
                os.rename(temporary, path)
                renamed.append(path)
        except BaseException:
            for path in dict.fromkeys(reversed(renamed)):
                if backups[path]:
                    os.rename(backups[path], path)
                else:
                    remove_quietly(path)
            raise
        finally:
            for backup in backups.values():
                if backup:
                    remove_quietly(backup)


def back_up(paths) -> dict[str, str | None]:
    """For each path, a hard link to what it names now beside it (a link itself, not what it points to), or None
    when it names nothing; on a failure none are left."""
    backups: dict[str, str | None] = {}
    try:
        for path in paths:
            backups[path] = None
            if os.path.lexists(path):
                backup = part_name(os.path.dirname(path))
                os.link(path, backup, follow_symlinks=False)
                backups[path] = backup
    except BaseException:
        for backup in backups.values():
            if backup:
                remove_quietly(backup)
        raise
    return backups


def write_file(request: Request):
    path = check_path(request.query.get("path"), "path")
    mode = parse_mode(request.query.get("mode"), "mode", default=0o644)
    if request.content_length is None:
        raise AgentError(411, "length_required", "write_file needs a Content-Length")
    try:
        check_file_target(path, "path")
        with IN_FLIGHT.reserve(request.room, [(path, request.content_length)]), Staging() as staging:
            staging.write(path, mode, request, request.content_length)
            staging.commit()
    except OSError as error:
        raise os_refusal(error, "path") from None
    return empty(201)


def put_files(request: Request):
    """Lantern's own upload: a first line of JSON {"files": [{path, size, mode?}], "directories": [{path}]}, then
    each file's bytes in order. All or nothing."""
    if request.content_length is None:
        raise AgentError(411, "length_required", "put_files needs a Content-Length")
    files, folders = read_put_header(request)
    if sum(size for _, size, _ in files) != request.unread():
        raise AgentError(400, "sizes_mismatch", "the files' sizes do not add up to the body after the first line")
    try:
        for path, _, _ in files:
            check_file_target(path, "files.path")
        with IN_FLIGHT.reserve(request.room, [(path, size) for path, size, _ in files]), Staging() as staging:
            for folder in folders:
                staging.make_folders(folder)
            for path, size, mode in files:
                staging.write(path, mode, request, size)
            staging.commit()
    except OSError as error:
        raise os_refusal(error) from None
    return empty(201)


def read_put_header(request: Request) -> tuple[list[tuple[str, int, int]], list[str]]:
    line = request.readline(HEADER_LIMIT + 1)
    if not line.endswith(b"\n"):
        raise AgentError(400, "invalid_header", f"the first line (JSON, at most {HEADER_LIMIT} bytes) must end "
                         "with a newline")
    header = json_object(line, "invalid_header", "the first line")
    files = header.get("files", [])
    folders = header.get("directories", [])
    if not isinstance(files, list) or not isinstance(folders, list) or len(files) + len(folders) > MAX_PUT_ENTRIES:
        raise AgentError(400, "invalid_header", f"files and directories are lists of at most {MAX_PUT_ENTRIES} in all")
    return [put_file(entry, index) for index, entry in enumerate(files)], \
        [check_path(entry.get("path") if isinstance(entry, dict) else None, f"directories[{index}].path")
         for index, entry in enumerate(folders)]


def put_file(entry, index: int) -> tuple[str, int, int]:
    if not isinstance(entry, dict):
        raise AgentError(400, "invalid_header", f"files[{index}] must be an object")
    size = entry.get("size")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise AgentError(400, "invalid_header", f"files[{index}].size must be a number of bytes")
    path = check_path(entry.get("path"), f"files[{index}].path")
    return path, size, parse_mode(entry.get("mode"), f"files[{index}].mode", default=0o644)


ROUTES = [
    ("GET", "/fs/read_file", read_file),
    ("GET", "/fs/download_dir_zip", download_dir_zip),
    ("PUT", "/fs/write_file", write_file),
    ("POST", "/fs/put_files", put_files),
]
