"""GET /invocations/{id}/events: stored events, then live ones, until the terminal state."""
import time

from app.core import shutdown, sse
from app.core.db import db
from app.invocations import lifecycle
from app.invocations.models import TERMINAL, Invocation, InvocationEvent
from app.projects.models import Project
from app.streams import channels
from app.streams.tail import SharedTail, Tails

BATCH = 200
# Per process: the shared tail of each followed invocation.
tails = Tails()


def follow(invocation, project, *, since=None, after_id=None, heartbeat_seconds=15.0, poll_seconds=1.0):
    """Frames for one follower.

    Without `after_id` (Last-Event-ID) the stored events replay first, log lines
    filtered by `since`; with it, everything after that id. Live events follow,
    read through the subject's SharedTail. The generator holds no database
    connection while it waits, returns right after the terminal invocation_state
    frame, and gives its tail back in `finally` when the client goes away.
    """
    subject = invocation.subject
    cursor = after_id or 0
    with db.connection_context():
        newest = _newest_id(invocation.id)
        finished = Invocation.get_by_id(invocation.id).is_terminal
    if finished and cursor >= newest:
        return  # resumed after the last event of a finished invocation: nothing will follow
    since_filter = since if after_id is None else None
    # Until the replay is done, this follower reads on its own (the since filter
    # applies up to `newest`); after it, through the tail shared with the others.
    replaying = since_filter is not None or cursor < newest
    tail = tails.acquire(subject, lambda: SharedTail(lambda after: _fetch(invocation.id, after),
                                                     floor=newest, batch=BATCH))
    next_heartbeat = time.monotonic() + heartbeat_seconds
    try:
        while True:
            # Read the channel position before the database, so an event committed
            # after the read still wakes the wait below.
            seen = channels().latest_seq(subject)
            if invocation.is_overdue:
                with db.connection_context():
                    lifecycle.expire_overdue(project)
            if replaying:
                events = _fetch(invocation.id, cursor, since=since_filter, replay_until=newest)
                caught_up = len(events) < BATCH
            else:
                events = tail.after(cursor, seen, poll_seconds)
                caught_up = events is not None
                if events is None:  # behind the shared tail (it was trimmed): read on our own
                    events = _fetch(invocation.id, cursor)
                    caught_up = len(events) < BATCH
            for event_id, data in events:
                yield sse.frame(data, event_id)
                cursor = event_id
                if data["event"] == "invocation_state" and data["invocation"]["status"] in TERMINAL:
                    return
            if replaying and caught_up:
                # Everything up to `newest` was delivered or filtered out by `since`.
                replaying, cursor = False, max(cursor, newest)
            if not caught_up:
                continue
            if events:
                next_heartbeat = time.monotonic() + heartbeat_seconds
            now = time.monotonic()
            if now >= next_heartbeat:
                yield sse.heartbeat()
                next_heartbeat = now + heartbeat_seconds
            channels().wait(subject, seen, timeout=max(0.0, min(poll_seconds, next_heartbeat - now)))
            yield sse.IDLE
            if shutdown.stopping.is_set():
                yield sse.restarting()
                return
    finally:
        tails.release(subject, tail)


def _newest_id(invocation_id):
    return (InvocationEvent.select(InvocationEvent.id).where(InvocationEvent.invocation == invocation_id)
            .order_by(InvocationEvent.id.desc()).scalar() or 0)


def _fetch(invocation_id, cursor, since=None, replay_until=0):
    """[(id, data)] of the events above `cursor`; log lines up to `replay_until` only from `since`."""
    query = InvocationEvent.select().where((InvocationEvent.invocation == invocation_id)
                                           & (InvocationEvent.id > cursor))
    if since is not None:
        query = query.where((InvocationEvent.kind == "state") | (InvocationEvent.timestamp >= since)
                            | (InvocationEvent.id > replay_until))
    with db.connection_context():
        return [(event.id, event.data()) for event in query.order_by(InvocationEvent.id).limit(BATCH)]


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
            if invocation.is_overdue:
                lifecycle.expire_overdue(Project.get_by_id(invocation.project_id))
                continue
        channels().wait(invocation.subject, seen, timeout=min(poll_seconds, remaining))
        if shutdown.stopping.is_set():
            break
    return invocation
