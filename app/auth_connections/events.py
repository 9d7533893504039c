"""GET /auth/connections/{id}/events: the flow's state now, then every change, until it ends."""
import time

from app.auth_connections import loginflow
from app.auth_connections.models import CANCELED, TERMINAL, AuthEvent, LoginFlow
from app.core import clock, shutdown, sse
from app.core.db import db
from app.streams import channels


def follow(connection, *, flow=None, heartbeat_seconds=15.0, poll_seconds=1.0):
    """Frames for one follower of the connection's newest flow (decided now, when the request is served).

    The first frame is the current state; state changes follow with their event id;
    `sse_heartbeat` frames keep an idle stream alive; the stream ends right after a
    terminal state (and with no frame when the connection never had a flow). With `flow`
    (the hosted page), that flow instead of the newest.
    """
    flow = flow or connection.current_flow()
    if flow is None:
        return iter(())
    if flow.is_overdue:
        flow = loginflow.expire(flow)
    latest = (AuthEvent.select().where(AuthEvent.flow == flow.id).order_by(AuthEvent.id.desc()).first())
    return _frames(connection.id, flow.id, latest, heartbeat_seconds, poll_seconds)


def _frames(connection_id, flow_id, latest, heartbeat_seconds, poll_seconds):
    subject = f"auth:{connection_id}"
    state = latest.data()
    yield sse.frame(state, latest.id)
    if state["flow_status"] in TERMINAL:
        return
    cursor = latest.id
    next_heartbeat = time.monotonic() + heartbeat_seconds
    while True:
        seen = channels().latest_seq(subject)
        with db.connection_context():
            flow = LoginFlow.get_or_none(LoginFlow.id == flow_id)
            if flow is not None and flow.is_overdue:
                loginflow.expire(flow)
            events = list(AuthEvent.select().where((AuthEvent.flow == flow_id) & (AuthEvent.id > cursor))
                          .order_by(AuthEvent.id))
        for event in events:
            state = event.data()
            yield sse.frame(state, event.id)
            cursor = event.id
            if state["flow_status"] in TERMINAL:
                return
        if flow is None:
            # The connection was deleted (with its flows): its flow ended canceled.
            yield sse.frame({"event": "managed_auth_state", "timestamp": clock.isoformat(clock.now()),
                             "flow_status": CANCELED, "flow_step": state["flow_step"],
                             "flow_type": state["flow_type"],
                             "error_code": "flow_canceled", "error_message": "The auth connection was deleted."})
            return
        now = time.monotonic()
        if events:
            next_heartbeat = now + heartbeat_seconds
        elif now >= next_heartbeat:
            yield sse.heartbeat()
            next_heartbeat = now + heartbeat_seconds
        channels().wait(subject, seen, timeout=max(0.0, min(poll_seconds, next_heartbeat - now)))
        yield sse.IDLE
        if shutdown.stopping.is_set():
            yield sse.restarting()
            return
