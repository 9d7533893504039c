"""Telemetry the app writes itself (source kind kernel_api) about what drives a session's browser through
Lantern: each call of the computer and replays APIs as the SDK's `api_call` (category `control`), a screenshot
taken through the API as `monitor_screenshot` (category `screenshot`), a live view's viewers as
`live_view_connect` / `live_view_disconnect` (category `connection`). Each is kept only when the session's
telemetry settings keep its category (no drop is counted for what was never asked for), and none is activity.
`event` also builds app/browsers/lost_hosts.py's service_crashed."""
import base64

from app.browsers import telemetry
from app.browsers.telemetry_settings import captured
from app.core import clock
from app.core.db import db
from app.core.errors import ApiError


def event(kind, category, data, *, source_event=None, metadata=None):
    """An event the app writes itself (source kind kernel_api), as of now."""
    source = {"kind": "kernel_api", "event": source_event or kind, **({"metadata": metadata} if metadata else {})}
    return {"type": kind, "category": category, "ts": clock.micros(clock.now()), "source": source, "data": data}


def api_call(operation_id, status, duration_ms, request_id):
    return event("api_call", "control", {"operation_id": operation_id, "status": status, "request_id": request_id,
                                         "duration_ms": round(duration_ms, 3)})


def monitor_screenshot(png):
    return event("monitor_screenshot", "screenshot", {"png": base64.b64encode(png).decode()})


def record(session, events):
    """Archive and publish those of `events` the session's telemetry keeps (in a connection of its own when the
    caller holds none: a relay gives its own back for the length of a splice)."""
    config = session.options.get("telemetry") or {}
    kept = [each for each in events if captured(each, config)]
    if not kept:
        return
    if db.is_closed():
        with db.connection_context():
            _ingest(session, kept)
    else:
        _ingest(session, kept)


def _ingest(session, events):
    try:
        telemetry.ingest(session, events, activity=False)
    except ApiError:
        pass  # the session ended meanwhile: nothing to record it on
