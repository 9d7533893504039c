"""Files sent into a session (fs.write_file's body, fs.upload, fs.upload_zip), made into what its agent takes: one
`put_files` call per upload, whose first line is a JSON manifest of the files (path, size, mode) and folders, and
whose bytes follow in order, with an exact Content-Length (browserhost/agent). The agent writes all of them or
none, and refuses with 413 before writing anything when they do not fit in the session's room.

A multipart body is parsed here (parsed_form), its file parts spooled to disk past SPOOL_BYTES, all of it at most
the session's memory; a ZIP archive's entries are checked before anything is sent (app/core/zips.py: counted before
they are read, names inside dest_path, no links, no duplicates; their sizes within the session's memory) and sent
decompressed as they are read, each bounded by its declared size and CRC-checked: a damaged entry stops the call
part-way, and the agent, whose body then ends short, writes nothing.
"""
import io
import itertools
import json
import os
import posixpath
import re
import tempfile
import zipfile
import zlib
from dataclasses import dataclass
from typing import Callable, Iterable

import marshmallow as ma
from werkzeug.datastructures import ImmutableMultiDict
from werkzeug.exceptions import RequestEntityTooLarge
from werkzeug.formparser import MultiPartParser
from werkzeug.http import parse_options_header
from werkzeug.wsgi import get_content_length, get_input_stream

from app.browsers import session_agent
from app.browsers.fs_schemas import MAX_PATH_BYTES, absolute_path
from app.browsers.host_client import STREAM_CHUNK
from app.browsers.host_errors import AgentRefusal
from app.core import zips
from app.core.errors import ApiError, bad_request
from lantern_wire import control

# A multipart body's part headers and dest_path fields, beyond its files' bytes.
MULTIPART_OVERHEAD = 1024 * 1024
# What a request body is read by: gunicorn reads ahead 1 MiB, and each smaller read copies what is left of its buffer
# (256 KiB reads of a large body ran at 275-395 MiB/s); a worker holds one such piece at a time.
BODY_READ = 1024 * 1024
# The multipart parser takes a body PARSE_READ at a time, from a buffer filled BODY_READ at a time. It holds a text
# part (files[i][dest_path], upload_zip's dest_path: paths) up to MAX_FIELD_BYTES, which must pass PARSE_READ (its
# decoder refuses a read that would take its buffer past that), and a file part up to SPOOL_BYTES, then spools it to
# a temporary file: MAX_PARTS parts hold at most MAX_PARTS * 64 KiB in a worker.
PARSE_READ = 32 * 1024
MAX_FIELD_BYTES = SPOOL_BYTES = 64 * 1024
MAX_PARTS = 1000
MAX_ZIP_ENTRIES = 10_000
# The most read of an archive's list of entries (zipfile holds it whole): 10,000 entries of ~1.6 KiB names each.
MAX_ZIP_DIRECTORY_BYTES = 16 * 1024 * 1024
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
    """The request body's `length` bytes, BODY_READ at a time; 400 when it ends short (the client stopped)."""
    left = length
    while left:
        chunk = stream.read(min(left, BODY_READ))
        if not chunk:
            raise bad_request(f"The body ended {left} bytes before its Content-Length; nothing was written.")
        left -= len(chunk)
        yield chunk


def parsed_form(environ, memory):
    """(form, files) of a multipart body of at most `memory` bytes of files (the session's: nothing larger fits in
    it), parsed by werkzeug's parser, each file part spooled to disk past SPOOL_BYTES."""
    mimetype, options = parse_options_header(environ.get("CONTENT_TYPE"))
    boundary = options.get("boundary", "")
    if mimetype != "multipart/form-data" or not boundary or not boundary.isascii():
        raise bad_request("The body is not multipart/form-data with its boundary.")
    length, limit = get_content_length(environ), memory + MULTIPART_OVERHEAD
    if length is not None and length > limit:
        raise too_large(length, memory)
    parser = MultiPartParser(stream_factory=spooled, max_form_memory_size=MAX_FIELD_BYTES, cls=ImmutableMultiDict,
                             buffer_size=PARSE_READ, max_form_parts=MAX_PARTS)
    body = io.BufferedReader(get_input_stream(environ, max_content_length=limit), buffer_size=BODY_READ)
    try:
        return parser.parse(body, boundary.encode(), length)
    except RequestEntityTooLarge:
        raise ApiError(413, "payload_too_large", f"The body passes what is read of an upload: at most {MAX_PARTS} "
                       f"parts, {MAX_FIELD_BYTES} bytes a text field, and files of at most the session's memory "
                       f"({memory} bytes).") from None
    except ValueError as error:
        raise bad_request(f"The multipart body cannot be read: {error}.") from None


def spooled(total_content_length, content_type, filename, content_length=None):
    """werkzeug's stream factory: a file part, in memory up to SPOOL_BYTES, then in a temporary file."""
    return tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES, mode="rb+")


def too_large(length, memory):
    """The 413 of a body larger than the session's memory: the agent's refusal, said before the body is read."""
    return AgentRefusal(413, "insufficient_room", f"The body is {length} bytes, more than the session's memory "
                        f"({memory} bytes) can hold: nothing was written.", fields={"room_bytes": memory})


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
    return Part(pair["dest_path"], size, lambda: iter(lambda: stream.read(BODY_READ), b""), f"files[{index}]")


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
    it, a link, twice there, damaged, or past what the session can hold."""
    try:
        archive = zips.opened(archive_file, MAX_ZIP_ENTRIES, MAX_ZIP_DIRECTORY_BYTES)
    except zips.InvalidZip as error:
        raise refused_zip(error) from None
    with archive:
        entries = archive.infolist()
        try:
            zips.check_entries(entries)
            zips.check_compressed_size(entries, archive_file.seek(0, os.SEEK_END))
        except zips.InvalidZip as error:
            raise refused_zip(error) from None
        directories, parts = [], []
        for entry in entries:
            path = entry_path(entry, dest_path)
            if path is None:
                continue
            if zips.is_folder(entry):
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


def refused_zip(error):
    return bad_request(f"{error} Nothing of the archive was written.", field="zip_file")


def entry_path(entry, dest_path):
    """Where an entry (one zips.check_entries passed) goes under `dest_path`; None: dest_path itself."""
    relative = posixpath.normpath(entry.filename)
    if relative == ".":
        return None
    path = posixpath.join(dest_path, relative)
    if len(path.encode()) > MAX_PATH_BYTES:
        raise bad_request(f"Entry {entry.filename!r} would be a path of more than {MAX_PATH_BYTES} bytes: nothing of "
                          "the archive was written.", field="zip_file")
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
