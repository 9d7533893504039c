"""How many event streams this worker holds open: in all, and for each organization.

Every open stream holds one of the gevent worker's `worker_connections` for as long
as it lasts. Without a cap, idle streams opened with one key could take them all,
and every other request of every tenant would wait in the listen backlog. So a
worker admits streams only up to a cap below `worker_connections` (ordinary
requests always find a connection), one organization only up to its own share, and
none once the worker is stopping; past either cap a new stream gets 503 at once.
"""
import threading
from collections import Counter

from app.core import shutdown
from app.core.errors import ApiError
from app.core.settings import settings

_lock = threading.Lock()
_open = Counter()  # organization id (None: streams authorised another way) -> open streams
_worker_connections = None


def set_worker_connections(count):
    """Called by the server (gunicorn.conf.py) once it knows its worker_connections."""
    global _worker_connections
    _worker_connections = count


def worker_cap(config):
    """STREAMS_PER_WORKER, else the worker's connections less those kept for ordinary requests."""
    if config.streams_per_worker:
        return config.streams_per_worker
    connections = _worker_connections or config.streams_default_worker_connections
    return max(1, connections - min(config.streams_reserved_connections, connections // 2))


def org_cap(config):
    return config.streams_per_org or max(1, worker_cap(config) // 2)


def admit(org_id):
    """A slot for one more stream of `org_id`; its `release()` may be called any number of times."""
    config = settings()
    if shutdown.stopping.is_set():
        raise ApiError(503, "server_restarting", "The server is restarting; open the stream again shortly.",
                       headers={"Retry-After": "1"})
    worker_limit, org_limit = worker_cap(config), org_cap(config)
    with _lock:
        total, mine = sum(_open.values()), _open[org_id]
        if total >= worker_limit:
            raise _too_many("server process", worker_limit, total, config)
        if org_id is not None and mine >= org_limit:
            raise _too_many("organization", org_limit, mine, config)
        _open[org_id] += 1
    return _Slot(org_id)


def _too_many(scope, limit, usage, config):
    return ApiError(
        503, "too_many_streams",
        f"This server process holds as many event streams as it admits for the {scope} ({limit}); "
        "close a stream or retry later.",
        details=[{"code": "stream_limit", "scope": scope, "limit": limit, "usage": usage,
                  "message": f"{scope} limit {limit}, {usage} open"}],
        headers={"Retry-After": str(config.streams_retry_after_seconds)})


def open_streams():
    """Streams this worker holds open now."""
    with _lock:
        return sum(_open.values())


class _Slot:
    __slots__ = ("org_id", "_held")

    def __init__(self, org_id):
        self.org_id = org_id
        self._held = True

    def release(self):
        with _lock:
            if self._held:
                self._held = False
                _open[self.org_id] -= 1
                if not _open[self.org_id]:
                    del _open[self.org_id]
