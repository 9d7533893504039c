"""A browser session's processes (/browsers/{id}/process/...), as the official SDK's `browsers.process` calls them.
Every process runs inside the session's sandbox as its user, started and watched by its agent
(app/browsers/session_agent.py): it sees the session's files and Chromium's processes, reaches what the session's
firewall allows, and ends with the session."""
import json

from app.browsers import process_schemas as schemas
from app.browsers import session_agent
from app.browsers.computer_schemas import OkSchema
from app.browsers.host_errors import AgentRefusal
from app.browsers.views import find
from app.core.api import Blueprint
from app.core.errors import ApiError
from lantern_wire.control import MAX_JSON_BYTES

blp = Blueprint("processes", __name__, url_prefix="/browsers",
                description="Processes inside a browser session's sandbox: run, stream, signal.")
WHAT = "process API"


blp.before_request(session_agent.refuse_head)


@blp.errorhandler(AgentRefusal)
def agent_refused(error):
    return session_agent.refusal_response(error)


def not_as_root(args):
    """A session's processes run as its one user: root inside it would be nobody's on the host, and a lie."""
    if args.get("as_root"):
        raise ApiError(400, "as_root_not_supported", "as_root: processes run as the session's own user inside its "
                                                     "sandbox; leave as_root out or false.")


@blp.route("/<session_ref>/process/exec", methods=["POST"])
@blp.arguments(schemas.ExecSchema)
@blp.response(200, schemas.ExecResultSchema)
def exec_command(args, session_ref):
    """Run a command and answer once it ends: its exit code and output (base64); past timeout_sec it is killed
    (timed_out true). While it runs the answer sends a space every 10 s, so no client gives up and runs it again."""
    not_as_root(args)
    session = find(session_ref)
    body = json.dumps(args).encode()
    answer = session_agent.open_stream(session, WHAT, "POST", "process/exec", body, length=len(body),
                                       content_type="application/json", limit=MAX_JSON_BYTES)
    return session_agent.relayed(session, answer, answer.as_it_comes(), "application/json")


@blp.route("/<session_ref>/process/spawn", methods=["POST"])
@blp.arguments(schemas.SpawnSchema)
@blp.response(200, schemas.SpawnedSchema)
def spawn(args, session_ref):
    """Start a command and answer at once (a terminal with allocate_tty); follow it with stdout/stream"""
    not_as_root(args)
    return session_agent.call(find(session_ref), WHAT, "POST", "process/spawn", args)


def process_path(process_id, rest):
    return f"process/{session_agent.agent_id(process_id, 'process')}/{rest}"


@blp.route("/<session_ref>/process/<process_id>/status")
@blp.response(200, schemas.StatusSchema)
def status(session_ref, process_id):
    """Whether the process runs, its exit code, CPU and memory (an exited one stays visible 300 s)"""
    return session_agent.call(find(session_ref), WHAT, "GET", process_path(process_id, "status"))


@blp.route("/<session_ref>/process/<process_id>/stdin", methods=["POST"])
@blp.arguments(schemas.StdinSchema)
@blp.response(200, schemas.StdinWrittenSchema)
def stdin(args, session_ref, process_id):
    """Write bytes (base64) to the process's stdin, or its terminal"""
    return session_agent.call(find(session_ref), WHAT, "POST", process_path(process_id, "stdin"), args)


@blp.route("/<session_ref>/process/<process_id>/stdout/stream")
@blp.response(200, schemas.STDOUT_STREAM_DOC, content_type="text/event-stream")
def stdout_stream(session_ref, process_id):
    """The process's output (SSE), from what is kept of it, then its exit; resume with Last-Event-ID"""
    return session_agent.relayed_events(find(session_ref), WHAT, process_path(process_id, "stdout/stream"))


@blp.route("/<session_ref>/process/<process_id>/kill", methods=["POST"])
@blp.arguments(schemas.KillSchema)
@blp.response(200, OkSchema)
def kill(args, session_ref, process_id):
    """Send the process a signal: TERM, KILL, INT or HUP"""
    return session_agent.call(find(session_ref), WHAT, "POST", process_path(process_id, "kill"), args)


@blp.route("/<session_ref>/process/<process_id>/resize", methods=["POST"])
@blp.arguments(schemas.ResizeSchema)
@blp.response(200, OkSchema)
def resize(args, session_ref, process_id):
    """Resize the process's terminal (400 no_tty for one started without allocate_tty)"""
    return session_agent.call(find(session_ref), WHAT, "POST", process_path(process_id, "resize"), args)
