"""A browser session's life: activity and the inactivity timeout, and its end.

A session is active until it ends (DELETE, or no activity for timeout_seconds); an ended session keeps
its record with deleted_at. Ending is one conditional UPDATE (`deleted_at IS NULL`), so whoever ends a
session (a request, a stream that noticed the timeout, a host, a worker's sweep) does the after-end work
exactly once: its browser stops and its streams close.
"""

from app import streams
from app.browsers import replays
from app.browsers.drivers import driver_named
from app.browsers.models import ENDED_BY_REQUEST, ENDED_BY_TIMEOUT, BrowserSession
from app.core import clock
from app.core.compiled import CompiledQuery
from app.core.db import db
from app.core.errors import conflict
from app.core.settings import settings
from app.orgs.models import Project
from app.streams import telemetry_buffers


def ended_error(session):
    return conflict("browser_session_ended", f"Browser session {session.id!r} has ended.")


def touch(session):
    """Record activity: the session's idle deadline moves to timeout_seconds from now.

    Written at most once per BROWSER_ACTIVITY_WRITE_SECONDS, and never for a
    session already past its deadline (that one has timed out, whoever notices first).
    """
    now = clock.now()
    if (now - session.last_active_at).total_seconds() < settings().browser_activity_write_seconds:
        return
    deadline = session.deadline_from(now)
    (BrowserSession.update(last_active_at=now, idle_deadline=deadline)
     .where((BrowserSession.id == session.id) & BrowserSession.deleted_at.is_null()
            & (BrowserSession.idle_deadline > now))
     .execute())
    session.last_active_at, session.idle_deadline = now, deadline


def end(session, reason=ENDED_BY_REQUEST, at=None):
    """End an active session; True if this call ended it (False: it had already ended)."""
    at = at or clock.now()
    ended = (BrowserSession.update(deleted_at=at, end_reason=reason)
             .where((BrowserSession.id == session.id) & BrowserSession.deleted_at.is_null())
             .execute()) == 1
    if ended:
        session.deleted_at, session.end_reason = at, reason
        after_end([session])
    return ended


def end_if_idle(session):
    """End the session if it is past its idle deadline (as of that deadline); True if it has ended."""
    current = BrowserSession.get_by_id(session.id)
    if current.is_idle_too_long:
        _end_timed_out(current)
    return current.deleted_at is not None


def expire_idle(org_id):
    """End the organization's sessions that saw no activity for their timeout.

    Cheap when none is due (one indexed query). Runs wherever sessions are counted
    or shown, so a timed-out session never counts or shows as active.
    """
    after_end(end_overdue(org_id))


def end_overdue(org_id=None):
    """End the sessions past their idle deadline (of one organization, or all), without their after-end
    work (the caller does it, outside its lock); the ended ones."""
    if org_id is None:
        overdue = BrowserSession.active().where(BrowserSession.idle_deadline <= clock.now())
    else:  # on every count of the organization's sessions (GET /org/limits, creates): built once
        overdue = _overdue_in_org.all(clock.now(), org_id)
    return [session for session in overdue if _end_timed_out(session, announce=False)]


_overdue_in_org = CompiledQuery(lambda now, org_id: BrowserSession.active().where(BrowserSession.idle_deadline <= now)
                                .join(Project).where(Project.org == org_id))


def end_idle_sessions():
    """Sessions end at their idle deadline even when nobody looks (each worker sweeps)."""
    with db.connection_context():
        after_end(end_overdue())


def _end_timed_out(session, announce=True):
    # Only if still past its deadline: activity elsewhere may have moved it meanwhile.
    ended = (BrowserSession.update(deleted_at=BrowserSession.idle_deadline, end_reason=ENDED_BY_TIMEOUT)
             .where((BrowserSession.id == session.id) & BrowserSession.deleted_at.is_null()
                    & (BrowserSession.idle_deadline <= clock.now()))
             .execute()) == 1
    if ended:
        session.deleted_at, session.end_reason = session.idle_deadline, ENDED_BY_TIMEOUT
        if announce:
            after_end([session])
    return ended


def after_end(sessions):
    """Stop each ended session's browser (its recordings end with it) and wake its streams (they close)."""
    for session in sessions:
        driver_named(session.driver).stop(session)
        telemetry_buffers().discard(session.telemetry_subject)
        streams.announce(session.telemetry_subject, ended=True)
        streams.announce(session.logs_subject, ended=True)
    replays.sessions_ended(sessions)  # after the stops: a stream that sees the end finds the browser stopped
