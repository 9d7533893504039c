"""The live view: a page where a person watches a session's screen and clicks and types into it
(static/live_view.html), authorised like the CDP endpoint (the session's token in its URL).

The page is built from Chromium's own parts, no video protocol of ours: it connects to the session's CDP
relay at /browsers/{id}/cdp/live_view (the relay of /cdp, under its path so that it works wherever CDP does:
behind nginx, the /cdp location takes it), shows the active page with `Page.startScreencast` and sends what
the person does as `Input.dispatch*` events. It shows the page's viewport only, as a kiosk would: the
computer API's screen. A viewer's connection is activity (a CDP client, as any), and comes and goes as the
SDK's `live_view_connect` and `live_view_disconnect` telemetry events (category `connection`).
"""
import time
from pathlib import Path

from app.browsers import control_events

PAGE = (Path(__file__).parent / "static" / "live_view.html").read_text()
HEADERS = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}


def watchers(session):
    """(on_open, on_close) for the relay of a live view's connection: its telemetry events."""
    opened = []

    def on_open():
        opened.append(time.monotonic())
        control_events.record(session, [control_events.event("live_view_connect", "connection",
                                                             {"session_id": session.id})])

    def on_close():
        duration_ms = (time.monotonic() - opened[0]) * 1000
        control_events.record(session, [control_events.event("live_view_disconnect", "connection", {
            "session_id": session.id, "duration_ms": round(duration_ms, 3)})])

    return on_open, on_close
