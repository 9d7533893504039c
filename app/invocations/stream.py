"""GET /invocations/{id}/events: stored events, then live ones, until the terminal state."""
from app.core import sse
from app.core.db import db
from app.invocations import lifecycle
from app.invocations.models import TERMINAL, Invocation, InvocationEvent
from app.orgs.models import Project
from app.streams import channels
from app.streams.follow import DONE, MORE, WAIT, Batch, Reader, follow_loop, wait_for
from app.streams.tail import SharedTail, Tails

BATCH = 200
# Per process: the shared tail of each followed invocation.
tails = Tails()


def follow(invocation, project, *, since=None, after_id=None, heartbeat_seconds=15.0, poll_seconds=1.0):
    """Frames for one follower.

    Without `after_id` (Last-Event-ID) the stored events replay first, log lines
    filtered by `since`; with it, everything after that id. Live events follow,
    read through the subject's SharedTail. The stream holds no database connection
    while it waits, ends right after the terminal invocation_state frame, and gives
    its tail back when the client goes away.
    """
    cursor = after_id or 0
    with db.connection_context():
        newest = _newest_id(invocation.id)
        finished = Invocation.get_by_id(invocation.id).is_terminal
    if finished and cursor >= newest:
        return iter(())  # resumed after the last event of a finished invocation: nothing will follow
    reader = _EventReader(invocation, project, cursor, since if after_id is None else None, newest, poll_seconds)
    return follow_loop(reader, heartbeat_seconds=heartbeat_seconds, poll_seconds=poll_seconds)


class _EventReader(Reader):
    def __init__(self, invocation, project, cursor, since, newest, poll_seconds):
        self.invocation, self.project = invocation, project
        self.subject = invocation.subject
        self.cursor, self.since, self.newest = cursor, since, newest
        self.poll_seconds = poll_seconds
        # Until the replay is done, this follower reads on its own (the since filter
        # applies up to `newest`); after it, through the tail shared with the others.
        self.replaying = since is not None or cursor < newest
        self.tail = None

    def open(self):
        invocation_id, newest = self.invocation.id, self.newest
        self.tail = tails.acquire(self.subject, lambda: SharedTail(lambda after: _fetch(invocation_id, after),
                                                                   floor=newest, batch=BATCH))

    def read(self):
        seen = channels().latest_seq(self.subject)
        if self.invocation.is_overdue:
            with db.connection_context():
                lifecycle.expire_overdue(self.project)
        if self.replaying:
            events = _fetch(self.invocation.id, self.cursor, since=self.since, replay_until=self.newest)
            caught_up = len(events) < BATCH
        else:
            events = self.tail.after(self.cursor, seen, self.poll_seconds)
            caught_up = events is not None
            if events is None:  # behind the shared tail (it was trimmed): read on our own
                events = _fetch(self.invocation.id, self.cursor)
                caught_up = len(events) < BATCH
        frames = []
        for event_id, data in events:
            frames.append(sse.frame(data, event_id))
            self.cursor = event_id
            if data["event"] == "invocation_state" and data["invocation"]["status"] in TERMINAL:
                return Batch(frames, DONE)
        if self.replaying and caught_up:
            # Everything up to `newest` was delivered or filtered out by `since`.
            self.replaying, self.cursor = False, max(self.cursor, self.newest)
        return Batch(frames, WAIT if caught_up else MORE)

    def keepalive(self):
        return sse.heartbeat()

    def ending(self):
        return sse.restarting()

    def close(self):
        tails.release(self.subject, self.tail)


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
    """The invocation once terminal, or as it stands after `limit_seconds` (or when the server stops),
    waiting on its subject without holding a database connection."""

    def terminal():
        with db.connection_context():
            current = Invocation.get_by_id(invocation.id)
            if current.is_overdue:
                lifecycle.expire_overdue(Project.get_by_id(current.project_id))
                current = Invocation.get_by_id(invocation.id)
        return current if current.is_terminal else None

    if invocation.is_terminal:
        return invocation
    found = wait_for(invocation.subject, terminal, limit_seconds=limit_seconds, poll_seconds=poll_seconds)
    if found is None:
        with db.connection_context():
            found = Invocation.get_by_id(invocation.id)
    return found
