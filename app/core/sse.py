"""Server-Sent Events: framing, headers and the response wrapper shared by every stream.

Every data frame is one JSON document (the SDK json-decodes each frame);
resumable frames carry `id:`; keepalives are comment lines, which the SDK ignores.
"""
import json

from flask import Response

from app.core import clock

HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
STREAM_DOC = {"type": "string", "description": "text/event-stream; each data: line is one JSON document"}


def frame(data, event_id=None):
    lines = [] if event_id is None else [f"id: {event_id}"]
    lines.append("data: " + json.dumps(data, separators=(",", ":")))
    return "\n".join(lines) + "\n\n"


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
    """A streaming response over a generator of frames.

    It opens with a comment: servers send the status and headers with the first
    chunk, so without one a client would wait for the first event (or keepalive).
    The generator owns its clean-up in try/finally: when the client goes away,
    the server closes the response, which closes the generator and runs it.
    """
    return Response(_opened(frames), mimetype="text/event-stream", headers=HEADERS)


def _opened(frames):
    try:
        yield comment("stream open")
        yield from frames
    finally:
        close = getattr(frames, "close", None)
        if close:
            close()


def last_event_id(request):
    """The Last-Event-ID header as an int, or None when absent, 0 (the SSE way to say "none")
    or not a number; values beyond any id are capped."""
    value = request.headers.get("Last-Event-ID", "").strip()
    if not (value.isascii() and value.isdigit()):
        return None
    return min(int(value), 2**63 - 1) or None
