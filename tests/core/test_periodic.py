"""The per-worker periodic loop: tasks run when their interval has passed, in an app context."""
from flask import current_app

from app.core import clock, periodic, settings
from app.core.db import db


def test_tasks_run_when_due_and_a_failing_one_does_not_stop_the_others(app, monkeypatch):
    ran = []

    def broken():
        raise RuntimeError("boom")

    def counted():
        ran.append(current_app.name)

    monkeypatch.setitem(app.extensions, "periodic_tasks", [("browser_idle_sweep_seconds", broken),
                                                           ("telemetry_prune_interval_seconds", counted),
                                                           ("auth_health_check_poll_seconds", counted)])
    settings.change(app, BROWSER_IDLE_SWEEP_SECONDS=1, TELEMETRY_PRUNE_INTERVAL_SECONDS=10,
                    AUTH_HEALTH_CHECK_POLL_SECONDS=0)
    last_run = {}
    periodic.run_due(app, last_run, 100.0)  # first tick: everything with an interval runs
    periodic.run_due(app, last_run, 105.0)
    periodic.run_due(app, last_run, 110.0)
    assert ran == [app.name, app.name]  # at 100 and 110, in an app context


def test_every_periodic_task_is_named_by_the_app_whatever_was_imported(app):
    """The auth health check used to run only because a CLI module imported its module."""
    tasks = {fn.__qualname__: setting for setting, fn in app.extensions["periodic_tasks"]}
    assert tasks == {"end_idle_sessions": "browser_idle_sweep_seconds",
                     "prune_archive": "telemetry_prune_interval_seconds",
                     "end_sessions_of_lost_hosts": "browser_host_heartbeat_seconds",  # a beat after the timeout
                     "run_due_checks": "auth_health_check_poll_seconds"}


def test_idle_sessions_end_without_any_request(app, client):
    clock.freeze(clock.now())
    session = client.post("/browsers", json={"timeout_seconds": 10}).get_json()["session_id"]
    clock.advance(seconds=11)
    periodic.run_due(app, {}, 0.0)
    with app.app_context(), db.connection_context():
        from app.browsers.models import BrowserSession

        ended = BrowserSession.get_by_id(session)
    assert ended.deleted_at is not None and ended.end_reason == "timeout"
