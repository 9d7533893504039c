"""A process-wide flag that the worker is stopping, so open streams end promptly.

Without it, a restart (SIGTERM) waits out gunicorn's whole graceful_timeout
for every open stream; with it, stream loops return within one poll interval
and clients resume with Last-Event-ID.
"""
import signal
import threading

stopping = threading.Event()


def install(signum=signal.SIGTERM):
    """Set `stopping` on `signum`, then run the handler that was there (gunicorn's).

    Called from wsgi.py: gunicorn's worker installs its handlers before it loads the app.
    """
    previous = signal.getsignal(signum)

    def handle(sig, frame):
        stopping.set()
        if callable(previous):
            previous(sig, frame)

    signal.signal(signum, handle)
