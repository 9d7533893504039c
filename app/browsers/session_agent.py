"""The app's calls of a session's agent (browserhost/agent): the program inside the session's sandbox that serves
its files and processes as the session's user. They go through the session's host (HostClient.agent, the route
lantern_wire.control.SESSION_AGENT), which forwards them as they are, bodies and answers streamed; a refusal becomes
the API's error in one place (host_errors.api_error), with the agent's `room_bytes` when a write did not fit.

A call holds no database connection while the agent works (a write of a large file, an exec of minutes), and one
that moves bytes for long, an event stream's frames included, is the session's activity all along (kept_active), as
computer actions are. Every streamed answer gives its host connection back when the client's response closes.
"""
import logging
import re
import socket
import time
from urllib.parse import urlencode

from flask import Response, current_app, g, request
from werkzeug.exceptions import MethodNotAllowed

from app.browsers import lifecycle
from app.browsers.computer import ACTIVITY_SHARE, record_activity, require_host_driver
from app.browsers.host_client import HostClient, HostError
from app.browsers.host_errors import api_error
from app.core import sse, streamslots
from app.core.db import db
from app.core.errors import error_response, not_found

logger = logging.getLogger(__name__)

# The longest the app waits for the agent's next bytes: its event streams send a keep-alive every 15 s and exec a
# space every 10 s while its process runs, so only a stuck host or agent is this quiet.
WAIT_SECONDS = 60
# What an answer streamed without a length of its own may come to (an event stream, a folder's zip): no bound of
# the app's, as none is held.
UNBOUNDED = 2**62
ID = re.compile(r"[A-Za-z0-9_-]{1,128}")


def session_host(session, what):
    """The HostClient of the session's host; 501 for a session another driver runs, 404 for one no host runs."""
    require_host_driver(session, what)
    if session.host is None:
        raise not_found(f"Browser session {session.id!r} has no running browser.", code="browser_not_found")
    return HostClient(session.host)


def call(session, what, method, path, body=None, *, query=None):
    """The agent's JSON answer to `method path` (None for an empty one), `body` sent as JSON."""
    client = session_host(session, what)
    db.close()  # given back to the pool while the agent works; the request's teardown copes with a closed one
    try:
        return client.agent_json(session.id, method, path, body, query=query_string(query), timeout=WAIT_SECONDS)
    except HostError as error:
        raise api_error(error) from None
    finally:
        db.connect(reuse_if_open=True)


def open_stream(session, what, method, path, body=None, *, query=None, limit=UNBOUNDED, **options):
    """The agent's answer to `method path` as a StreamedAnswer, once it accepted the call; `body` (bytes, a binary
    file or an iterable of bytes) streamed to it, `options` as HostClient.stream's (length, content_type,
    headers)."""
    client = session_host(session, what)
    db.close()
    try:
        return client.agent(session.id, method, path, body, query=query_string(query), limit=limit,
                            timeout=WAIT_SECONDS, **options)
    except HostError as error:
        raise api_error(error) from None
    finally:
        db.connect(reuse_if_open=True)


def agent_id(value, what):
    """A process's or watch's id as it goes into the path forwarded to the agent: nothing (".", "/", "?", "%") that
    could make it another path; 404 otherwise, as for an id the agent does not know."""
    if not ID.fullmatch(value):
        raise not_found(f"No {what} {value[:128]!r} in this session.")
    return value


def relayed_events(session, what, path):
    """The agent's event stream at `path` (SSE), relayed as it comes, from the client's Last-Event-ID. Its stream
    slot (503 too_many_streams past the caps) is taken before the agent is asked for anything."""
    last = request.headers.get("Last-Event-ID", "").strip()
    headers = {"Last-Event-ID": last} if last.isascii() and last.isdigit() else {}
    slot = streamslots.admit(g.org.id if "org" in g else None)
    try:
        answer = open_stream(session, what, "GET", path, headers=headers)
    except BaseException:
        slot.release()
        raise
    # Opened with a comment: the client has the headers at once, not at the agent's first frame.
    response = relayed(session, answer, answer.as_it_comes(), "text/event-stream", sse.HEADERS,
                       first=sse.comment("stream open").encode())
    response.call_on_close(slot.release)
    return response


def relayed(session, answer, chunks, mimetype, headers=None, *, first=None):
    """A response passing on `chunks` of the agent's `answer` (a StreamedAnswer) as they come, kept active; the
    answer's host connection is closed with the response, whether its body was read whole, in part or not at all."""
    response = Response(kept_active(session, chunks, first=first), mimetype=mimetype, headers=headers)
    response.call_on_close(answer.close)
    return response


def refuse_head():
    """HEAD of a GET route would have the agent send a whole file (or stream) for nobody: it is not served."""
    if request.method == "HEAD":
        raise MethodNotAllowed(valid_methods=["GET"])


def query_string(values):
    given = {name: value for name, value in (values or {}).items() if value is not None}
    return f"?{urlencode(given)}" if given else ""


def kept_active(session, chunks, *, first=None):
    """`chunks` (a request's body or an agent's answer) passed on as they come, after `first` if given, the session's
    activity recorded (lifecycle.touch) at most every ACTIVITY_SHARE of its timeout while they flow and once at
    their end: a long transfer, an exec whose answer trickles in, or an event stream (its keep-alives too) keeps its
    session from timing out under it. It runs in a view or after one returned (an answer's body): the app context
    and the database connection are its own. An answer the host stops part-way is logged in one line and its client's
    connection cut (a short body must not look whole); `chunks` is closed however it ends."""
    app = current_app._get_current_object()  # Flask's documented way to keep the app beyond its context
    client = request.environ.get("gunicorn.socket")
    every = session.timeout_seconds * ACTIVITY_SHARE

    def flowing():
        touched = time.monotonic()
        try:
            if first is not None:
                yield first
            for chunk in chunks:
                if time.monotonic() - touched >= every:
                    record_activity(app, session, lifecycle.touch)
                    touched = time.monotonic()
                yield chunk
        except HostError as error:
            logger.warning("session %s: its agent's answer stopped part-way: %s", session.id, error)
            cut(client)
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()
            record_activity(app, session, lifecycle.touch)

    return flowing()


def cut(client):
    """Close the client's connection under its response: a body ended short must not end as a whole one would."""
    if client is None:  # not served by gunicorn (tests): the body just ends
        return
    try:
        client.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already gone


def refusal_response(error):
    """The error body of an agent's refusal (host_errors.AgentRefusal), its fields (room_bytes) beside its code."""
    response = error_response(error.status, error.code, error.message, headers=error.headers)
    if error.fields:
        response.set_data(current_app.json.dumps({**response.get_json(), **error.fields}))
    return response
