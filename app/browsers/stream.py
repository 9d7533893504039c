"""The telemetry stream (spec part 6, rules 1-8) and the log stream of a browser session.

Both are Readers of the one follow loop (app/streams/follow.py), run after the view
returned: they hold no database connection while waiting, open a short one when they
must look, and end when the session ends (deleted, or timed out: a stream that sees its
session past the idle deadline ends it). What a stream learns of its session comes from
`SessionWatch`, one database read per session per poll interval for all its streams in
this process, or at once when the session's end is announced.
"""
import threading
import time
from dataclasses import dataclass
from datetime import datetime

from flask import current_app

from app import streams
from app.browsers import lifecycle, logs, telemetry
from app.browsers.models import BrowserSession
from app.core import clock, sse
from app.core.db import db
from app.streams import channels, telemetry_buffers
from app.streams.follow import DONE, MORE, WAIT, Batch, Reader, follow_loop

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


def _still_running(session, state, app):
    """False once the session has ended; ends it first if it is past its idle deadline. Streams run after
    their view returned, outside its app context: ending the session (which stops its browser, reading the
    app's configuration) gets one of its own."""
    if state.ended:
        return False
    if clock.now() >= state.idle_deadline:
        with app.app_context(), db.connection_context():
            return not lifecycle.end_if_idle(session)
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
    return follow_loop(_TelemetryReader(session, cursor, types, poll_seconds),
                       heartbeat_seconds=heartbeat_seconds, poll_seconds=poll_seconds)


class _TelemetryReader(Reader):
    """Reads this process's buffer of the session (filled by ingest here, or from the archive when
    another process wrote: app/browsers/telemetry.py), and closes the stream once the session ended."""

    def __init__(self, session, cursor, types, poll_seconds):
        self.app = current_app._get_current_object()  # Flask's documented way to keep the app beyond its context
        self.session, self.subject = session, session.telemetry_subject
        self.cursor, self.types, self.poll_seconds = cursor, types, poll_seconds
        self.skipped = False  # events filtered out since the last frame: the keepalive carries the cursor

    def read(self):
        buffers = telemetry_buffers()
        ended_here = _ended_here(self.subject)
        frames = []
        for seq, (event_type, frame) in buffers.read_after(self.subject, self.cursor):
            self.cursor = seq
            if self.types and event_type not in self.types:
                self.skipped = True
                continue
            frames.append(frame)
            self.skipped = False
        state = watch.state(self.session.id, max_age=0 if ended_here else self.poll_seconds)
        if not _still_running(self.session, state, self.app):
            # Events that arrived before the end, then close; this worker's copies go too.
            with db.connection_context():
                rest = telemetry.archived(self.session.id, self.cursor)
            forget(self.session)
            frames += [telemetry.envelope_frame(seq, body) for seq, event_type, body in rest
                       if not self.types or event_type in self.types]
            return Batch(frames, DONE)
        if state.last_seq > buffers.latest_seq(self.subject):
            with db.connection_context():
                telemetry.catch_up(self.session.id, self.subject, state.last_seq)
            return Batch(frames, MORE)
        return Batch(frames, WAIT)

    def keepalive(self):
        frame = sse.cursor_only(self.cursor) if self.skipped else sse.comment()
        self.skipped = False
        return frame


def _ended_here(subject):
    """True when the subject's channel was discarded since the last look (its session ended, or
    nobody used it for a while: either way, look at the session now); it exists again after."""
    gone = subject not in channels()
    channels().ensure(subject)
    return gone


def _on_telemetry_wakeup(subject, seq, ended):
    """Another process took in telemetry of a session followed here (or ended it): bring the
    buffer up to date before the followers wake, one archive read for all of them."""
    if ended:
        telemetry_buffers().discard(subject)
        return
    if telemetry_buffers().latest_seq(subject) < seq:
        with db.connection_context():
            telemetry.catch_up(subject.partition(":")[2], subject, seq)


streams.on_wakeup("telemetry", _on_telemetry_wakeup)


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
    with db.connection_context():
        cursor = (last_event_id if last_event_id is not None
                  else logs.replay_floor(session.id, source, log_name, replay_lines))
    return follow_loop(_LogReader(session, source, log_name, cursor, follow, poll_seconds),
                       heartbeat_seconds=heartbeat_seconds, poll_seconds=poll_seconds)


class _LogReader(Reader):
    def __init__(self, session, source, log_name, cursor, follow, poll_seconds):
        self.app = current_app._get_current_object()
        self.session, self.subject = session, session.logs_subject
        self.source, self.log_name = source, log_name
        self.cursor, self.follow, self.poll_seconds = cursor, follow, poll_seconds

    def read(self):
        ended_here = _ended_here(self.subject)
        with db.connection_context():
            lines = logs.lines_after(self.session.id, self.source, self.log_name, self.cursor, LOG_BATCH)
        frames = [sse.frame(data, line_id) for line_id, data in lines]
        if lines:
            self.cursor = lines[-1][0]
        if len(lines) == LOG_BATCH:
            return Batch(frames, MORE)
        if not self.follow:
            return Batch(frames, DONE)
        state = watch.state(self.session.id, max_age=0 if ended_here else self.poll_seconds)
        if not _still_running(self.session, state, self.app):
            with db.connection_context():
                rest = logs.lines_after(self.session.id, self.source, self.log_name, self.cursor, 1)
            if rest:
                return Batch(frames, MORE)  # deliver the lines that came before the end, then close
            forget(self.session)
            return Batch(frames, DONE)
        return Batch(frames, WAIT)
