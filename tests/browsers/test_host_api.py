"""The app's internal API for browser hosts (app/browsers/host_api.py): each host's own credential, registering,
heart-beats, and reports applied once each, in order, for the host's own sessions only."""
import hashlib
import json
import os
import socket
from datetime import timedelta
from types import SimpleNamespace

import pytest

from app.browsers import host_client, hosts, relay
from app.browsers.models import BrowserHost, BrowserLogLine, BrowserSession
from app.core import clock
from app.core.db import db
from lantern_wire.hosts import HEARTBEAT, REGISTER, REPLAYS, REPORTS, STOPPED, control_key, credential_hash
from tests.browsers.conftest import REGISTRATION, HostPoster, console, on_host, placed
from tests.fakes import LocalServer


def telemetry(session_id, batch, *events, **fields):
    return {"session_id": session_id, "kind": "telemetry", "batch": batch, "events": list(events), **fields}


def test_a_credential_is_stored_as_its_hash_and_the_key_the_app_calls_the_host_with(app, add_host):
    credential, _ = add_host("h1", register=False)
    with app.app_context(), db.connection_context():
        host = BrowserHost.get(BrowserHost.name == "h1")
        assert host.credential_hash == credential_hash(credential) and credential not in host.control_key
        assert host_client.control_authorization(host) == f"Bearer {control_key(credential)}"
        assert hosts.authenticate(credential).id == host.id and hosts.authenticate(credential + "x") is None


def test_registering_says_where_the_host_is_and_ends_what_its_previous_run_had(app, client, add_host, new_browser):
    credential, post = add_host("h1")
    session_id = new_browser()["session_id"]
    on_host(app, session_id, "h1")
    answer = post(REGISTER, dict(REGISTRATION, capacity=7))
    assert answer.status_code == 200 and answer.get_json() == {"name": "h1", "heartbeat_seconds": 2}
    with app.app_context(), db.connection_context():
        host = BrowserHost.get(BrowserHost.name == "h1")
    assert (host.address, host.capacity) == ("http://127.0.0.1:8790", 7)
    assert client.get(f"/browsers/{session_id}?include_deleted=true").get_json()["end_reason"] == "host_restarted"


@pytest.mark.parametrize("authorization", [None, "Bearer nope", "Basic abc"])
def test_without_a_host_credential_every_internal_route_is_401(app, authorization, owner_key):
    headers = {"Authorization": authorization} if authorization else {}
    for path in (REGISTER, HEARTBEAT, REPORTS, STOPPED):
        response = app.test_client().post(path, json={}, headers=headers)
        assert response.status_code == 401 and response.get_json()["code"] == "unauthorized"
    # An API key is no host credential either.
    response = app.test_client().post(HEARTBEAT, json={}, headers={"Authorization": f"Bearer {owner_key.plaintext}"})
    assert response.status_code == 401


def test_a_revoked_host_is_refused_and_its_sessions_end_host_lost(app, client, add_host, new_browser):
    _, post = add_host("h1")
    session_id = new_browser()["session_id"]
    on_host(app, session_id, "h1")
    runner = app.test_cli_runner()
    result = runner.invoke(args=["browsers", "hosts", "revoke", "h1"])
    assert result.exit_code == 0, result.output
    assert post(HEARTBEAT, {"sessions": [session_id], "active": []}).status_code == 401
    assert client.get(f"/browsers/{session_id}?include_deleted=true").get_json()["end_reason"] == "host_lost"
    assert runner.invoke(args=["browsers", "hosts", "revoke", "h1"]).exit_code == 1  # once
    listed = runner.invoke(args=["browsers", "hosts", "list"]).output
    assert "h1" in listed and "revoked" in listed


def test_hosts_add_prints_the_credential_once_and_replace_makes_a_new_one(app):
    runner = app.test_cli_runner()
    at = ["--address", REGISTRATION["address"]]
    first = runner.invoke(args=["browsers", "hosts", "add", "h2", *at, "--quiet"])
    assert first.exit_code == 0 and first.output.startswith("lbh_")
    again = runner.invoke(args=["browsers", "hosts", "add", "h2", *at])
    assert again.exit_code == 1 and "--replace" in again.output
    replaced = runner.invoke(args=["browsers", "hosts", "add", "h2", *at, "--replace"])
    assert replaced.exit_code == 0 and first.output.strip() not in replaced.output
    assert HostPoster(app.test_client(), first.output.strip())(REGISTER, REGISTRATION).status_code == 401
    unplaced = runner.invoke(args=["browsers", "hosts", "add", "h3"])
    assert unplaced.exit_code == 2 and "--address" in unplaced.output
    elsewhere = runner.invoke(args=["browsers", "hosts", "add", "h3", "--address", "https://10.0.0.12:8790"])
    assert elsewhere.exit_code == 1 and "http URL" in elsewhere.output


def test_a_credential_registers_only_at_the_address_its_host_was_added_with(app, add_host):
    """Taken elsewhere, a host's credential cannot point the app's calls (with the host's key) and new sessions at
    an address of the taker's."""
    _, post = add_host("h1", register=False)
    moved = post(REGISTER, dict(REGISTRATION, address="http://10.9.9.9:8790"))
    assert moved.status_code == 403 and "--advertise http://127.0.0.1:8790" in moved.get_json()["message"]
    with app.app_context(), db.connection_context():
        host = BrowserHost.get(BrowserHost.name == "h1")
        assert (host.address, host.heartbeat_at) == (REGISTRATION["address"], clock.EPOCH)  # not registered
    assert post(REGISTER, dict(REGISTRATION, address=REGISTRATION["address"] + "/")).status_code == 200
    with app.app_context(), db.connection_context():  # as `hosts add` left a host before addresses were given
        BrowserHost.update(address="").where(BrowserHost.name == "h1").execute()
    unplaced = post(REGISTER, REGISTRATION)
    assert unplaced.status_code == 403 and "--replace --address" in unplaced.get_json()["message"]
    runner = app.test_cli_runner()
    runner.invoke(args=["browsers", "hosts", "add", "h1", "--address", "http://10.9.9.9:8790", "--replace"])
    with app.app_context(), db.connection_context():
        assert BrowserHost.get(BrowserHost.name == "h1").address == "http://10.9.9.9:8790"


def test_a_heartbeat_touches_sessions_with_clients_and_says_what_to_stop_and_capture(app, client, add_host,
                                                                                     new_browser):
    _, post = add_host("h1")
    active, idle = new_browser()["session_id"], new_browser(telemetry={"enabled": False})["session_id"]
    for session_id in (active, idle):
        on_host(app, session_id, "h1")
    clock.freeze(clock.now() + timedelta(seconds=5))
    answer = post(HEARTBEAT, {"sessions": [active, idle, "gone"], "active": [active]}).get_json()
    assert answer["stop"] == ["gone"]
    assert answer["categories"][idle] == {"revision": 0, "names": []}
    assert {"console", "network", "monitor"} <= set(answer["categories"][active]["names"])
    assert set(answer["categories"]) == {active, idle}
    with app.app_context(), db.connection_context():
        touched = {s.id: s.last_active_at for s in BrowserSession.select()}
    assert touched[active] > touched[idle]
    client.patch(f"/browsers/{idle}", json={"telemetry": {"enabled": True}})  # each change is a newer revision
    answer = post(HEARTBEAT, {"sessions": [active, idle], "active": []}).get_json()
    assert answer["categories"][idle]["revision"] == 1 and "system" in answer["categories"][idle]["names"]
    assert answer["categories"][active]["revision"] == 0


def test_a_batch_is_applied_once_even_when_sent_again(app, client, add_host, new_browser):
    _, post = add_host("h1")
    session_id = new_browser()["session_id"]
    on_host(app, session_id, "h1")
    first = post.reports(telemetry(session_id, 1, console("a"), console("b")))
    again = post.reports(telemetry(session_id, 1, console("a"), console("b")), telemetry(session_id, 2, console("c")))
    assert first == [{"status": "ok", "accepted": 2, "dropped": 0, "last_seq": 2}]
    assert again == [{"status": "ok", "accepted": 0, "dropped": 0, "last_seq": 2},
                     {"status": "ok", "accepted": 1, "dropped": 0, "last_seq": 3}]
    logs = {"session_id": session_id, "kind": "logs", "batch": 3, "source": "supervisor", "log_name": "chromium",
            "lines": [{"message": "one line"}]}
    assert post.reports(logs, logs) == [{"status": "ok", "accepted": 1}, {"status": "ok", "accepted": 0}]
    texts = [e["event"]["data"]["text"] for e in
             client.get(f"/browsers/{session_id}/telemetry/events?since=1h").get_json()]
    assert texts == ["a", "b", "c"]


def test_lost_events_and_invalid_ones_are_counted_and_the_rest_kept(app, client, add_host, new_browser):
    _, post = add_host("h1")
    session_id = new_browser()["session_id"]
    on_host(app, session_id, "h1")
    [result] = post.reports(telemetry(session_id, 1, console("kept"), {"type": "no_such_event"}, lost=5))
    assert result["status"] == "ok" and result["accepted"] == 1
    with app.app_context(), db.connection_context():
        assert BrowserSession.get_by_id(session_id).telemetry_dropped == 5 + 1


def test_a_host_reports_for_its_own_sessions_only(app, client, add_host, new_browser):
    _, first = add_host("h1")
    _, second = add_host("h2")
    session_id = new_browser()["session_id"]
    on_host(app, session_id, "h1")
    results = second.reports(telemetry(session_id, 1, console("forged")),
                             {"session_id": session_id, "kind": "ended", "reason": "oom"},
                             {"session_id": session_id, "kind": "activity"})
    assert [r["status"] for r in results] == ["refused"] * 3
    assert client.get(f"/browsers/{session_id}").status_code == 200
    assert client.get(f"/browsers/{session_id}/telemetry/events?since=1h").get_json() == []
    # A malformed report is refused alone: the ones around it are applied.
    results = first.reports({"session_id": session_id, "kind": "telemetry", "batch": 0, "events": []},
                            {"session_id": session_id, "kind": "ended", "reason": "because"},
                            telemetry(session_id, 1, console("ok")))
    assert [r["status"] for r in results] == ["refused", "refused", "ok"]


def test_an_ended_report_ends_the_session_after_what_came_before_it(app, client, add_host, new_browser):
    _, post = add_host("h1")
    session_id = new_browser()["session_id"]
    on_host(app, session_id, "h1")
    results = post.reports(telemetry(session_id, 1, console("last words")),
                           {"session_id": session_id, "kind": "ended", "reason": "browser_exited"},
                           telemetry(session_id, 2, console("too late")),
                           {"session_id": session_id, "kind": "ended", "reason": "browser_exited"})
    assert [r["status"] for r in results] == ["ok", "ok", "ended", "ended"]
    record = client.get(f"/browsers/{session_id}?include_deleted=true").get_json()
    assert record["end_reason"] == "browser_exited"
    texts = [e["event"]["data"]["text"] for e in
             client.get(f"/browsers/{session_id}/telemetry/events?since=1h&category=console").get_json()]
    assert texts == ["last words"]


def test_an_operators_limit_caps_what_a_host_registers_and_can_drain_it(app, client, add_host, new_browser):
    """A host machine taken over could register any capacity to draw new sessions (with their profiles)."""
    _, post = add_host("h1")  # registers capacity 4
    runner = app.test_cli_runner()

    session_id = new_browser()["session_id"]
    on_host(app, session_id, "h1")
    assert runner.invoke(args=["browsers", "hosts", "limit", "h1", "1"]).exit_code == 0
    assert placed(app) == "no_browser_capacity"
    assert "capacity 4 (limit 1)" in runner.invoke(args=["browsers", "hosts", "list"]).output
    assert runner.invoke(args=["browsers", "hosts", "limit", "h1", "2"]).exit_code == 0
    assert placed(app) == "h1"
    assert runner.invoke(args=["browsers", "hosts", "limit", "h1", "0"]).exit_code == 0  # drained
    assert placed(app) == "no_browser_capacity"
    assert client.get(f"/browsers/{session_id}").status_code == 200  # what runs goes on
    # Neither the host registering again (with any capacity) nor a new credential lifts it.
    assert post(REGISTER, dict(REGISTRATION, capacity=2**31 - 1)).status_code == 200
    runner.invoke(args=["browsers", "hosts", "add", "h1", "--address", REGISTRATION["address"], "--replace"])
    with app.app_context(), db.connection_context():
        assert BrowserHost.get(BrowserHost.name == "h1").browsers_allowed == 0
    assert runner.invoke(args=["browsers", "hosts", "limit", "h1", "none"]).exit_code == 0
    assert placed(app) == "h1"
    assert "(limit" not in runner.invoke(args=["browsers", "hosts", "list"]).output
    for wrong, told in (("-1", "'-1'"), ("two", "'two'"), ("²", "'²'"), (str(2**31), "whole number")):
        refused = runner.invoke(args=["browsers", "hosts", "limit", "h1", wrong])
        assert refused.exit_code != 0 and told in refused.output, (wrong, refused.output)
    unknown = runner.invoke(args=["browsers", "hosts", "limit", "nobody", "1"])
    assert unknown.exit_code == 1 and "No browser host named 'nobody'" in unknown.output


def test_a_stopped_host_takes_no_new_session(app, add_host):
    _, post = add_host("h1")
    with app.app_context(), db.connection_context():
        assert [h.name for h in BrowserHost.live(10)] == ["h1"]
    assert post(STOPPED, {}).status_code == 200
    with app.app_context(), db.connection_context():
        assert list(BrowserHost.live(10)) == []


def test_the_internal_api_is_not_in_the_openapi_document(anonymous):
    paths = anonymous.get("/openapi.json").get_json()["paths"]
    assert paths and not [path for path in paths if path.startswith("/internal")]


def test_registering_checks_its_body(add_host):
    _, post = add_host("h1", register=False)
    assert post(REGISTER, {"address": "x"}).status_code == 400
    assert post(REGISTER, dict(REGISTRATION, capacity=-1)).status_code == 400
    assert post(REGISTER, dict(REGISTRATION, unavailable_reason="x" * 2001)).status_code == 400
    assert post(REPORTS, {"reports": "no"}).status_code == 400


@pytest.mark.parametrize("path, body, fields", [
    (REGISTER, dict(REGISTRATION, capacity="4"), ["capacity"]),
    (REGISTER, dict(REGISTRATION, capacity=True), ["capacity"]),
    (REGISTER, dict(REGISTRATION, headful="yes", extra=1), ["headful", "extra"]),
    (REGISTER, {"capacity": 1, "headful": False}, ["address"]),
    (HEARTBEAT, {"sessions": [], "active": {"a": 1}}, ["active"]),
    (HEARTBEAT, {"sessions": ["ok", 7]}, ["sessions.1", "active"]),
    (REPORTS, {"reports": "no"}, ["reports"]),
    (REPORTS, {"results": []}, ["reports", "results"]),
], ids=["text-capacity", "bool-capacity", "headful-and-unknown", "no-address", "active-not-a-list",
        "sessions-item", "reports-not-a-list", "no-reports"])
def test_a_malformed_body_from_a_host_is_a_400_naming_each_field(add_host, path, body, fields):
    """Never a 500: a host's body is checked by its shape (lantern_wire/reports.py), in the API's error shape."""
    _, post = add_host("h1", register=False)
    answer = post(path, body)
    assert answer.status_code == 400, answer.get_json()
    error = answer.get_json()
    assert error["code"] == "bad_request" and [detail["field"] for detail in error["details"]] == fields
    assert all(field in error["message"] for field in fields)
    assert post(path, ["a list"]).get_json()["message"] == "The body must be a JSON object."


def test_a_malformed_report_is_refused_alone_naming_its_field(app, add_host, new_browser):
    _, post = add_host("h1")
    session_id = new_browser()["session_id"]
    on_host(app, session_id, "h1")
    results = post.reports({"session_id": session_id, "kind": "logs", "batch": 1, "source": "supervisor",
                            "log_name": "", "lines": [{"message": "m"}]},
                           {"session_id": session_id, "kind": "telemetry", "batch": 1, "events": [], "lost": -1},
                           {"session_id": session_id, "kind": "resized"},
                           "not a report",
                           {"session_id": session_id, "kind": "activity"})
    assert [r["status"] for r in results] == ["refused"] * 4 + ["ok"]
    assert results[0]["message"].startswith("log_name: ") and results[1]["message"].startswith("lost: ")
    assert "'telemetry', 'logs', 'activity', 'ended'" in results[2]["message"]


@pytest.mark.parametrize("path", [REGISTER, HEARTBEAT, REPORTS])
def test_a_body_nested_past_the_parsers_depth_is_a_400(add_host, path):
    _, post = add_host("h1", register=False)
    answer = post.client.post(path, data="[" * 100_000 + "]" * 100_000, content_type="application/json",
                              headers={"Authorization": f"Bearer {post.credential}"})
    assert answer.status_code == 400


def test_text_no_column_holds_is_stored_replaced_not_a_500(app, client, add_host, new_browser):
    """A page's JavaScript makes lone surrogates, and JSON carries them ("\\ud800"): a host's report that has one
    must not fail, as a 500 would hold back every later report of the host."""
    _, post = add_host("h1")
    session_id = new_browser()["session_id"]
    on_host(app, session_id, "h1")
    lines = {"session_id": session_id, "kind": "logs", "batch": 1, "source": "supervisor", "log_name": "chromium\ud800",
             "lines": [{"message": "half a pair \ud800 and a NUL \x00"}]}
    assert post.reports(lines) == [{"status": "ok", "accepted": 1}]
    assert post(REGISTER, dict(REGISTRATION, unavailable_reason="no \udfff here\x1b]52;c;aGk=\x07\rh2 live\nx")
                ).status_code == 200  # (a terminal's escapes and line breaks would forge lines of `hosts list`)
    with app.app_context(), db.connection_context():
        [line] = BrowserLogLine.select().where(BrowserLogLine.session == session_id)
        assert (line.message, line.log_name) == ("half a pair \ufffd and a NUL \ufffd", "chromium\ufffd")
        assert BrowserHost.get(BrowserHost.name == "h1").unavailable_reason == "no \ufffd here ]52;c;aGk=  h2 live x"


def test_an_empty_unavailable_reason_is_none_as_before(app, add_host):
    _, post = add_host("h1")
    assert post(REGISTER, dict(REGISTRATION, unavailable_reason="")).status_code == 200
    with app.app_context(), db.connection_context():
        assert BrowserHost.get(BrowserHost.name == "h1").unavailable_reason is None


def test_ids_that_are_no_sessions_are_refused_not_a_500(app, add_host):
    _, post = add_host("h1")
    assert post(HEARTBEAT, {"sessions": ["\ud800"], "active": []}).status_code == 400
    assert post(HEARTBEAT, {"sessions": [], "active": ["a\x00"]}).status_code == 400
    for kind in ("activity", "ended", "telemetry"):
        [result] = post.reports({"kind": kind, "session_id": "\ud800", "batch": 1, "events": [],
                                 "reason": "browser_exited"})
        assert result["status"] == "refused" and "session_id" in result["message"]


class HostStandIn(LocalServer):
    """Answers every call with `status` and `body` (bytes), as a host, or a service in its place, might."""

    status, body = 200, b"{}"

    def get(self, handler):
        handler.answer(self.status, self.body)

    post = get


@pytest.mark.parametrize("status, body, message, code", [
    (400, b"[]", "the browser host answered HTTP 400", None),
    (400, b"<html>no</html>", "the browser host answered HTTP 400", None),
    (404, b'{"code": {"evil": 1}, "message": "gone"}', "the browser host answered HTTP 404", None),
    (404, b'{"code": "not_found", "message": "' + b"m" * 5000 + b'"}', "m" * 1000, "not_found"),
    (200, b"null", "the browser host did not answer", None),
    (200, b'"a text"', "the browser host did not answer", None),
    (200, b"x" * 100, "the browser host did not answer", None),
], ids=["list", "html", "code-not-a-word", "long-message", "null", "text", "not-json"])
def test_a_hosts_answer_is_one_a_host_gives_or_a_host_error(app, status, body, message, code):
    """What answers at a host's address decides nothing it should not: a client is told a host's own words
    (a short code and at most 1,000 characters) or only a status, and an answer of the wrong type fails."""
    stand_in = HostStandIn()
    stand_in.status, stand_in.body = status, body
    stand_in.start()
    try:
        with app.app_context(), db.connection_context():
            hosts.add("h1", stand_in.url)
            host = BrowserHost.get(BrowserHost.name == "h1")
            with pytest.raises(host_client.HostError) as raised:
                host_client.HostClient(host).health()
    finally:
        stand_in.stop()
    assert (raised.value.public_message, raised.value.code) == (message, code)


@pytest.mark.parametrize("times", ["started_at=nan&finished_at=1", "started_at=1&finished_at=inf",
                                   "started_at=1e20&finished_at=1", "started_at=-1&finished_at=1", "started_at=1"])
def test_a_replays_times_are_unix_seconds(add_host, times):
    _, post = add_host("h1")
    answer = post.client.put(f"{REPLAYS}/no-such-replay?{times}", data=b"",
                             headers={"Authorization": f"Bearer {post.credential}"})
    assert answer.status_code == 400 and "Unix times" in answer.get_json()["message"]


def test_heartbeats_are_for_registered_sessions_of_the_host_only(app, client, add_host, new_browser):
    _, first = add_host("h1")
    session_id = new_browser()["session_id"]
    answer = first(HEARTBEAT, {"sessions": [session_id], "active": [session_id]}).get_json()
    assert answer == {"stop": [session_id], "categories": {}}  # not placed on h1: nothing of it is told


@pytest.fixture(autouse=True)
def unfrozen():
    yield
    clock.unfreeze()


@pytest.mark.parametrize("address", ["file:///etc/passwd#", "ftp://127.0.0.1/", "https://127.0.0.1:1",
                                     "http://user:pw@127.0.0.1:1", "http://127.0.0.1:1/path", "http://127.0.0.1:1?x=1",
                                     "http://", "http://h:99999", "http://" + "h" * 300, "http://\ud800:1", 12])
def test_a_host_registers_at_a_plain_http_address_only(add_host, address):
    """The app calls a host's address with its key: never a file, a path of another service, or userinfo; and over
    plain HTTP only, as a host serves it (the relay would send the key in clear to an https address's port)."""
    _, post = add_host("h1", register=False)
    answer = post(REGISTER, dict(REGISTRATION, address=address))
    assert answer.status_code == 400 and answer.get_json()["details"][0]["field"] == "address"


def test_the_app_opens_no_other_scheme_than_http_for_a_host(app, tmp_path):
    (tmp_path / "leak.json").write_text('{"Browser": "a file of the app server"}')
    with app.app_context(), db.connection_context():
        hosts.add("odd", "http://127.0.0.1:1")
        host = BrowserHost.get(BrowserHost.name == "odd")
    host.address = f"file://{tmp_path}/leak.json#"
    with app.app_context(), pytest.raises(host_client.HostError):
        host_client.send(host, "GET", "/health", timeout=1)


def test_a_request_with_too_many_items_is_413_and_hostile_values_refuse_their_report_alone(app, client, add_host,
                                                                                           new_browser):
    _, post = add_host("h1")
    session_id = new_browser()["session_id"]
    on_host(app, session_id, "h1")
    many = [{"session_id": session_id, "kind": "activity"}] * 5001
    assert post(REPORTS, {"reports": many}).status_code == 413
    results = post.reports(telemetry(session_id, 2**63, console("x")),
                           telemetry(session_id, 1, "not an event", [1]),
                           telemetry(session_id, 1, console("x"), lost=2**40),
                           {"session_id": session_id, "kind": "logs", "batch": 1, "source": "elsewhere",
                            "log_name": "x", "lines": [{"message": "m"}]},
                           {"session_id": session_id, "kind": "logs", "batch": 1, "source": "supervisor",
                            "log_name": "chromium", "lines": [{"message": "nul \x00 inside"}]})
    assert [r["status"] for r in results] == ["refused"] * 4 + ["ok"]
    response = client.get(f"/browsers/{session_id}/logs/stream?source=supervisor&supervisor_process=chromium"
                          "&follow=false")
    stream = response.get_data(as_text=True)
    response.close()  # the stream's slot goes back (a stream holds one until closed)
    assert [json.loads(line[5:])["message"] for line in stream.splitlines() if line.startswith("data:")] == [
        "nul \ufffd inside"]
    assert post(HEARTBEAT, {"sessions": ["x"] * 5001, "active": []}).status_code == 400


def test_an_ended_session_of_another_host_tells_nothing(app, client, add_host, new_browser):
    _, first = add_host("h1")
    _, second = add_host("h2")
    session_id = new_browser()["session_id"]
    on_host(app, session_id, "h1")
    assert first.reports(telemetry(session_id, 1, console("a")))[0]["status"] == "ok"
    client.delete(f"/browsers/{session_id}")
    [result] = second.reports(telemetry(session_id, 1, console("a")))
    assert result["status"] == "refused" and "last_seq" not in result


@pytest.mark.parametrize("owner", [None, 0, "0", os.geteuid()])
def test_the_relay_connects_to_no_socket_a_host_names_unless_a_sandbox_user_owns_it(monkeypatch, tmp_path, owner):
    """A worker relays straight to a same-machine host's DevTools socket; one the host names that is root's or
    the worker's own (a docker socket, say) is not opened: the client goes through the host's relay instead."""
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(tmp_path / "some.sock"))
    listener.listen()
    endpoint = {"browser_path": "/devtools/browser/x", "socket": str(tmp_path / "some.sock"), "owner": owner}
    monkeypatch.setattr(host_client, "send", lambda *args, **kwargs: endpoint)
    try:
        assert relay._open_direct(SimpleNamespace(id="s1", host=None), "") is None
        listener.settimeout(0.2)
        with pytest.raises(TimeoutError):
            listener.accept()  # nothing connected
    finally:
        listener.close()


def test_a_target_id_that_is_not_one_is_404_before_anything_is_relayed(app, client, new_browser, monkeypatch):
    """The id goes into the request line to the browser: a CR LF in it would add lines of the client's."""
    from app.browsers import views
    from app.browsers.drivers import HostDriver

    session_id = new_browser()["session_id"]
    with app.app_context(), db.connection_context():
        BrowserSession.update(driver=HostDriver.name).where(BrowserSession.id == session_id).execute()
    relayed = []
    monkeypatch.setattr(views.relay, "relay", lambda session, path: relayed.append(path) or ("", 204))
    upgrade = {"Upgrade": "websocket", "Connection": "Upgrade"}
    assert client.get(f"/browsers/{session_id}/cdp/devtools/page/x%0D%0AX-Injected:%20yes",
                      headers=upgrade).status_code == 404
    assert client.get(f"/browsers/{session_id}/cdp/devtools/page/0A1B2C3D", headers=upgrade).status_code == 204
    assert relayed == ["/devtools/page/0A1B2C3D"]


def test_a_hosts_answered_calls_are_logged_at_debug_and_its_refused_ones_at_info(caplog, add_host):
    """A host heart-beats every 2 s: its calls would be most of the request log."""
    _, post = add_host("h1")
    caplog.set_level("DEBUG", logger="app.requests")
    post(HEARTBEAT, {"sessions": [], "active": []})
    HostPoster(post.client, "lbh_wrong")(HEARTBEAT, {"sessions": [], "active": []})
    levels = [(record.levelname, record.getMessage().split()[2]) for record in caplog.records
              if record.name == "app.requests"]
    assert levels == [("DEBUG", "200"), ("INFO", "401")]


def test_a_host_fetches_an_extension_of_its_own_sessions_only(app, client, add_host, new_browser):
    """By the archive's hash, streamed; another host, or one whose session ended, is told there is none."""
    from lantern_wire.reports import EXTENSIONS
    from tests.extensions.test_extensions import make_zip, upload

    _, first = add_host("h1")
    _, second = add_host("h2")
    data = make_zip()
    extension = upload(client, data, name="demo").get_json()
    digest = hashlib.sha256(data).hexdigest()
    unnamed = hashlib.sha256(make_zip({"manifest.json": "{}"})).hexdigest()
    session_id = new_browser(extensions=[{"id": extension["id"]}])["session_id"]
    on_host(app, session_id, "h1")

    def fetch(poster, name):
        response = poster.client.get(f"{EXTENSIONS}/{name}", headers={"Authorization": f"Bearer {poster.credential}"})
        body = response.data
        response.close()
        return response.status_code, body

    assert fetch(first, digest) == (200, data)
    assert fetch(second, digest)[0] == 404 and fetch(first, unnamed)[0] == 404
    assert fetch(first, "../" + digest)[0] == 404 and fetch(first, digest.upper())[0] == 404
    client.delete(f"/browsers/{session_id}")
    assert fetch(first, digest)[0] == 404
