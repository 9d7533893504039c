"""Log lines of a session's logs (files by path, supervised processes by name).

The driver delivers them (the host, or the external driver's browser posts them); they
are stored so a stream can replay them, and announced on the session's logs subject.
"""
from app import streams
from app.browsers import lifecycle
from app.browsers.models import BrowserLogLine, BrowserSession
from app.core import clock
from app.core.db import exclusive


def ingest(session, source, log_name, lines, *, activity=True, batch=None):
    """Store log lines; `activity` and `batch` as for telemetry.ingest (a batch applied before is not applied
    again: 0)."""
    now = clock.now()
    rows = [{"session": session.id, "source": source, "log_name": log_name,
             "timestamp": line.get("timestamp") or now, "message": line["message"], "received_at": now}
            for line in lines]
    # Under the session row, as telemetry is: lines commit in id order, so a follower reading
    # "ids above n" never skips one, and none lands after the session ended.
    with exclusive(session):
        current = BrowserSession.get_by_id(session.id)
        if batch is not None and batch <= current.host_batch:
            return 0
        if current.is_active and not current.is_idle_too_long:
            BrowserLogLine.insert_many(rows).execute()
            if batch is not None:
                BrowserSession.update(host_batch=batch).where(BrowserSession.id == session.id).execute()
    if not current.is_active or current.is_idle_too_long:
        lifecycle.end_if_idle(current)
        raise lifecycle.ended_error(current)
    if activity:
        lifecycle.touch(current)
    streams.announce(session.logs_subject)
    return len(rows)


def lines_after(session_id, source, log_name, after_id, limit):
    """[(id, data)] of the log's lines above `after_id`, oldest first."""
    query = (BrowserLogLine.select()
             .where((BrowserLogLine.session == session_id) & (BrowserLogLine.source == source)
                    & (BrowserLogLine.log_name == log_name) & (BrowserLogLine.id > after_id))
             .order_by(BrowserLogLine.id).limit(limit))
    return [(line.id, {"event": "log", "message": line.message, "timestamp": clock.isoformat(line.timestamp)})
            for line in query]


def replay_floor(session_id, source, log_name, replay_lines):
    """The id below the newest `replay_lines` lines of the log (0 when it has fewer)."""
    ids = (BrowserLogLine.select(BrowserLogLine.id)
           .where((BrowserLogLine.session == session_id) & (BrowserLogLine.source == source)
                  & (BrowserLogLine.log_name == log_name))
           .order_by(BrowserLogLine.id.desc()).offset(replay_lines).limit(1))
    return ids.scalar() or 0
