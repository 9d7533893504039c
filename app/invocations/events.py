"""GET /invocations/{id}/events: stored events, then live ones, until the terminal state."""
import time

from app.core import clock, sse
from app.core.db import db
from app.invocations import lifecycle
from app.invocations.models import Invocation, InvocationEvent
from app.projects.models import Project
from app.streams import channels

BATCH = 200


def follow(invocation, project, *, since=None, after_id=None, heartbeat_seconds=15.0, poll_seconds=1.0):
    """Frames for one follower.

    Without `after_id` (Last-Event-ID) the stored events replay first, log lines
    filtered by `since`; with it, everything after that id. Live events follow.
    The generator holds no database connection while it waits: each poll opens a
    short one. It returns right after the terminal invocation_state frame.
    """
    subject = invocation.subject
    deadline = invocation.deadline
    cursor = after_id or 0
    with db.connection_context():
        replay_until = (InvocationEvent.select(InvocationEvent.id).where(InvocationEvent.invocation == invocation.id)
                        .order_by(InvocationEvent.id.desc()).scalar() or 0)
    since_filter = since if after_id is None else None
    next_heartbeat = time.monotonic() + heartbeat_seconds
    while True:
        # Read the channel position before the database, so an event committed
        # after the query still wakes the wait below.
        seen = channels().latest_seq(subject)
        with db.connection_context():
            if deadline is not None and clock.now() >= deadline:
                lifecycle.expire_overdue(project)
            events = list(_after(invocation.id, cursor, since_filter, replay_until))
        for event in events:
            yield sse.frame(event.data(), event.id)
            cursor = event.id
            if event.is_terminal_state:
                return
        if len(events) == BATCH:
            continue
        if events:
            next_heartbeat = time.monotonic() + heartbeat_seconds
        now = time.monotonic()
        if now >= next_heartbeat:
            yield sse.frame({"event": "sse_heartbeat", "timestamp": clock.isoformat(clock.now())})
            next_heartbeat = now + heartbeat_seconds
        channels().wait(subject, seen, timeout=max(0.0, min(poll_seconds, next_heartbeat - now)))


def _after(invocation_id, cursor, since, replay_until):
    query = InvocationEvent.select().where((InvocationEvent.invocation == invocation_id)
                                           & (InvocationEvent.id > cursor))
    if since is not None:
        query = query.where((InvocationEvent.kind == "state") | (InvocationEvent.timestamp >= since)
                            | (InvocationEvent.id > replay_until))
    return query.order_by(InvocationEvent.id).limit(BATCH)


def wait_until_terminal(invocation, limit_seconds, poll_seconds):
    """The invocation once terminal, or as it stands after `limit_seconds`.

    Waits on the channel (cooperative under gevent) without holding a database
    connection, re-reading the invocation after each wake-up or poll interval.
    """
    give_up = time.monotonic() + limit_seconds
    while not invocation.is_terminal:
        remaining = give_up - time.monotonic()
        if remaining <= 0:
            break
        seen = channels().latest_seq(invocation.subject)
        with db.connection_context():
            invocation = Invocation.get_by_id(invocation.id)
            if invocation.is_terminal:
                break
            if invocation.deadline is not None and clock.now() >= invocation.deadline:
                lifecycle.expire_overdue(Project.get_by_id(invocation.project_id))
                continue
        channels().wait(invocation.subject, seen, timeout=min(poll_seconds, remaining))
    return invocation
