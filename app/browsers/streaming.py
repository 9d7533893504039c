"""The telemetry stream (spec part 6, rules 1-8) and the log stream of a browser session.

Both run as generators after the view returned: they hold no database connection
while waiting, open a short one when they must look, and end when the session
ends (deleted, or timed out: a stream that sees its session past the idle
deadline ends it). What a stream learns of its session comes from `SessionWatch`,
one database read per session per poll interval for all its streams in this process.
"""
import threading
import time
from dataclasses import dataclass
from datetime import datetime

from app.browsers import logs, sessions, telemetry
from app.browsers.models import BrowserSession
from app.core import clock, shutdown, sse
from app.core.db import db
from app.streams import channels, telemetry_buffers

LOG_BATCH = 500


@dataclass(frozen=True)
class SessionState:
    ended: bool
    idle_deadline: datetime
    last_seq: int


class SessionWatch:
    """The state of followed sessions, re-read at most once per `max_age` seconds per session.

    One reader per session queries while the others of that session wait for its
    answer; nobody holds a lock shared across sessions while waiting for a database
    connection (callers hold no connection when they ask).
    """

    def __init__(self):
        self._states = {}
        self._locks = {}
        self._lock = threading.Lock()

    def state(self, session_id, max_age):
        with self._lock:
            session_lock = self._locks.setdefault(session_id, threading.Lock())
        with session_lock:
            read_at, state = self._states.get(session_id, (0.0, None))
            if state is None or time.monotonic() - read_at >= max_age:
                with db.connection_context():
                    row = (BrowserSession.select(BrowserSession.deleted_at, BrowserSession.idle_deadline,
                                                 BrowserSession.last_seq)
                           .where(BrowserSession.id == session_id).first())
                state = SessionState(row.deleted_at is not None, row.idle_deadline, row.last_seq)
                with self._lock:
                    self._states[session_id] = (time.monotonic(), state)
            return state

    def forget(self, session_id):
        with self._lock:
            self._states.pop(session_id, None)
            self._locks.pop(session_id, None)


watch = SessionWatch()


def _still_running(session, state):
    """False once the session has ended; ends it first if it is past its idle deadline."""
    if state.ended:
        return False
    if clock.now() >= state.idle_deadline:
        with db.connection_context():
            return not sessions.end_if_idle(session)
    return True


def follow_telemetry(session, *, last_event_id=None, replay_all=False, types=None,
                     heartbeat_seconds=15.0, poll_seconds=1.0):
    """Frames of the telemetry stream, from a start decided now (when the request is served).

    Start: after `last_event_id` when given (it wins over replay; an evicted seq starts
    at the oldest retained event), else the oldest retained with `replay_all`, else
    only events newer than this call. Frames are `id: seq` + `data: envelope`; events
    filtered out by `types` advance the cursor with an id-only frame instead of a
    keepalive comment.
    """
    subject = session.telemetry_subject
    buffers = telemetry_buffers()
    db.close()  # the request's connection: a stream holds none while it waits (teardown copes)
    state = watch.state(session.id, max_age=0)
    if state.ended:
        return _archived_frames(session, last_event_id, replay_all, types, buffers.capacity)
    with db.connection_context():
        telemetry.catch_up(session.id, subject, state.last_seq)
    newest = buffers.latest_seq(subject)
    if last_event_id is not None:
        cursor = min(last_event_id, newest)
    else:
        cursor = 0 if replay_all else newest
    return _live_frames(session, cursor, types, heartbeat_seconds, poll_seconds)


def _live_frames(session, cursor, types, heartbeat_seconds, poll_seconds):
    subject = session.telemetry_subject
    buffers = telemetry_buffers()
    skipped = False
    next_keepalive = time.monotonic() + heartbeat_seconds
    while True:
        seen = buffers.latest_seq(subject)
        for seq, (event_type, frame) in buffers.read_after(subject, cursor):
            cursor = seq
            if types and event_type not in types:
                skipped = True
                continue
            yield frame
            skipped, next_keepalive = False, time.monotonic() + heartbeat_seconds
        now = time.monotonic()
        if now >= next_keepalive:
            yield f"id: {cursor}\n\n" if skipped else sse.comment()
            skipped, next_keepalive = False, now + heartbeat_seconds
        buffers.wait(subject, seen, timeout=max(0.0, min(poll_seconds, next_keepalive - now)))
        yield sse.IDLE
        if shutdown.stopping.is_set():
            return  # clients resume with Last-Event-ID
        discarded = buffers.latest_seq(subject) < seen
        state = watch.state(session.id, max_age=0 if discarded else poll_seconds)
        if not _still_running(session, state):
            # Events that arrived before the end, then close; this worker's copies go too.
            with db.connection_context():
                rest = telemetry.archived(session.id, cursor)
            forget(session)
            for seq, event_type, body in rest:
                if not types or event_type in types:
                    yield telemetry.envelope_frame(seq, body)
            return
        if state.last_seq > buffers.latest_seq(subject):
            with db.connection_context():
                telemetry.catch_up(session.id, subject, state.last_seq)


def forget(session):
    """Drop what this process keeps for an ended session (other workers did not end it)."""
    telemetry_buffers().discard(session.telemetry_subject)
    channels().discard(session.logs_subject)
    watch.forget(session.id)


def _archived_frames(session, last_event_id, replay_all, types, capacity):
    """A stream opened on an ended session: what a resume or replay would still see, from the archive."""
    if last_event_id is None and not replay_all:
        return
    with db.connection_context():
        newest = BrowserSession.get_by_id(session.id).last_seq
        floor = last_event_id if last_event_id is not None else 0
        rows = telemetry.archived(session.id, max(floor, newest - capacity))
    for seq, event_type, body in rows:
        if not types or event_type in types:
            yield telemetry.envelope_frame(seq, body)


def follow_logs(session, *, source, log_name, follow=True, last_event_id=None, replay_lines=1000,
                heartbeat_seconds=15.0, poll_seconds=1.0):
    """`log` frames of one log: the newest `replay_lines` stored lines (or those after
    Last-Event-ID), then, with `follow`, new lines until the session ends."""
    subject = session.logs_subject
    with db.connection_context():
        cursor = (last_event_id if last_event_id is not None
                  else logs.replay_floor(session.id, source, log_name, replay_lines))
    next_keepalive = time.monotonic() + heartbeat_seconds
    while True:
        seen = channels().latest_seq(subject)
        with db.connection_context():
            lines = logs.lines_after(session.id, source, log_name, cursor, LOG_BATCH)
        for line_id, data in lines:
            yield sse.frame(data, line_id)
            cursor = line_id
        if len(lines) == LOG_BATCH:
            continue
        if lines:
            next_keepalive = time.monotonic() + heartbeat_seconds
        if not follow:
            return
        state = watch.state(session.id, max_age=poll_seconds)
        if not _still_running(session, state):
            with db.connection_context():
                rest = logs.lines_after(session.id, source, log_name, cursor, LOG_BATCH)
            if rest:
                continue  # deliver the lines that came before the end, then close
            forget(session)
            return
        now = time.monotonic()
        if now >= next_keepalive:
            yield sse.comment()
            next_keepalive = now + heartbeat_seconds
        woke = channels().wait(subject, seen, timeout=max(0.0, min(poll_seconds, next_keepalive - now)))
        yield sse.IDLE
        if shutdown.stopping.is_set():
            return
        if woke and channels().latest_seq(subject) <= seen:
            watch.state(session.id, max_age=0)  # woken by the end: look now
