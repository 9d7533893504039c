"""Bodies, queries and answers of a session's files API (/browsers/{id}/fs/...), field for field as the official SDK
(`kernel==0.131.0`, resources/browsers/fs and their types) sends and reads them.

What the app can check is checked here, before anything reaches the session: paths are absolute, non-empty, without
NUL and at most MAX_PATH_BYTES; modes are octal. What only the session knows (a path that exists, one under the
DevTools folder, the session's user, its room) its agent checks (browserhost/agent).
"""
import re

import marshmallow as ma
from flask_smorest.fields import Upload
from marshmallow import validate

from app.core.fields import JsonBoolean

# Linux's PATH_MAX, the agent's bound too.
MAX_PATH_BYTES = 4096
# chmod's bits, as Kernel's API takes them: "644", "0755", "1777".
OCTAL_MODE = re.compile(r"[0-7]{1,4}")
MAX_NAME = 64  # a user or group name, or a number


def absolute_path(value):
    if not value:
        raise ma.ValidationError("Must be a non-empty absolute path.")
    if "\x00" in value:
        raise ma.ValidationError("Must not contain NUL.")
    if len(value.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        raise ma.ValidationError(f"Must be at most {MAX_PATH_BYTES} bytes.")
    if not value.startswith("/"):
        raise ma.ValidationError("Must be an absolute path (starting with /) in the session's own root.")


def octal_mode(value):
    if not OCTAL_MODE.fullmatch(value):
        raise ma.ValidationError("Must be an octal mode of 1 to 4 digits, such as 644 or 0755.")


def path_field(description, **kwargs):
    return ma.fields.String(required=True, validate=absolute_path, metadata={
        "description": f"{description}: an absolute path in the session's own root (/home/kernel is its home), at "
                       f"most {MAX_PATH_BYTES} bytes", "maxLength": MAX_PATH_BYTES}, **kwargs)


def mode_field(description, **kwargs):
    return ma.fields.String(validate=octal_mode, metadata={"description": description,
                                                           "pattern": f"^{OCTAL_MODE.pattern}$"}, **kwargs)


class PathSchema(ma.Schema):
    path = path_field("the file or folder")


class CreateDirectorySchema(ma.Schema):
    path = path_field("the folder to create, with its parents")
    mode = mode_field("octal, default 755")


class MoveSchema(ma.Schema):
    src_path = path_field("what to move or rename")
    dest_path = path_field("where it goes")


class SetFilePermissionsSchema(ma.Schema):
    path = path_field("the file or folder")
    mode = mode_field("octal, such as 644", required=True)
    owner = ma.fields.String(validate=validate.Length(1, MAX_NAME), metadata={
        "description": "only the session's own user (session, or Kernel's name kernel, or its uid): a session has one "
                       "user, and any other is a 400"})
    group = ma.fields.String(validate=validate.Length(1, MAX_NAME), metadata={
        "description": "only the session's own group, as owner"})


class WriteFileArgsSchema(ma.Schema):
    path = path_field("the file to write (its folders are made)")
    mode = mode_field("octal, default 644")


class UploadZipFormSchema(ma.Schema):
    dest_path = path_field("the folder the archive is extracted into")


class UploadZipFileSchema(ma.Schema):
    zip_file = Upload(required=True, metadata={
        "description": "a ZIP archive: entries outside dest_path (absolute names, ..), links, or more than 10,000 "
                       "entries are a 400"})


class FileInfoSchema(ma.Schema):
    name = ma.fields.String(required=True)
    path = ma.fields.String(required=True)
    is_dir = ma.fields.Boolean(required=True)
    size_bytes = ma.fields.Integer(required=True, metadata={"description": "0 for folders"})
    mod_time = ma.fields.String(required=True, metadata={"format": "date-time", "description": "RFC 3339, UTC"})
    mode = ma.fields.String(required=True, metadata={"description": "as ls shows it: -rw-r--r--, drwxr-xr-x, "
                                                                    "Lrwxrwxrwx for a link"})


class WatchStartSchema(ma.Schema):
    path = path_field("the folder to watch")
    recursive = JsonBoolean(metadata={"description": "its subfolders too, new ones included (default false)"})


class WatchStartedSchema(ma.Schema):
    watch_id = ma.fields.String(required=True)


WATCH_EVENTS_DOC = {
    "type": "string", "description": "text/event-stream. Each frame has an id: (resume with Last-Event-ID within the "
    "watch's buffer of 1024 events) and data: {type: CREATE|WRITE|DELETE|RENAME, path, name, is_dir}. When events "
    "were lost (dropped before a reader got them, or the kernel's queue overflowed), the reader gets a WRITE of the "
    "folder concerned marked {overflow: true, dropped: N} (N is 0 when the count is unknown): rescan that folder. "
    "Ends when the watch stops."}
UPLOAD_DOC = {
    "required": True,
    "content": {"multipart/form-data": {"schema": {
        "type": "object",
        "description": "files[i][file] (the bytes) with files[i][dest_path] (an absolute path) for i = 0, 1, ...: "
                       "all of them written, or none",
        "properties": {"files[0][file]": {"type": "string", "format": "binary"},
                       "files[0][dest_path]": {"type": "string"}},
        "required": ["files[0][file]", "files[0][dest_path]"]}}}}
WRITE_FILE_DOC = {"required": True, "description": "the file's bytes, with their Content-Length",
                  "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}
