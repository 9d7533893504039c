"""Server-Sent Events: framing, headers and the response wrapper shared by every stream.

Every data frame is one JSON document (the SDK json-decodes each frame);
resumable frames carry `id:`; keepalives are comment lines, which the SDK ignores.
"""
import socket

from flask import Response, g, request

from app.core import clock, streamslots
from app.core.jsonprovider import ascii_json

HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
STREAM_DOC = {"type": "string", "description": "text/event-stream; each data: line is one JSON document"}
# Yielded by a stream loop after each wait (never sent): the moment to notice a client that left.
IDLE = object()


def frame(data, event_id=None):
    return serialized_frame(ascii_json(data), event_id)


def serialized_frame(json_text, event_id=None):
    """The frame of a JSON document already serialised (one line): built once, sent to every reader."""
    return f"data: {json_text}\n\n" if event_id is None else f"id: {event_id}\ndata: {json_text}\n\n"


def cursor_only(event_id):
    """A frame with only an id: moves the client's Last-Event-ID past events it filtered out."""
    return f"id: {event_id}\n\n"


def heartbeat():
    """The JSON keepalive of the invocation and login-flow streams (their SDK models know it)."""
    return frame({"event": "sse_heartbeat", "timestamp": clock.isoformat(clock.now())})


def restarting():
    """The last frame of an invocation or login-flow stream when the worker stops."""
    return frame({"event": "error", "timestamp": clock.isoformat(clock.now()),
                  "error": {"code": "server_restarting",
                            "message": "The server is restarting; follow again to resume."}})


def comment(text="keepalive"):
    return f": {text}\n\n"


def stream(frames):
    """A streaming response over a generator of frames, admitted under this worker's stream caps.

    It opens with a comment: servers send the status and headers with the first
    chunk, so without one a client would wait for the first event (or keepalive).
    The generator owns its clean-up in try/finally: when the client goes away,
    the server closes the response, which closes the generator and runs it. An
    idle stream writes nothing for a heartbeat interval, so a client that left is
    noticed at each `IDLE` from the loop instead (about once a poll interval) and
    its slot is given back then.
    """
    slot = streamslots.admit(g.org.id if "org" in g else None)
    response = Response(_opened(frames, request.environ.get("gunicorn.socket")),
                        mimetype="text/event-stream", headers=HEADERS)
    response.call_on_close(slot.release)  # also when the body is never iterated
    return response


def _opened(frames, client):
    try:
        yield comment("stream open")
        for item in frames:
            if item is not IDLE:
                yield item
            elif _gone(client):
                return
    finally:
        close = getattr(frames, "close", None)
        if close:
            close()


def _gone(client):
    """True once the peer closed its side: readable with nothing to read. A non-blocking peek, not
    select(), which refuses descriptors past 1023: a worker with a thousand streams open would have
    taken every later one for gone and closed it without a word."""
    if client is None:
        return False
    timeout = client.gettimeout()
    client.settimeout(0.0)
    try:
        return not client.recv(1, socket.MSG_PEEK)
    except BlockingIOError:
        return False  # nothing to read: still there
    except ValueError:
        return False  # a TLS socket takes no flags: a client that left is noticed at the next write
    except OSError:
        return True
    finally:
        client.settimeout(timeout)


def last_event_id(request):
    """The Last-Event-ID header as an int, or None when absent, 0 (the SSE way to say "none")
    or not a number; values beyond any id are capped."""
    value = request.headers.get("Last-Event-ID", "").strip()
    if not (value.isascii() and value.isdigit()):
        return None
    return min(int(value), 2**63 - 1) or None
