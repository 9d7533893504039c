"""The agent's HTTP vocabulary: its error, its request and the answers a route can give (JSON, empty, a stream of
bytes, server-sent events, a trickled JSON), plus the check every path of a request goes through.

Standard library only: the agent runs with the system's Python inside the session's sandbox."""
import errno
import grp
import json
import os
import posixpath
import pwd
import queue
import threading
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

ROOM_HEADER = "X-Lantern-Room"  # lantern_wire.control.ROOM_HEADER: the agent cannot import the host's packages
JSON_BODY_LIMIT = 1024 * 1024
PATH_LIMIT = 4096  # bytes, as Linux's PATH_MAX
HIDDEN_FOLDER = "/run/lantern"  # the DevTools socket's folder: a client must not break its own session by accident
TRICKLE_SECONDS = 10.0
READ_CHUNK = 64 * 1024
SESSION_NAMES = ("session", "kernel")  # the session's user (and group) under Lantern's name and Kernel's


class AgentError(Exception):
    """A refusal with its HTTP status, answered as {"code", "message", **extra}."""

    def __init__(self, status: int, code: str, message: str, **extra):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra

    def body(self) -> dict:
        return {"code": self.code, "message": self.message, **self.extra}


@dataclass
class Answer:
    """What a route answers: the server writes the status and headers, then each chunk as it comes. Without a
    length the body is sent chunked."""
    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    chunks: Iterable[bytes] = ()
    length: int | None = None


class Headers:
    """Request headers, looked up case-insensitively (the first value of a repeated header)."""

    def __init__(self, pairs: Iterable[tuple[str, str]]):
        self._values: dict[str, str] = {}
        for name, value in pairs:
            self._values.setdefault(name.lower(), value)

    def get(self, name: str, default: str | None = None) -> str | None:
        return self._values.get(name.lower(), default)


class Request:
    """One request: method, path (no query), query (first value of each name), headers, room (the bytes the
    session may still store, from the host, or None), params (the route's values) and the body."""

    def __init__(self, method: str, path: str, query: dict[str, str], headers: Headers, body_file,
                 params: dict[str, str] | None = None):
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.params = params or {}
        self.content_length = byte_count(headers, "Content-Length", "bad_content_length")
        self.chunked = "chunked" in (headers.get("Transfer-Encoding") or "").lower()
        if self.chunked and self.content_length is not None:  # which one frames the body? (RFC 9112 6.3: refuse)
            raise AgentError(400, "bad_framing", "a body has a Content-Length or is chunked, not both")
        self.room = byte_count(headers, ROOM_HEADER, "bad_room")
        self._file = body_file
        self._left = self.content_length or 0
        self._chunk_left = 0
        self._chunks_done = False

    def read(self, size: int = -1) -> bytes:
        """Up to `size` bytes of the body (all that is left with -1), never past its end."""
        if self.chunked:
            return self._read_chunked(size)
        wanted = self._left if size < 0 else min(size, self._left)
        data = self._file.read(wanted) if wanted else b""
        self._left -= len(data)
        if len(data) < wanted:
            raise AgentError(400, "body_incomplete", "the request's body ended before its Content-Length")
        return data

    def readline(self, limit: int) -> bytes:
        """One line of a body with a Content-Length (at most `limit` bytes, its newline included)."""
        if self.chunked:
            raise AgentError(411, "length_required", "this body needs a Content-Length")
        line = self._file.readline(min(limit, self._left))
        self._left -= len(line)
        return line

    def json(self) -> dict:
        """The body as a JSON object of at most 1 MiB."""
        if self.content_length is not None and self.content_length > JSON_BODY_LIMIT:
            raise AgentError(400, "body_too_large", f"a JSON body is at most {JSON_BODY_LIMIT} bytes")
        data = self.read(JSON_BODY_LIMIT + 1)
        if len(data) > JSON_BODY_LIMIT:
            raise AgentError(400, "body_too_large", f"a JSON body is at most {JSON_BODY_LIMIT} bytes")
        return json_object(data, "invalid_json", "the body")

    def unread(self) -> int | None:
        """Bytes of the body not read yet (None when the body is chunked)."""
        return None if self.chunked else self._left

    def _read_chunked(self, size: int) -> bytes:
        parts = []
        while not self._chunks_done and (size < 0 or size > 0):
            if self._chunk_left == 0:
                self._chunk_left = self._next_chunk_size()
                if self._chunk_left == 0:
                    self._chunks_done = True
                    break
            wanted = self._chunk_left if size < 0 else min(size, self._chunk_left)
            data = self._file.read(wanted)
            if len(data) < wanted:
                raise AgentError(400, "body_incomplete", "the request's chunked body ended early")
            self._chunk_left -= len(data)
            if self._chunk_left == 0:
                self._file.readline()  # the CRLF after a chunk
            parts.append(data)
            if size > 0:
                size -= len(data)
        return b"".join(parts)

    def _next_chunk_size(self) -> int:
        line = self._file.readline(1024)
        try:
            chunk_size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise AgentError(400, "bad_chunk", "the request's chunked body is malformed") from None
        if chunk_size == 0:
            while self._file.readline(1024).strip():  # trailers, then the blank line
                pass
        return chunk_size


def byte_count(headers: Headers, name: str, code: str) -> int | None:
    """The header `name` as a number of bytes (None without it), or AgentError 400 `code`."""
    value = headers.get(name)
    if value is None:
        return None
    if not value.strip().isdigit():
        raise AgentError(400, code, f"{name} must be a number of bytes")
    return int(value)


def json_object(data: bytes, code: str, what: str) -> dict:
    """`data` as a JSON object, or AgentError 400 `code` saying that `what` is not one."""
    try:
        value = json.loads(data)
    except ValueError:  # UnicodeDecodeError too
        raise AgentError(400, code, f"{what} is not JSON") from None
    if not isinstance(value, dict):
        raise AgentError(400, code, f"{what} must be a JSON object")
    return value


def json_answer(status: int, body) -> Answer:
    data = json.dumps(body).encode()
    return Answer(status, [("Content-Type", "application/json")], [data], len(data))


def empty(status: int) -> Answer:
    return Answer(status, [], [], 0)


def stream(status: int, content_type: str, chunks: Iterable[bytes], length: int | None = None) -> Answer:
    return Answer(status, [("Content-Type", content_type)], chunks, length)


def sse(frames: Iterable[tuple[int, dict] | None]) -> Answer:
    """Server-sent events: each (id, data) as an `id:`/`data:` frame, each None as a keep-alive comment."""
    headers = [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")]
    return Answer(200, headers, sse_frames(frames))


def sse_frames(frames: Iterable[tuple[int, dict] | None]) -> Iterator[bytes]:
    for frame in frames:
        if frame is None:
            yield b": keep-alive\n\n"
        else:
            event_id, data = frame
            yield f"id: {event_id}\ndata: {json.dumps(data)}\n\n".encode()


def trickle(status: int, wait: Callable[[], object], every: float = TRICKLE_SECONDS) -> Answer:
    """Headers at once, a space every `every` seconds while `wait()` runs, then its result as JSON: leading
    whitespace is valid JSON, and a client's read timeout never fires on a long wait (so it never resends it)."""
    return Answer(status, [("Content-Type", "application/json")], trickled(wait, every))


def trickled(wait: Callable[[], object], every: float) -> Iterator[bytes]:
    results: queue.Queue = queue.Queue(maxsize=1)

    def run():
        try:
            results.put((True, wait()))
        except AgentError as error:
            results.put((True, error.body()))
        except BaseException as error:  # the headers are gone: say it in the body rather than cut the answer
            results.put((False, error))

    threading.Thread(target=run, name="trickle", daemon=True).start()
    while True:
        try:
            done, result = results.get(timeout=every)
        except queue.Empty:
            yield b" "
            continue
        if not done:
            raise result
        yield json.dumps(result).encode()
        return


OS_REFUSALS = {
    errno.ENOENT: (404, "not_found"),
    errno.ENOTDIR: (400, "not_a_directory"),
    errno.EISDIR: (400, "is_a_directory"),
    errno.EEXIST: (400, "already_exists"),
    errno.ENOTEMPTY: (400, "directory_not_empty"),
    errno.EACCES: (403, "permission_denied"),
    errno.EPERM: (403, "permission_denied"),
    errno.EROFS: (403, "read_only"),
    errno.ENOSPC: (413, "insufficient_room"),
    errno.EDQUOT: (413, "insufficient_room"),
    errno.EFBIG: (413, "insufficient_room"),
}


def os_refusal(error: OSError, field: str | None = None) -> AgentError:
    """What a failed system call means to the client: a 4xx naming the path (never a 5xx, which SDKs retry)."""
    status, code = OS_REFUSALS.get(error.errno, (400, "os_error"))
    filename = os.fsdecode(error.filename) if error.filename else None
    message = ": ".join(part for part in (field, filename, error.strerror or str(error)) if part)
    extra = {"room_bytes": 0} if status == 413 else {}
    return AgentError(status, code, message, **extra)


def check_path(value, field: str) -> str:
    """`value` as a normalised absolute path, or AgentError 400 naming `field`."""
    if not isinstance(value, str) or not value:
        raise AgentError(400, "invalid_path", f"{field} must be a non-empty absolute path")
    if "\0" in value:
        raise AgentError(400, "invalid_path", f"{field} must not contain NUL")
    try:
        encoded = value.encode("utf-8", "surrogateescape")  # undecodable bytes of a name came as U+DC80..U+DCFF
    except UnicodeEncodeError:
        raise AgentError(400, "invalid_path", f"{field} holds a lone surrogate, which names no file") from None
    if len(encoded) > PATH_LIMIT:
        raise AgentError(400, "invalid_path", f"{field} is longer than {PATH_LIMIT} bytes")
    if not value.startswith("/"):
        raise AgentError(400, "invalid_path", f"{field} must be an absolute path")
    path = "/" + posixpath.normpath(value).lstrip("/")
    for candidate in (path, os.path.realpath(path)):
        if candidate == HIDDEN_FOLDER or candidate.startswith(HIDDEN_FOLDER + "/"):
            raise AgentError(400, "path_not_allowed", f"{field}: paths under {HIDDEN_FOLDER} are the session's own")
    return path


def session_names(kind: str = "user") -> set[str]:
    """What a request may call the session's own user (kind "user": "session", "kernel", its name, its uid and
    "uid:gid") or group (kind "group": "session", "kernel", its name, its gid)."""
    uid, gid = os.getuid(), os.getgid()
    if kind == "group":
        names, name_of_id = {str(gid)}, lambda: grp.getgrgid(gid).gr_name
    else:
        names, name_of_id = {str(uid), f"{uid}:{gid}"}, lambda: pwd.getpwuid(uid).pw_name
    try:
        names.add(name_of_id())
    except KeyError:  # an id without a name: the ids alone
        pass
    return names | set(SESSION_NAMES)


def is_session_identity(value, kind: str = "user") -> bool:
    """Whether `value` (a string, or a whole number taken as an id) names the session's own user or group; any
    other type (a list, a boolean, a float) names nothing."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    return isinstance(value, str) and value in session_names(kind)
