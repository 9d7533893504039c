from contextlib import contextmanager

import pytest

from app import streams
from app.streams.memory import MemoryChannels

TELEMETRY_ON = {"enabled": True, "browser": {"console": {"enabled": True}, "network": {"enabled": True}}}


def console(text, **fields):
    """A console_log event as a driver would send it."""
    return {"type": "console_log", "source": {"kind": "cdp"}, "data": {"text": str(text)}, **fields}


@pytest.fixture
def new_browser(client):
    """new_browser(**body) -> the created session's record (telemetry on unless given)."""
    def create(using=None, **body):
        body.setdefault("telemetry", TELEMETRY_ON)
        response = (using or client).post("/browsers", json=body)
        assert response.status_code == 201, response.get_json()
        return response.get_json()
    return create


@pytest.fixture
def ingest(client):
    """ingest(session_id, events, using=client) -> the ingest response body (asserts 201)."""
    def send(session_id, events, using=None):
        response = (using or client).post(f"/browsers/{session_id}/telemetry/events", json={"events": events})
        assert response.status_code == 201, response.get_json()
        return response.get_json()
    return send


@contextmanager
def another_worker():
    """Run a block as another gunicorn worker would: with in-memory buffers and channels of its own.

    (Apps made by make_app share the process's stream backends, as requests of one worker do.)
    """
    saved = streams._backend, streams._telemetry
    streams._backend = MemoryChannels(capacity=saved[0].capacity)
    streams._telemetry = MemoryChannels(capacity=saved[1].capacity)
    try:
        yield
    finally:
        streams._backend, streams._telemetry = saved
