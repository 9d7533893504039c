"""A browser session's files (/browsers/{id}/fs/...), as the official SDK's `browsers.fs` and `browsers.fs.watch`
call them. Every call goes to the session's agent inside its sandbox (app/browsers/session_agent.py): paths are the
session's own, as Chromium sees them, and bytes stream both ways, never held whole here. Uploads are turned into the
agent's one all-or-nothing `put_files` (app/browsers/uploads.py)."""
from flask import Response, request

from app.browsers import fs_schemas as schemas
from app.browsers import session_agent, uploads
from app.browsers.host_errors import AgentRefusal
from app.browsers.views import find
from app.core.api import Blueprint, refuse_unreadable_body
from app.core.errors import ApiError

blp = Blueprint("files", __name__, url_prefix="/browsers",
                description="A browser session's files, inside its sandbox: read, write, upload, download, watch.")
WHAT = "fs API"
BINARY = {"type": "string", "format": "binary"}
# The routes whose body is a file (raw) or files (multipart), by endpoint.
BODIES = {"files.write_file": "raw", "files.upload": "files", "files.upload_zip": "files"}


def done(status):
    return Response(status=status)


@blp.errorhandler(AgentRefusal)
def agent_refused(error):
    return session_agent.refusal_response(error)


blp.before_request(session_agent.refuse_head)


@blp.before_request
def bodies_of_files():
    """A file's body is read as it was sent (415 otherwise, before the session is looked up, as every body is),
    and may be as large as the session can hold, not MAX_CONTENT_LENGTH (sized for JSON bodies): the session's
    room is its agent's to check (a 413 saying how much is left). A multipart body is parsed here
    (uploads.parsed_form: its files spooled to disk)."""
    kind = BODIES.get(request.endpoint)
    if kind is None:
        return
    if kind == "raw":
        if request.mimetype not in ("", "application/octet-stream"):
            raise ApiError(415, "unsupported_media_type", f"A file is sent as its bytes, not as {request.mimetype}: "
                                                          "send it with Content-Type: application/octet-stream.")
    else:
        refuse_unreadable_body(kind)
    memory = uploads.memory_bytes(find(request.view_args["session_ref"], activity=False))
    if kind == "raw":
        request.max_content_length = memory + uploads.MULTIPART_OVERHEAD
    else:  # parsed here, not by werkzeug's defaults (which keep each part in memory up to 500 KiB)
        request.form, request.files = uploads.parsed_form(request.environ, memory)


def _change(name, schema, summary, status=200):
    """PUT /browsers/{id}/fs/<name>: the body's fields go to the agent's route of that name; an empty answer."""
    def view(args, session_ref):
        session_agent.call(find(session_ref), WHAT, "PUT", f"fs/{name}", args)
        return done(status)

    view.__name__, view.__doc__ = name, summary
    blp.route(f"/<session_ref>/fs/{name}", methods=["PUT"])(blp.arguments(schema)(blp.response(status)(view)))


for _name, _schema, _summary, _status in (
        ("create_directory", schemas.CreateDirectorySchema, "Create a folder and its parents (mode: octal, default "
                                                            "755)", 201),
        ("delete_directory", schemas.PathSchema, "Delete a folder and everything in it", 200),
        ("delete_file", schemas.PathSchema, "Delete a file (404 if there is none; 400 for a folder)", 200),
        ("move", schemas.MoveSchema, "Move or rename a file or folder", 200),
        ("set_file_permissions", schemas.SetFilePermissionsSchema,
         "Set a file's mode (owner and group: only the session's own user)", 200)):
    _change(_name, _schema, _summary, _status)


@blp.route("/<session_ref>/fs/file_info")
@blp.arguments(schemas.PathSchema, location="query")
@blp.response(200, schemas.FileInfoSchema)
def file_info(args, session_ref):
    """A file's or folder's name, size, mode and modification time"""
    return session_agent.call(find(session_ref), WHAT, "GET", "fs/file_info", query=args)


@blp.route("/<session_ref>/fs/list_files")
@blp.arguments(schemas.PathSchema, location="query")
@blp.response(200, schemas.FileInfoSchema(many=True))
def list_files(args, session_ref):
    """The files and folders in a folder (one level)"""
    return session_agent.call(find(session_ref), WHAT, "GET", "fs/list_files", query=args)


@blp.route("/<session_ref>/fs/read_file")
@blp.arguments(schemas.PathSchema, location="query")
@blp.response(200, BINARY, content_type="application/octet-stream")
def read_file(args, session_ref):
    """A file's bytes, streamed with their Content-Length"""
    session = find(session_ref)
    answer = session_agent.open_stream(session, WHAT, "GET", "fs/read_file", query=args)
    return streamed(session, answer, "application/octet-stream", answer.headers.get("Content-Length"))


@blp.route("/<session_ref>/fs/download_dir_zip")
@blp.arguments(schemas.PathSchema, location="query")
@blp.response(200, BINARY, content_type="application/zip")
def download_dir_zip(args, session_ref):
    """A folder and everything in it as a ZIP archive, written as it is sent"""
    session = find(session_ref)
    answer = session_agent.open_stream(session, WHAT, "GET", "fs/download_dir_zip", query=args)
    return streamed(session, answer, "application/zip")


def streamed(session, answer, mimetype, length=None):
    headers = {"Content-Length": length} if length is not None else {}
    return session_agent.relayed(session, answer, iter(answer), mimetype, headers)


@blp.route("/<session_ref>/fs/write_file", methods=["PUT"])
@blp.arguments(schemas.WriteFileArgsSchema, location="query")
@blp.doc(requestBody=schemas.WRITE_FILE_DOC)
@blp.response(201)
@blp.alt_response(415, response="UNSUPPORTED_MEDIA_TYPE")
@blp.alt_response(411, description="no Content-Length: length_required")
@blp.alt_response(413, description="larger than the room the session has left: insufficient_room, with room_bytes "
                                    "(for a file larger than the session's memory: that memory, the most it may hold)")
def write_file(args, session_ref):
    """Write a file from the body's bytes (streamed; its folders are made; mode: octal, default 644)"""
    session = find(session_ref)
    length = request.content_length
    if length is None:
        raise ApiError(411, "length_required", "Send the file with its Content-Length: its room in the session is "
                                               "checked before anything is written.")
    memory = uploads.memory_bytes(session)
    if length > memory:  # the agent's refusal, without sending the body: its room is at most the session's memory
        raise AgentRefusal(413, "insufficient_room", f"The file is {length} bytes, more than the session's memory "
                           f"({memory} bytes) can hold: nothing was written.", fields={"room_bytes": memory})
    body = session_agent.kept_active(session, uploads.read_body(request.stream, length))
    with session_agent.open_stream(session, WHAT, "PUT", "fs/write_file", body, query=args, length=length):
        return done(201)


@blp.route("/<session_ref>/fs/upload", methods=["POST"])
@blp.doc(requestBody=schemas.UPLOAD_DOC)
@blp.response(201)
@blp.alt_response(415, response="UNSUPPORTED_MEDIA_TYPE")
@blp.alt_response(413, description="larger than the room the session has left: insufficient_room, with room_bytes")
def upload(session_ref):
    """Write files from a multipart body: files[i][file] to files[i][dest_path]; all of them, or none"""
    session = find(session_ref)
    uploads.send(session, WHAT, uploads.paired_files(request.form, request.files))
    return done(201)


@blp.route("/<session_ref>/fs/upload_zip", methods=["POST"])
@blp.arguments(schemas.UploadZipFormSchema, location="form")
@blp.arguments(schemas.UploadZipFileSchema, location="files")
@blp.response(201)
def upload_zip(form, files, session_ref):
    """Extract a ZIP archive into a folder: every entry, or none"""
    session = find(session_ref)
    uploads.send_zip(session, WHAT, files["zip_file"].stream, form["dest_path"])
    return done(201)


@blp.route("/<session_ref>/fs/watch", methods=["POST"])
@blp.arguments(schemas.WatchStartSchema)
@blp.response(201, schemas.WatchStartedSchema)
def start_watch(args, session_ref):
    """Watch a folder for changes (at most 16 watches a session)"""
    return session_agent.call(find(session_ref), WHAT, "POST", "fs/watch", args)


@blp.route("/<session_ref>/fs/watch/<watch_id>/events")
@blp.response(200, schemas.WATCH_EVENTS_DOC, content_type="text/event-stream")
def watch_events(session_ref, watch_id):
    """The watch's events (SSE; id: on each, resume with Last-Event-ID)"""
    return session_agent.relayed_events(find(session_ref), WHAT,
                                        f"fs/watch/{session_agent.agent_id(watch_id, 'watch')}/events")


@blp.route("/<session_ref>/fs/watch/<watch_id>", methods=["DELETE"])
@blp.response(204)
def stop_watch(session_ref, watch_id):
    """Stop a watch (its event stream ends)"""
    session = find(session_ref)
    session_agent.call(session, WHAT, "DELETE", f"fs/watch/{session_agent.agent_id(watch_id, 'watch')}")
