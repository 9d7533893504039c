"""GET /auth/connections/{id}/events: the flow's state now, then every change, until it ends."""
from app.auth_connections import loginflow
from app.auth_connections.models import CANCELED, TERMINAL, AuthConnection, AuthEvent, LoginFlow
from app.core import clock, sse
from app.core.db import db
from app.streams.follow import DONE, MORE, WAIT, Batch, Reader, follow_loop


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
    return follow_loop(_FlowReader(connection.id, flow.id, latest), heartbeat_seconds=heartbeat_seconds,
                       poll_seconds=poll_seconds)


class _FlowReader(Reader):
    def __init__(self, connection_id, flow_id, latest):
        self.subject = AuthConnection.subject_of(connection_id)
        self.flow_id = flow_id
        self.latest = latest  # the first frame; then what was read after it
        self.cursor = None
        self.state = None

    def read(self):
        if self.cursor is None:
            self.state, self.cursor = self.latest.data(), self.latest.id
            # MORE: read again at once, for what committed since `latest` was read.
            return Batch([sse.frame(self.state, self.cursor)], DONE if self.state["flow_status"] in TERMINAL else MORE)
        with db.connection_context():
            flow = LoginFlow.get_or_none(LoginFlow.id == self.flow_id)
            if flow is not None and flow.is_overdue:
                loginflow.expire(flow)
            events = list(AuthEvent.select().where((AuthEvent.flow == self.flow_id) & (AuthEvent.id > self.cursor))
                          .order_by(AuthEvent.id))
        frames = []
        for event in events:
            self.state, self.cursor = event.data(), event.id
            frames.append(sse.frame(self.state, event.id))
            if self.state["flow_status"] in TERMINAL:
                return Batch(frames, DONE)
        if flow is None:
            # The connection was deleted (with its flows): its flow ended canceled.
            frames.append(sse.frame({
                "event": "managed_auth_state", "timestamp": clock.isoformat(clock.now()), "flow_status": CANCELED,
                "flow_step": self.state["flow_step"], "flow_type": self.state["flow_type"],
                "error_code": "flow_canceled", "error_message": "The auth connection was deleted."}))
            return Batch(frames, DONE)
        return Batch(frames, WAIT)

    def keepalive(self):
        return sse.heartbeat()

    def ending(self):
        return sse.restarting()
