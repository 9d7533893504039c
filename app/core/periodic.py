"""Work each worker process does on a timer: create_app names the tasks, wsgi.py starts the loop.

A task is `fn()` run in an app context every `settings().<interval>` seconds (0 or
None: never); it opens short database connections itself (`db.connection_context()`),
never one held while it waits on something else. Tasks must tolerate running in
several workers at once (each claims its rows, or is idempotent). The loop is a
daemon thread, a greenlet under gunicorn's gevent worker; it stops with the worker.
"""
import logging
import threading
import time

from app.core import shutdown
from app.core.settings import settings

logger = logging.getLogger(__name__)
TICK_SECONDS = 1.0


def init_app(app, tasks):
    """The app's tasks: (interval setting's attribute, fn) pairs, each run every that many seconds."""
    app.extensions["periodic_tasks"] = list(tasks)


def run_due(app, last_run, now):
    """Run the tasks whose interval has passed since `last_run[fn]`; updates `last_run`."""
    for interval_setting, fn in app.extensions["periodic_tasks"]:
        interval = getattr(settings(app), interval_setting)
        if not interval or now - last_run.get(fn, now - interval) < interval:
            continue
        last_run[fn] = now
        with app.app_context():
            try:
                fn()
            except Exception:  # noqa: BLE001 - one failing task must not stop the others
                logger.exception("periodic task %s failed", fn.__qualname__)


def start(app):
    """Start this process's loop (from wsgi.py; tests call run_due themselves)."""
    def loop():
        last_run = {}
        while not shutdown.stopping.wait(TICK_SECONDS):
            run_due(app, last_run, time.monotonic())

    thread = threading.Thread(target=loop, name="periodic-tasks", daemon=True)
    thread.start()
    return thread
