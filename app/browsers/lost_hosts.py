"""Sessions whose browser host stopped heart-beating end (a periodic task of every worker).

A host cannot heart-beat to an app that is down: a worker judges a host's silence only once it has listened
for a whole BROWSER_HOST_TIMEOUT_SECONDS itself, so restarting every app server (a deploy, an outage) ends
no session of a host that heart-beats again in that time. A revoked host's sessions end at any time.

Above both the session lifecycle and telemetry, which it uses: in app/browsers/hosts.py, which the
drivers use, it closed a circle of imports (drivers -> hosts -> sessions -> drivers).
"""
from datetime import timedelta

from flask import current_app

from app.browsers import control_events, lifecycle, telemetry
from app.browsers.models import ENDED_BY_HOST_LOST, BrowserHost, BrowserSession
from app.core import clock
from app.core.db import db
from app.core.errors import ApiError
from app.core.settings import settings


def end_sessions_of_lost_hosts():
    """A host that stopped heart-beating took its browsers with it, and a revoked host's browsers are no longer
    trusted: their sessions end."""
    timeout = settings().browser_host_timeout_seconds
    listening_since = current_app.extensions.setdefault("lost_hosts_listening_since", clock.now())
    judging_silence = clock.now() - listening_since >= timedelta(seconds=timeout)
    with db.connection_context():
        kept = BrowserHost.live(timeout) if judging_silence else BrowserHost.select().where(
            BrowserHost.revoked_at.is_null())
        live = kept.select(BrowserHost.id)
        orphaned = list(BrowserSession.active().where(BrowserSession.host.is_null(False)
                                                      & BrowserSession.host.not_in(live)))
        names = dict(BrowserHost.select(BrowserHost.id, BrowserHost.name)
                     .where(BrowserHost.id.in_({session.host_id for session in orphaned})).tuples())
        for session in orphaned:
            # Every worker sweeps: the one whose update takes the session off its lost host writes
            # the session's one system event and ends it (nothing to ask a host that is gone; its
            # restart cleans up).
            if not (BrowserSession.update(host=None)
                    .where((BrowserSession.id == session.id) & (BrowserSession.host == session.host_id))
                    .execute()):
                continue
            try:
                telemetry.ingest(session, [_host_lost_event(names.get(session.host_id, ""))], activity=False)
            except ApiError:
                pass  # it ended meanwhile
            session.host_id = None
            lifecycle.end(session, ENDED_BY_HOST_LOST)


def _host_lost_event(host_name):
    """The system event of a session whose host was lost: the SDK's service_crashed, naming the host."""
    return control_events.event("service_crashed", "system", {"phase": "running", "service_name": "browser_host"},
                                source_event="host_lost", metadata={"browser_host": host_name})
