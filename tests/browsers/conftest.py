import time
from contextlib import contextmanager

import pytest

from app import streams
from app.browsers import hosts
from app.browsers.models import BrowserHost, BrowserSession
from app.core.db import db
from app.core.errors import ApiError
from app.streams.memory import MemoryChannels
from lantern_wire.hosts import REGISTER, REPORTS
from tests.fakes import LocalServer

REGISTRATION = {"address": "http://127.0.0.1:8790", "capacity": 4, "headful": False, "unavailable_reason": None}

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


@pytest.fixture
def add_host(app):
    """add_host(name) -> (credential, a test client posting with it), the host registered."""
    def add(name="h1", register=True):
        with app.app_context(), db.connection_context():
            credential = hosts.add(name, REGISTRATION["address"])
        poster = HostPoster(app.test_client(), credential)
        if register:
            assert poster(REGISTER, REGISTRATION).status_code == 200
        return credential, poster
    return add


class HostPoster:
    def __init__(self, client, credential):
        self.client, self.credential = client, credential

    def __call__(self, path, body):
        return self.client.post(path, json=body, headers={"Authorization": f"Bearer {self.credential}"})

    def reports(self, *reports):
        response = self(REPORTS, {"reports": list(reports)})
        assert response.status_code == 200, response.get_json()
        return response.get_json()["results"]


def on_host(app, session_id, name):
    with app.app_context(), db.connection_context():
        host = BrowserHost.get(BrowserHost.name == name)
        BrowserSession.update(host=host.id).where(BrowserSession.id == session_id).execute()


class SlowHost(LocalServer):
    """A host's control API answering every POST with `reply` (status, body) after `delay` seconds."""

    def __init__(self, reply, delay=0.0):
        super().__init__()
        self.reply, self.delay = reply, delay

    def post(self, handler):
        handler.rfile.read(int(handler.headers["Content-Length"]))
        time.sleep(self.delay)
        try:
            handler.answer(*self.reply)
        except OSError:  # the app gave up waiting
            pass


def placed(app):
    """The name of the host a new session would be placed on, or the error's code."""
    with app.test_request_context(), db.connection_context():
        try:
            return hosts.place(headful=False).name
        except ApiError as error:
            return error.code
