"""Placing a session on a browser host when one of them is dead or slow (#34 item 16): a host that cannot be reached
or refuses a start having taken nothing is skipped for another with room, within one deadline for the whole create
(BROWSER_HOST_START_SECONDS, below the SDKs' timeout: past it they send the create again); what a host that did not
answer may still start there is stopped; a host that misses its heartbeats leaves placement within about two
beats."""
import json
import time
from datetime import timedelta

import pytest

from app.browsers import drivers, host_reports, hosts
from app.browsers.models import BrowserHost, BrowserSession
from app.core import clock
from app.core.db import db
from tests.browsers.conftest import placed
from tests.conftest import client_for
from tests.fakes import LocalServer

STARTED = (201, {"pid": 1, "browser_path": "/devtools/browser/x"})
DROPPED = None  # a host that dies with the start under way: the connection closes unanswered


def refusal(code):
    return 503, {"code": code, "message": f"the host says {code}"}


class FakeHost(LocalServer):
    """A host's control API on a free port: starts are answered `reply` (after `delay` seconds), stops are
    answered; both are noted."""

    def __init__(self, delay=0.0, reply=STARTED):
        super().__init__()
        self.delay, self.reply, self.requests, self.bodies = delay, reply, [], []
        self.start(("127.0.0.1", 0))

    def post(self, handler):
        self.bodies.append(json.loads(handler.rfile.read(int(handler.headers["Content-Length"]))))
        self.requests.append(("POST", handler.path))
        time.sleep(self.delay)
        if self.reply is DROPPED:
            handler.close_connection = True
            return
        try:
            handler.answer(*self.reply)
        except OSError:  # the app gave up waiting
            pass

    def delete(self, handler):
        self.requests.append(("DELETE", handler.path))
        handler.answer(200, {"profile_state": None})


@pytest.fixture
def fake_hosts():
    made = []

    def make(delay=0.0, reply=STARTED):
        made.append(FakeHost(delay, reply))
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


def starts(fake):
    return [method for method, _ in fake.requests].count("POST")


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
    assert 29 < live.bodies[0]["start_seconds"] <= 30  # what is left of the create's deadline (#34 item 14)


@pytest.mark.parametrize("start_seconds, delay, reply", [(1, 2, STARTED), (30, 0, DROPPED)],
                         ids=["times out", "drops the connection"])
def test_a_start_the_host_did_not_answer_is_stopped_there_and_answered_503_not_sent_elsewhere(
        make_app, make_org, fake_hosts, monkeypatch, start_seconds, delay, reply):
    """The host may still start the browser; after a timeout, another host's start would also take the create past
    the SDKs' timeout."""
    monkeypatch.setattr(drivers, "ANSWER_SECONDS", 0)  # a host that does not even say it gave up
    app = make_app(BROWSER_DRIVER="host", BROWSER_HOST_START_SECONDS=start_seconds)
    silent, other = fake_hosts(delay=delay, reply=reply), fake_hosts()
    add_live_host(app, "a-silent", silent.url, capacity=10)
    add_live_host(app, "b-other", other.url)
    response = client_for(app, make_org().plaintext).post("/browsers", json={"headless": True})
    assert response.status_code == 503 and response.get_json()["code"] == "no_browser_host"
    assert response.headers["Retry-After"] == str(app.config["BROWSER_CAPACITY_RETRY_AFTER_SECONDS"])
    assert starts(silent) == 1 and starts(other) == 0
    session_id = silent.bodies[0]["session_id"]
    # What it may start is not kept; it is told so once, within ABANDON_SECONDS (not again as the session ends).
    assert silent.requests[1:] == [("DELETE", f"/sessions/{session_id}?save_state=0")]
    clock.freeze(clock.now() + timedelta(seconds=start_seconds * 2 + 1))  # nor run, if it did not hear that
    with app.test_request_context(), db.connection_context():
        silent_host = BrowserHost.get(BrowserHost.name == "a-silent")
        assert host_reports.heartbeat(silent_host, [session_id], [])["stop"] == [session_id]


def test_a_host_that_took_nothing_gets_the_session_moved_and_a_busy_one_does_not(make_app, make_org, fake_hosts):
    """A full host answers at once; one too busy to start Chromium has spent the create's deadline."""
    app = make_app(BROWSER_DRIVER="host")
    full, other = fake_hosts(reply=refusal("no_browser_capacity")), fake_hosts()
    busy = fake_hosts(reply=refusal("browser_host_busy"))
    add_live_host(app, "a-full", full.url, capacity=10)
    add_live_host(app, "c-other", other.url)
    client = client_for(app, make_org().plaintext)
    moved = client.post("/browsers", json={"headless": True})
    assert moved.status_code == 201 and host_of(app, moved.get_json()["session_id"]) == "c-other"
    add_live_host(app, "b-busy", busy.url, capacity=10)
    with app.app_context(), db.connection_context():
        BrowserHost.update(capacity=0).where(BrowserHost.name == "a-full").execute()
    refused = client.post("/browsers", json={"headless": True})
    assert refused.status_code == 503 and refused.get_json()["code"] == "browser_start_failed"
    assert "browser_host_busy" in refused.get_json()["message"] and "Retry-After" in refused.headers
    assert starts(other) == 1


def test_a_create_tries_max_start_attempts_hosts(make_app, make_org, fake_hosts):
    app = make_app(BROWSER_DRIVER="host")
    full = [fake_hosts(reply=refusal("no_browser_capacity")) for _ in range(drivers.MAX_START_ATTEMPTS + 1)]
    for index, host in enumerate(full):
        add_live_host(app, f"h{index}", host.url)
    response = client_for(app, make_org().plaintext).post("/browsers", json={"headless": True})
    assert response.status_code == 503 and response.get_json()["code"] == "browser_start_failed"
    assert [starts(host) for host in full] == [1] * drivers.MAX_START_ATTEMPTS + [0]


def test_a_create_moves_only_while_its_deadline_leaves_time_for_a_start(make_app, make_org, fake_hosts, monkeypatch):
    """Each host is given what is left of the create's BROWSER_HOST_START_SECONDS, and none once too little is."""
    monkeypatch.setattr(drivers, "MIN_START_SECONDS", 1.5)
    app = make_app(BROWSER_DRIVER="host", BROWSER_HOST_START_SECONDS=3)
    slow_full = [fake_hosts(delay=1, reply=refusal("no_browser_capacity")) for _ in range(2)]
    last = fake_hosts()
    for name, host in zip(("a", "b", "c"), [*slow_full, last], strict=True):
        add_live_host(app, name, host.url)
    response = client_for(app, make_org().plaintext).post("/browsers", json={"headless": True})
    assert response.status_code == 503 and response.get_json()["code"] == "browser_start_failed"
    assert slow_full[0].bodies[0]["start_seconds"] > 2.5
    assert slow_full[1].bodies[0]["start_seconds"] <= 2  # what the first host left
    assert starts(last) == 0  # under MIN_START_SECONDS left


def test_a_host_that_missed_two_beats_is_placed_only_when_no_punctual_host_has_room(make_app, make_org, fake_hosts):
    app = make_app(BROWSER_DRIVER="host")
    add_live_host(app, "a-late", fake_hosts().url, capacity=10, beats_ago=3)  # still within the host timeout
    add_live_host(app, "b-punctual", fake_hosts().url, capacity=1)
    client = client_for(app, make_org().plaintext)

    assert placed(app) == "b-punctual"
    assert client.post("/browsers", json={"headless": True}).status_code == 201  # b-punctual is now full
    assert placed(app) == "a-late"
