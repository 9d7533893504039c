"""Bodies and answers of a session's processes API (/browsers/{id}/process/...), field for field as the official SDK
(`kernel==0.131.0`, resources/browsers/process.py and types/browsers/process_*) sends and reads them.

What the app can check is checked here, before anything runs: the command and its arguments, an absolute cwd,
env as strings, timeout_sec, a terminal's size, base64 that decodes, a signal's name. `as_root: true` is refused by
the view (400 as_root_not_supported, app/browsers/process_views.py); who `as_user` may be, which cwd exists and
which command runs, only the session's agent knows (browserhost/agent).
"""
import base64
import binascii

import marshmallow as ma
from marshmallow import validate

from app.browsers.fs_schemas import MAX_PATH_BYTES, absolute_path
from app.core.fields import Choice, JsonBoolean, JsonInteger

SIGNALS = ["TERM", "KILL", "INT", "HUP"]
MAX_TIMEOUT_SEC = 86_400
MAX_TERMINAL = 4096  # columns or rows
MAX_ARGS = 4096
MAX_ENV = 1024
MAX_TEXT = 128 * 1024  # one argument, variable or command
# The agent reads a JSON body of at most 1 MiB: stdin's base64 is held below it.
MAX_STDIN_B64 = 1_000_000


def no_nul(value):
    if "\x00" in value:
        raise ma.ValidationError("Must not contain NUL.")


def decodable_base64(value):
    try:
        if len(value) % 4:  # b64decode takes extra padding ("YWJj="), which RFC 4648 and Kernel's Go do not
            raise ValueError
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ma.ValidationError("Must be base64 (RFC 4648, with its padding).") from None


def variable_name(value):
    if not value or "=" in value or "\x00" in value:
        raise ma.ValidationError("A variable's name is non-empty, without = or NUL.")


def text():
    return ma.fields.String(validate=[validate.Length(max=MAX_TEXT), no_nul])


class ExecSchema(ma.Schema):
    command = ma.fields.String(required=True, validate=[validate.Length(1, MAX_TEXT), no_nul], metadata={
        "description": "the program: a name looked up in PATH (/usr/bin:/bin) or a path; no shell unless you run one "
                       "(sh with args [\"-c\", \"...\"])"})
    args = ma.fields.List(text(), validate=validate.Length(max=MAX_ARGS))
    as_root = JsonBoolean(metadata={"description": "only false: a session's processes run as its own user (true "
                                                  "is a 400 as_root_not_supported)"})
    as_user = ma.fields.String(allow_none=True, validate=[validate.Length(max=64), no_nul], metadata={
        "description": "only the session's own user (session, kernel or its uid); any other is a 400"})
    cwd = ma.fields.String(allow_none=True, validate=absolute_path, metadata={
        "description": "an existing folder of the session (default /home/kernel)", "maxLength": MAX_PATH_BYTES})
    env = ma.fields.Dict(keys=ma.fields.String(validate=[validate.Length(max=MAX_TEXT), variable_name]), values=text(),
                         validate=validate.Length(max=MAX_ENV), metadata={
                             "description": "added to a clean environment (PATH, HOME, TMPDIR, LANG)"})
    timeout_sec = JsonInteger(allow_none=True, validate=validate.Range(1, MAX_TIMEOUT_SEC), metadata={
        "description": "past it the process and its children are killed; exec then answers 200 with timed_out true "
                       "and exit_code null"})


class SpawnSchema(ExecSchema):
    allocate_tty = JsonBoolean(metadata={"description": "a terminal (PTY): its output comes through stdout/stream"})
    cols = JsonInteger(validate=validate.Range(1, MAX_TERMINAL), metadata={"description": "with allocate_tty"})
    rows = JsonInteger(validate=validate.Range(1, MAX_TERMINAL), metadata={"description": "with allocate_tty"})


class ExecResultSchema(ma.Schema):
    exit_code = ma.fields.Integer(allow_none=True, metadata={
        "description": "null when timed out; 128 + the signal's number when a signal ended it"})
    stdout_b64 = ma.fields.String()
    stderr_b64 = ma.fields.String()
    duration_ms = ma.fields.Integer()
    timed_out = ma.fields.Boolean(metadata={"description": "Lantern's: killed at timeout_sec"})
    stdout_truncated = ma.fields.Boolean(metadata={"description": "Lantern's: past 8 MiB, the rest was dropped"})
    stderr_truncated = ma.fields.Boolean(metadata={"description": "Lantern's: past 8 MiB, the rest was dropped"})
    signal = ma.fields.String(metadata={"description": "Lantern's: the signal that ended it (KILL, TERM...), if any"})


class SpawnedSchema(ma.Schema):
    process_id = ma.fields.String(required=True)
    pid = ma.fields.Integer(required=True, metadata={"description": "in the session's own process namespace"})
    started_at = ma.fields.String(required=True, metadata={"format": "date-time"})


class StatusSchema(ma.Schema):
    state = ma.fields.String(required=True, metadata={"enum": ["running", "exited"]})
    exit_code = ma.fields.Integer(allow_none=True)
    cpu_pct = ma.fields.Float(allow_none=True)
    mem_bytes = ma.fields.Integer(allow_none=True)


class StdinSchema(ma.Schema):
    data_b64 = ma.fields.String(required=True, validate=[validate.Length(max=MAX_STDIN_B64), decodable_base64],
                                metadata={"description": f"at most {MAX_STDIN_B64:,} characters a call"})


class StdinWrittenSchema(ma.Schema):
    written_bytes = ma.fields.Integer(required=True)


class KillSchema(ma.Schema):
    signal = Choice(SIGNALS, required=True)


class ResizeSchema(ma.Schema):
    cols = JsonInteger(required=True, validate=validate.Range(1, MAX_TERMINAL))
    rows = JsonInteger(required=True, validate=validate.Range(1, MAX_TERMINAL))


STDOUT_STREAM_DOC = {
    "type": "string", "description": "text/event-stream. Each frame has an id: (resume with Last-Event-ID within the "
    "process's 1 MiB of output kept) and data: {stream: stdout|stderr, data_b64}; then {event: exit, exit_code, "
    "signal?} and the stream ends. Every reader sees every chunk; a late one starts with what is kept. Output that "
    "fell out of what is kept before a reader got it is told by an empty chunk {stream: stdout, data_b64: \"\", "
    "dropped_bytes: N}."}
