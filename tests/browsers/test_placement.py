"""Placing a session on a browser host when one of them is dead or slow (#34 item 16): a host that does not
answer a start is skipped for another with room, what it may still start there is stopped, and a host that
misses its heartbeats leaves placement within about two beats."""
import json
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from app.browsers import drivers, host_reports, hosts
from app.browsers.models import BrowserHost, BrowserSession
from app.core import clock
from app.core.db import db
from app.core.errors import ApiError
from tests.conftest import client_for


class FakeHost:
    """A host's control API on a free port: starts (after `delay` seconds) and stops are answered and noted."""

    def __init__(self, delay=0.0):
        self.delay, self.requests, self.bodies = delay, [], []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                fake.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                fake.requests.append(("POST", self.path))
                time.sleep(fake.delay)
                self.answer(201, {"pid": 1, "browser_path": "/devtools/browser/x"})

            def do_DELETE(self):  # noqa: N802
                fake.requests.append(("DELETE", self.path))
                self.answer(200, {"profile_state": None})

            def answer(self, status, body):
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the app gave up waiting
                    pass

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake_hosts():
    made = []

    def make(delay=0.0):
        made.append(FakeHost(delay))
        return made[-1]

    yield make
    for host in made:
        host.stop()


def dead_address():
    """An address where nothing listens (a host killed with kill -9): connections are refused."""
    gone = FakeHost()
    gone.stop()
    return gone.url


def add_live_host(app, name, address, capacity=2, beats_ago=0):
    with app.app_context(), db.connection_context():
        hosts.add(name, address)
        heartbeat = clock.now() - timedelta(seconds=app.config["BROWSER_HOST_HEARTBEAT_SECONDS"] * beats_ago)
        BrowserHost.update(capacity=capacity, heartbeat_at=heartbeat).where(BrowserHost.name == name).execute()


def host_of(app, session_id):
    with app.app_context(), db.connection_context():
        return BrowserSession.get_by_id(session_id).host.name


def test_a_create_placed_on_a_dead_host_starts_on_another_with_room(make_app, make_org, fake_hosts):
    app = make_app(BROWSER_DRIVER="host")
    live = fake_hosts()
    add_live_host(app, "a-dead", dead_address(), capacity=10)  # the least loaded: placed first
    add_live_host(app, "b-live", live.url)
    client = client_for(app, make_org().plaintext)
    for _ in range(2):
        response = client.post("/browsers", json={"headless": True})
        assert response.status_code == 201, response.get_json()
        assert host_of(app, response.get_json()["session_id"]) == "b-live"
    assert [method for method, _ in live.requests] == ["POST", "POST"]
    assert live.bodies[0]["start_seconds"] == 30  # the start's deadline: the host answers why past it (#34 item 14)


def test_a_start_that_timed_out_is_stopped_on_its_host_and_placed_on_another(make_app, make_org, fake_hosts,
                                                                             monkeypatch):
    monkeypatch.setattr(drivers, "ANSWER_SECONDS", 0)  # a host that does not even say it gave up
    app = make_app(BROWSER_DRIVER="host", BROWSER_HOST_START_SECONDS=1)
    slow, fast = fake_hosts(delay=2), fake_hosts()
    add_live_host(app, "a-slow", slow.url, capacity=10)
    add_live_host(app, "b-fast", fast.url)
    response = client_for(app, make_org().plaintext).post("/browsers", json={"headless": True})
    assert response.status_code == 201, response.get_json()
    session_id = response.get_json()["session_id"]
    assert host_of(app, session_id) == "b-fast"
    assert ("DELETE", f"/sessions/{session_id}?save_state=0") in slow.requests  # its late start is not kept
    with app.test_request_context(), db.connection_context():  # nor one it runs although it did not hear that
        slow_host = BrowserHost.get(BrowserHost.name == "a-slow")
        assert host_reports.heartbeat(slow_host, [session_id], [])["stop"] == [session_id]


def test_a_host_that_missed_two_beats_is_placed_only_when_no_punctual_host_has_room(make_app, make_org, fake_hosts):
    app = make_app(BROWSER_DRIVER="host")
    add_live_host(app, "a-late", fake_hosts().url, capacity=10, beats_ago=3)  # still within the host timeout
    add_live_host(app, "b-punctual", fake_hosts().url, capacity=1)
    client = client_for(app, make_org().plaintext)

    def placed():
        with app.test_request_context(), db.connection_context():
            try:
                return hosts.place(headful=False).name
            except ApiError as error:
                return error.code

    assert placed() == "b-punctual"
    assert client.post("/browsers", json={"headless": True}).status_code == 201  # b-punctual is now full
    assert placed() == "a-late"
