"""A PATCH that changes the running browser (#35 items 3, 4): a new viewport and a profile reach the session's host
before the record says so; refusals and failures leave the record as it was. Real browsers:
tests/browsers/live/test_running_changes.py."""
import json
import threading

import pytest

from app.browsers import hosts
from app.browsers.models import BrowserHost, BrowserSession, Replay
from app.core import clock
from app.core.db import db
from app.profiles.models import save_profile_state
from tests.browsers.conftest import on_host
from tests.conftest import client_for
from tests.fakes import LocalServer


class ChangingHost(LocalServer):
    """A host's control API taking running changes: each PUT and POST is kept (path, body) and answered `reply`."""

    def __init__(self, reply=(200, {"restarted": False})):
        super().__init__()
        self.reply, self.requests = reply, []

    def _take(self, handler):
        self.requests.append((handler.command, handler.path,
                              json.loads(handler.rfile.read(int(handler.headers["Content-Length"])))))
        handler.answer(*self.reply)

    put = post = _take


@pytest.fixture
def host(app):
    server = ChangingHost().start()
    with app.app_context(), db.connection_context():
        hosts.add("h1", server.url)
        BrowserHost.update(address=server.url, capacity=2, heartbeat_at=clock.now()).execute()
    yield server
    server.stop()


@pytest.fixture
def running(app, client, host):
    """A session of the host driver on `host` (at 1920x1080); its id."""
    session_id = client.post("/browsers", json={"viewport": {"width": 1920, "height": 1080}}).get_json()["session_id"]
    with app.app_context(), db.connection_context():
        BrowserSession.update(driver="host").where(BrowserSession.id == session_id).execute()
    on_host(app, session_id, "h1")
    return session_id


def test_a_new_viewport_is_the_records_once_the_host_applied_it(client, host, running):
    answer = client.patch(f"/browsers/{running}", json={"viewport": {"width": 1024, "height": 768}})
    assert answer.status_code == 200, answer.get_json()
    assert answer.get_json()["viewport"] == {"width": 1024, "height": 768}
    assert host.requests == [("PUT", f"/sessions/{running}/viewport",
                              {"width": 1024, "height": 768, "restart": False, "start_seconds": 30})]
    client.patch(f"/browsers/{running}", json={"viewport": {"width": 1280, "height": 800, "force": True}})
    assert host.requests[-1][2]["restart"] is True  # force allows the host to start the browser again


def test_a_viewport_the_host_cannot_apply_without_a_restart_is_a_409_not_retried_and_changes_nothing(
        client, host, running):
    host.reply = (409, {"code": "viewport_needs_restart", "message": "The session has a screen smaller than that."})
    refused = client.patch(f"/browsers/{running}", json={"viewport": {"width": 2560, "height": 1440}, "name": "big"})
    assert refused.status_code == 409 and refused.get_json()["code"] == "viewport_needs_restart"
    assert refused.headers["x-should-retry"] == "false"
    record = client.get(f"/browsers/{running}").get_json()
    assert record["viewport"] == {"width": 1920, "height": 1080} and "name" not in record


def test_a_host_that_fails_a_change_leaves_the_record_as_it_was(client, host, running):
    client.post("/profiles", json={"name": "shopper"})
    host.reply = (502, {"code": "browser_unreachable", "message": "The browser's windows could not be resized."})
    failed = client.patch(f"/browsers/{running}", json={"viewport": {"width": 1024, "height": 768}})
    assert failed.status_code == 502 and failed.get_json()["code"] == "browser_unreachable"
    failed = client.patch(f"/browsers/{running}", json={"profile": {"name": "shopper", "save_changes": True}})
    assert failed.status_code == 502
    record = client.get(f"/browsers/{running}").get_json()
    assert record["viewport"] == {"width": 1920, "height": 1080} and "profile" not in record


def test_a_recorded_session_takes_a_new_viewport_only_with_force(app, client, host, running):
    with app.app_context(), db.connection_context():
        replay = Replay.create(session=running, framerate=10, max_duration_seconds=60)
    refused = client.patch(f"/browsers/{running}", json={"viewport": {"width": 1024, "height": 768}})
    assert refused.status_code == 409 and refused.get_json()["code"] == "replay_in_progress"
    assert replay.id in refused.get_json()["message"] and host.requests == []

    host.reply = (200, {"started_at": 1700000000.5, "restarted": False, "handed_on": True})
    forced = client.patch(f"/browsers/{running}", json={"viewport": {"width": 1024, "height": 768, "force": True}})
    assert forced.status_code == 200, forced.get_json()
    # The recording ends (a replay of its own), the browser is resized, a new recording starts at the new size.
    assert [(method, path) for method, path, _ in host.requests] == [
        ("POST", f"/sessions/{running}/replays/{replay.id}/stop"), ("PUT", f"/sessions/{running}/viewport"),
        ("POST", f"/sessions/{running}/replays")]
    replays = client.get(f"/browsers/{running}/replays").get_json()
    assert [r["status"] for r in replays] == ["saving", "recording"]
    assert host.requests[-1][2]["framerate"] == 10 and host.requests[-1][2]["max_seconds"] == 60


def test_a_profile_given_to_a_running_browser_reaches_it_then_the_record(app, client, host, running):
    profile = client.post("/profiles", json={"name": "shopper"}).get_json()
    state = {"cookies": [{"name": "sid", "value": "1", "domain": "a.test", "path": "/", "expires": -1,
                          "httpOnly": False, "secure": False, "sameSite": "Lax"}], "origins": []}
    with app.app_context(), db.connection_context():
        save_profile_state(profile["id"], state)
    host.reply = (200, {"cookies": 1, "origins": 0})
    given = client.patch(f"/browsers/{running}", json={"profile": {"name": "shopper", "save_changes": True}})
    assert given.status_code == 200, given.get_json()
    assert given.get_json()["profile"]["id"] == profile["id"] and given.get_json()["profile_save_changes"] is True
    assert host.requests == [("POST", f"/sessions/{running}/profile", {"profile_state": state})]


def test_one_session_at_a_time_saves_a_profile_back(client):
    client.post("/profiles", json={"name": "shared"})
    writer = client.post("/browsers", json={"profile": {"name": "shared", "save_changes": True}}).get_json()
    second = client.post("/browsers", json={"profile": {"name": "shared", "save_changes": True}})
    assert second.status_code == 409 and second.get_json()["code"] == "profile_in_use"
    assert writer["session_id"] in second.get_json()["message"]
    assert second.headers["x-should-retry"] == "false"
    reader = client.post("/browsers", json={"profile": {"name": "shared"}})  # readers are not counted
    assert reader.status_code == 201

    running = client.post("/browsers", json={}).get_json()["session_id"]
    refused = client.patch(f"/browsers/{running}", json={"profile": {"name": "shared", "save_changes": True}})
    assert refused.status_code == 409 and refused.get_json()["code"] == "profile_in_use"
    assert "profile" not in client.get(f"/browsers/{running}").get_json()

    client.delete(f"/browsers/{writer['session_id']}")
    given = client.patch(f"/browsers/{running}", json={"profile": {"name": "shared", "save_changes": True}})
    assert given.status_code == 200 and given.get_json()["profile_save_changes"] is True


def test_what_a_running_browser_still_cannot_change_is_refused_by_name(client, running):
    refused = client.patch(f"/browsers/{running}", json={"location": {"timezone": "Asia/Tokyo"}})
    assert refused.status_code == 400
    assert [detail["field"] for detail in refused.get_json()["details"]] == ["location"]


def test_a_second_profile_while_the_first_reaches_the_browser_is_refused_and_reaches_nothing(
        app, client, owner_key, host, running):
    """Two PATCHes at once each passed the record's check: both profiles reached one browser, the record named one,
    and save_changes would have saved the other's cookies into it."""
    for name in ("alice", "bob"):
        client.post("/profiles", json={"name": name})
    arrived, release = threading.Event(), threading.Event()
    take = host._take

    def slow(handler):
        arrived.set()
        release.wait(10)
        take(handler)
    host.post = slow
    host.reply = (200, {"cookies": 0, "origins": 0})
    first = {}
    patching = threading.Thread(target=lambda: first.update(answer=client_for(app, owner_key.plaintext).patch(
        f"/browsers/{running}", json={"profile": {"name": "alice", "save_changes": True}})))
    patching.start()
    try:
        assert arrived.wait(10)
        second = client.patch(f"/browsers/{running}", json={"profile": {"name": "bob", "save_changes": True}})
    finally:
        release.set()
        patching.join(10)
    assert second.status_code == 409 and second.get_json()["code"] == "browser_changing"
    assert second.headers["Retry-After"]
    assert first["answer"].status_code == 200 and first["answer"].get_json()["profile"]["name"] == "alice"
    assert [path for _, path, _ in host.requests] == [f"/sessions/{running}/profile"]


def test_a_change_while_the_browser_starts_again_is_a_409_worth_retrying(client, host, running):
    host.reply = (409, {"code": "browser_restarting", "message": "The browser is starting (again)."})
    answer = client.patch(f"/browsers/{running}", json={"viewport": {"width": 1024, "height": 768}})
    assert answer.status_code == 409 and answer.get_json()["code"] == "browser_restarting"
    assert answer.headers["Retry-After"] and "x-should-retry" not in answer.headers


def test_the_same_viewport_again_changes_nothing_and_keeps_the_recording(app, client, host, running):
    with app.app_context(), db.connection_context():
        Replay.create(session=running, framerate=10, max_duration_seconds=60)
    again = client.patch(f"/browsers/{running}", json={"viewport": {"width": 1920, "height": 1080, "force": True}})
    assert again.status_code == 200, again.get_json()
    assert host.requests == []
    assert [r["status"] for r in client.get(f"/browsers/{running}/replays").get_json()] == ["recording"]
