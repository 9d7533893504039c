"""Files sent into a session (fs.write_file's body, fs.upload, fs.upload_zip), made into what its agent takes: one
`put_files` call per upload, whose first line is a JSON manifest of the files (path, size, mode) and folders, and
whose bytes follow in order, with an exact Content-Length (browserhost/agent). The agent writes all of them or
none, and refuses with 413 before writing anything when they do not fit in the session's room.

Multipart parts are spooled to disk past a small size by Werkzeug; a ZIP archive's entries are checked before
anything is sent (names inside dest_path, no links, at most MAX_ZIP_ENTRIES, their sizes within the session's
memory) and sent decompressed as they are read, each bounded by its declared size and CRC-checked: a damaged entry
stops the call part-way, and the agent, whose body then ends short, writes nothing.
"""
import itertools
import json
import os
import posixpath
import re
import stat
import zipfile
import zlib
from dataclasses import dataclass
from typing import Callable, Iterable

import marshmallow as ma

from app.browsers import session_agent
from app.browsers.fs_schemas import MAX_PATH_BYTES, absolute_path
from app.browsers.host_client import STREAM_CHUNK
from app.browsers.host_errors import AgentRefusal
from app.core.errors import bad_request
from lantern_wire import control

# A multipart body's part headers and dest_path fields, beyond its files' bytes.
MULTIPART_OVERHEAD = 1024 * 1024
MAX_ZIP_ENTRIES = 10_000
# The most the agent reads of put_files' first line (its manifest), and of its files and folders in all.
MAX_MANIFEST_BYTES = 1024 * 1024
# The names the SDK gives an upload's fields: files[0][file] with files[0][dest_path].
UPLOAD_FIELD = re.compile(r"files\[(\d{1,6})\]\[(file|dest_path)\]")


@dataclass
class Part:
    """A file to write: `path` in the session, `size` bytes read by `chunks()`, `name` what a 400 calls it."""

    path: str
    size: int
    chunks: Callable[[], Iterable[bytes]]
    name: str
    mode: str | None = None


def memory_bytes(session):
    """The session's memory: nothing larger can be stored in it."""
    return control.BrowserSpec(memory=session.memory, headless=session.headless).memory_mb * 1024 * 1024


def read_body(stream, length):
    """The request body's `length` bytes, a chunk at a time; 400 when it ends short (the client stopped)."""
    left = length
    while left:
        chunk = stream.read(min(left, STREAM_CHUNK))
        if not chunk:
            raise bad_request(f"The body ended {left} bytes before its Content-Length; nothing was written.")
        left -= len(chunk)
        yield chunk


def paired_files(form, files):
    """The upload's files in the order of their index, each files[i][file] with its files[i][dest_path]; 400 naming
    a field the SDK does not send, or an index with one half only."""
    pairs = {}
    for key in itertools.chain(form, files):
        match = UPLOAD_FIELD.fullmatch(key)
        if match is None:
            raise bad_request(f"{key!r} is not a field of an upload: send files[i][file] with files[i][dest_path].",
                              field=key[:100])
        source = files if match[2] == "file" else form
        if len(source.getlist(key)) > 1:
            raise bad_request(f"{key} is given more than once.", field=key)
        pairs.setdefault(int(match[1]), {})[match[2]] = source[key]
    if not pairs:
        raise bad_request("Send at least one file: files[0][file] with files[0][dest_path].", field="files")
    return [_part(index, pair) for index, pair in sorted(pairs.items())]


def _part(index, pair):
    for half in ("file", "dest_path"):
        if half not in pair:
            raise bad_request(f"files[{index}] has no {half}: each files[i][file] goes with its files[i][dest_path].",
                              field=f"files[{index}][{half}]")
    try:
        absolute_path(pair["dest_path"])
    except ma.ValidationError as error:
        raise bad_request(f"files[{index}][dest_path]: {' '.join(error.messages)}",
                          field=f"files[{index}][dest_path]") from None
    stream = pair["file"].stream
    size = stream.seek(0, os.SEEK_END)
    stream.seek(0)
    return Part(pair["dest_path"], size, lambda: iter(lambda: stream.read(STREAM_CHUNK), b""),
                f"files[{index}]")


def send(session, what, parts, directories=()):
    """One put_files call writing `parts` and making `directories` (paths), all or none."""
    manifest = {"files": [{"path": part.path, "size": part.size, **({"mode": part.mode} if part.mode else {})}
                          for part in parts],
                "directories": [{"path": path} for path in directories]}
    head = json.dumps(manifest, ensure_ascii=False).encode() + b"\n"
    if len(head) > MAX_MANIFEST_BYTES:
        raise bad_request(f"The paths of these {len(parts) + len(directories)} files and folders come to more than "
                          f"{MAX_MANIFEST_BYTES} bytes in all: send them in parts.")
    body = itertools.chain([head], *(_exactly(part) for part in parts))
    length = len(head) + sum(part.size for part in parts)
    with session_agent.open_stream(session, what, "POST", "fs/put_files", session_agent.kept_active(session, body),
                                   length=length):
        pass


def _exactly(part):
    """The part's bytes, which must be its size: else the call stops here, and the agent writes nothing."""
    sent = 0
    for chunk in part.chunks():
        sent += len(chunk)
        if sent > part.size:
            break
        yield chunk
    if sent != part.size:
        raise bad_request(f"{part.name} is not the {part.size} bytes it said; nothing was written.")


def send_zip(session, what, archive_file, dest_path):
    """The archive's folders and files written under `dest_path`, all or none; 400 naming an entry that is outside
    it, a link, damaged, or past what the session can hold."""
    try:
        archive = zipfile.ZipFile(archive_file)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as error:
        raise bad_request(f"zip_file is not a ZIP archive ({error}).", field="zip_file") from None
    with archive:
        entries = archive.infolist()
        if len(entries) > MAX_ZIP_ENTRIES:
            raise bad_request(f"The archive has {len(entries):,} entries; at most {MAX_ZIP_ENTRIES:,} are extracted.",
                              field="zip_file")
        directories, parts = [], []
        for entry in entries:
            path = entry_path(entry, dest_path)
            if path is None:
                continue
            if entry.is_dir():
                directories.append(path)
            else:
                parts.append(Part(path, entry.file_size, _entry_reader(archive, entry), f"entry {entry.filename!r}",
                                  _entry_mode(entry)))
        _within(parts, memory_bytes(session), "more than the session's memory can hold")
        try:  # the agent makes the folders of files and folders; of an empty archive, dest_path is made
            send(session, what, parts, directories if parts or directories else [dest_path])
        except AgentRefusal as refusal:
            if refusal.status != 413 or not isinstance(refusal.fields.get("room_bytes"), int):
                raise
            _within(parts, refusal.fields["room_bytes"], f"more than the {refusal.fields['room_bytes']} bytes the "
                                                         "session has left")
            raise


def entry_path(entry, dest_path):
    """Where an entry goes under `dest_path` (None: dest_path itself); 400 naming one outside it, or a link."""
    name = entry.filename
    kind = stat.S_IFMT(entry.external_attr >> 16)
    problem = None
    if name.startswith("/") or "\x00" in name:
        problem = "has an absolute name"
    elif ".." in name.split("/"):
        problem = "has a .. in its name"
    elif kind == stat.S_IFLNK:
        problem = "is a link"
    elif kind not in (0, stat.S_IFREG, stat.S_IFDIR):
        problem = "is neither a file nor a folder"
    elif entry.flag_bits & 0x1:
        problem = "is encrypted"
    if problem:
        raise bad_request(f"Entry {name!r} {problem}: nothing of the archive was written.", field="zip_file")
    relative = posixpath.normpath(name)
    if relative == ".":
        return None
    path = posixpath.join(dest_path, relative)
    if len(path.encode()) > MAX_PATH_BYTES:
        raise bad_request(f"Entry {name!r} would be a path of more than {MAX_PATH_BYTES} bytes: nothing of the "
                          "archive was written.", field="zip_file")
    return path


def _entry_mode(entry):
    """An entry's permission bits when the archive was made on a Unix (an executable stays one)."""
    bits = (entry.external_attr >> 16) & 0o777
    return format(bits, "o") if entry.create_system == 3 and bits else None


def _entry_reader(archive, entry):
    def chunks():
        try:
            with archive.open(entry) as source:
                yield from iter(lambda: source.read(STREAM_CHUNK), b"")
        except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError) as error:
            raise bad_request(f"Entry {entry.filename!r} is damaged or cannot be read ({error}): nothing of the "
                              "archive was written.", field="zip_file") from None
    return chunks


def _within(parts, room, past):
    """400 naming the first entry that does not fit in `room` bytes with those before it."""
    total = 0
    for part in parts:
        total += part.size
        if total > room:
            raise bad_request(f"The archive up to its {part.name} is {total} bytes, {past}: nothing of it was "
                              "written.", field="zip_file")
