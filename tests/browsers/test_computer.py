"""The computer API's checks before anything reaches a browser (app/browsers/computer*.py); what the browser
does is tested on a real one (tests/browsers/live/test_computer.py)."""
import json
import time

import pytest

from app.browsers import computer, host_client, hosts, lifecycle
from app.browsers.models import BrowserSession
from app.core import clock
from app.core.db import db
from tests.browsers.conftest import SlowHost, on_host


@pytest.fixture
def session_id(new_browser):
    return new_browser()["session_id"]


@pytest.mark.parametrize("path, body, field", [
    ("click_mouse", {"y": 1}, "x"), ("click_mouse", {"x": -1, "y": 1}, "x"), ("click_mouse", {"x": 1.5, "y": 1}, "x"),
    ("click_mouse", {"x": 1, "y": 1, "button": "thumb"}, "button"), ("click_mouse", {"x": 1, "y": 1, "num_clicks": 0},
                                                                      "num_clicks"),
    ("drag_mouse", {"path": [[1, 1]]}, "path"), ("drag_mouse", {"path": [[1, 1], [2]]}, "path"),
    ("press_key", {"keys": []}, "keys"), ("type", {"text": ""}, "text"), ("type", {"text": "a", "delay": 60001},
                                                                           "delay"),
    ("scroll", {"x": 1, "y": 1, "delta_y": "3"}, "delta_y"), ("cursor", {}, "hidden"),
    ("screenshot", {"region": {"x": 0, "y": 0, "width": 0, "height": 1}}, "region"),
    ("batch", {"actions": []}, "actions"),
    ("type", {"text": "bell\x07"}, "U+0007"), ("type", {"text": "esc \x1b"}, "U+001B"),
    # Past what Kernel takes, or past the bounds of one request's work (docs/browsers.md).
    ("scroll", {"x": 1, "y": 1, "delta_y": 10_001}, "delta_y"), ("scroll", {"x": 1, "y": 1, "delta_x": -10_001},
                                                                 "delta_x"),
    ("type", {"text": "a", "typo_chance": 0.11}, "typo_chance"), ("type", {"text": "a", "typo_chance": -0.01},
                                                                  "typo_chance"),
    ("type", {"text": "a", "typo_chance": "0.05"}, "typo_chance"), ("type", {"text": "a", "typo_chance": True},
                                                                    "typo_chance"),
    ("type", {"text": "a", "smooth": "yes"}, "smooth"), ("click_mouse", {"x": 1, "y": 1, "num_clicks": 101},
                                                          "num_clicks"),
    ("drag_mouse", {"path": [[1, 1], [2, 2], [3, 3]], "steps_per_segment": 5_001}, "steps_per_segment"),
    # Kernel's 400 for a scroll of nothing.
    ("scroll", {"x": 1, "y": 1}, "delta_y"), ("scroll", {"x": 1, "y": 1, "delta_x": 0, "delta_y": 0}, "delta_y"),
    ("batch", {"actions": [{"type": "scroll", "scroll": {"x": 1, "y": 1}}]}, "delta_y"),
    ("batch", {"actions": [{"type": "type_text", "type_text": {"text": "a", "typo_chance": 0.5}}]}, "typo_chance"),
])
def test_a_malformed_action_is_a_400_naming_its_field(client, session_id, path, body, field):
    response = client.post(f"/browsers/{session_id}/computer/{path}", json=body)
    assert response.status_code == 400, response.get_json()
    assert field in str(response.get_json()["details"])


def test_a_batch_action_carries_the_body_its_type_names(client, session_id):
    response = client.post(f"/browsers/{session_id}/computer/batch",
                           json={"actions": [{"type": "sleep", "click_mouse": {"x": 1, "y": 1}}]})
    assert response.status_code == 400 and "exactly one action body" in str(response.get_json()["details"])


def test_an_external_drivers_session_has_no_computer_here_and_an_unknown_one_is_404(client, session_id):
    response = client.post(f"/browsers/{session_id}/computer/click_mouse", json={"x": 1, "y": 1})
    assert response.status_code == 501 and response.get_json()["code"] == "computer_not_served"
    assert client.post("/browsers/nope/computer/click_mouse", json={"x": 1, "y": 1}).status_code == 404


def test_every_method_of_the_sdk_has_its_route(anonymous):
    paths = anonymous.get("/openapi.json").get_json()["paths"]
    served = {path.rsplit("/computer/", 1)[1] for path in paths if "/computer/" in path}
    assert served == {"batch", "click_mouse", "clipboard/read", "clipboard/write", "cursor", "drag_mouse",
                      "get_mouse_position", "move_mouse", "press_key", "screenshot", "scroll", "type"}


class ComputerHost(SlowHost):
    """A host's computer API answering `reply` (status, body) after `delay` seconds."""

    def __init__(self, reply=(200, {"results": [None]}), delay=0.0):
        super().__init__(reply, delay)


@pytest.fixture
def on_fake_host(app, session_id):
    """on_fake_host(host, session=the test's) -> the session, run by `host` (a ComputerHost, stopped after the test,
    or None: a host that is gone, where connections are refused)."""
    started = []

    def use(host, session=session_id):
        if host is None:
            host = ComputerHost().start()
            host.stop()
        else:
            started.append(host.start())
        with app.app_context(), db.connection_context():
            hosts.add("h1", host.url)
            BrowserSession.update(driver="host").where(BrowserSession.id == session).execute()
        on_host(app, session, "h1")
        return session

    yield use
    for host in started:
        host.stop()


PART_WAY = (502, {"code": "computer_action_failed", "index": 1, "message": "action 1 (type_text) failed on the "
                                                                           "session's screen"})
CLICK = ("click_mouse", {"x": 1, "y": 1})
TWO_ACTIONS = ("batch", {"actions": [{"type": "click_mouse", "click_mouse": {"x": 1, "y": 1}},
                                     {"type": "type_text", "type_text": {"text": "naïve"}}]})


@pytest.mark.parametrize("host, call", [
    (lambda: ComputerHost(delay=1.5), CLICK), (lambda: ComputerHost(delay=1.5), ("type", {"text": "hello"})),
    (lambda: ComputerHost(PART_WAY), TWO_ACTIONS), (lambda: ComputerHost((504, b"<html>a proxy's</html>")), CLICK),
], ids=["a click timed out", "text timed out", "a batch failed part-way", "a proxy answered for the host"])
def test_actions_that_may_have_run_are_a_502_the_sdks_do_not_send_again(client, on_fake_host, monkeypatch, host,
                                                                        call):
    """The SDKs resend a 502 unless told not to: the click or the text would be done twice."""
    monkeypatch.setattr(computer, "ACTION_SECONDS", 0.3)
    session_id = on_fake_host(host())
    path, body = call
    response = client.post(f"/browsers/{session_id}/computer/{path}", json=body)
    assert response.status_code == 502 and response.get_json()["code"] == "computer_action_failed"
    assert response.headers["x-should-retry"] == "false" and "Retry-After" not in response.headers
    assert "may have run" in response.get_json()["message"]


def test_a_click_answered_without_its_results_ran_and_is_not_sent_again(client, on_fake_host):
    session_id = on_fake_host(ComputerHost((200, {"position": [1, 1]})))
    response = client.post(f"/browsers/{session_id}/computer/click_mouse", json={"x": 1, "y": 1})
    assert response.status_code == 502 and response.headers["x-should-retry"] == "false"
    assert response.get_json()["message"] == "The browser host answered without the actions' results."


@pytest.mark.parametrize("host, call", [
    (lambda: None, CLICK), (lambda: None, TWO_ACTIONS), (lambda: ComputerHost(delay=1.5), ("screenshot", {})),
    (lambda: ComputerHost(delay=1.5), ("get_mouse_position", None)),
    (lambda: ComputerHost((200, {"position": [1, 1]})), ("get_mouse_position", None)),
], ids=["a click to a host that is gone", "a batch to a host that is gone", "a screenshot timed out",
        "a read of the mouse timed out", "a read of the mouse answered wrongly"])
def test_actions_that_did_nothing_or_only_read_are_a_502_worth_sending_again(app, client, on_fake_host, monkeypatch,
                                                                            host, call):
    monkeypatch.setattr(computer, "ACTION_SECONDS", 0.3)
    session_id = on_fake_host(host())
    path, body = call
    response = client.post(f"/browsers/{session_id}/computer/{path}", json=body)
    assert response.status_code == 502 and response.get_json()["code"] == "computer_action_failed"
    assert "x-should-retry" not in response.headers
    assert response.headers["Retry-After"] == str(app.config["BROWSER_CAPACITY_RETRY_AFTER_SECONDS"])


class RecordingHost(ComputerHost):
    """A host's computer API that keeps the bodies and actions it is sent and ran them all."""

    def __init__(self):
        super().__init__()
        self.actions, self.bodies = [], []

    def post(self, handler):
        body = json.loads(handler.rfile.read(int(handler.headers["Content-Length"])))
        self.bodies.append(body)
        self.actions.append(body["actions"])
        handler.answer(200, {"results": [None] * len(body["actions"])})


@pytest.mark.parametrize("path, body, sent", [
    # Kernel's docs scroll 120 wheel clicks; its API takes any number (here, up to 10,000 either way).
    ("scroll", {"x": 300, "y": 400, "delta_x": 0, "delta_y": 120}, {"delta_x": 0, "delta_y": 120}),
    ("scroll", {"x": 300, "y": 400, "delta_y": -10_000, "delta_x": 10_000}, {"delta_y": -10_000}),
    # Newer SDKs' type_text: typo_chance types at a person's pace unless smooth is false (Kernel then ignores it).
    ("type", {"text": "Hello", "typo_chance": 0.05}, {"text": "Hello", "smooth": True, "typo_chance": 0.05}),
    ("type", {"text": "Hello", "typo_chance": 0.1, "smooth": True}, {"smooth": True, "typo_chance": 0.1}),
    ("type", {"text": "Hello", "smooth": True}, {"smooth": True, "typo_chance": 0}),
    ("type", {"text": "Hello", "typo_chance": 0.05, "smooth": False, "delay": 5},
     {"text": "Hello", "delay": 5, "smooth": None, "typo_chance": None}),
    ("type", {"text": "Hello"}, {"text": "Hello", "smooth": None, "typo_chance": None}),
    ("batch", {"actions": [{"type": "type_text", "type_text": {"text": "Hi", "typo_chance": 0.1}}]},
     {"type": "type_text", "text": "Hi", "smooth": True, "typo_chance": 0.1}),
    ("click_mouse", {"x": 1, "y": 1, "num_clicks": 20}, {"num_clicks": 20}),
    ("drag_mouse", {"path": [[1, 1], [2, 2]], "steps_per_segment": 500}, {"steps_per_segment": 500}),
])
def test_the_values_kernels_docs_and_newer_sdks_send_reach_the_host(client, on_fake_host, path, body, sent):
    host = RecordingHost()
    session_id = on_fake_host(host)
    response = client.post(f"/browsers/{session_id}/computer/{path}", json=body)
    assert response.status_code == 204, response.get_json()
    [[action]] = host.actions
    assert {name: action.get(name) for name in sent} == sent  # None: not sent


def test_a_persons_typing_and_a_drags_moves_are_waited_for(client, on_fake_host, monkeypatch):
    """A text typed at a person's pace takes far longer than its `delay` says, and each move of a drag a frame of
    the page at least, whatever its step_delay_ms: the app waits for all of it."""
    session_id = on_fake_host(RecordingHost())
    timeouts = []
    send = host_client.send
    monkeypatch.setattr(host_client, "send", lambda *args, timeout, **options: timeouts.append(timeout) or send(
        *args, timeout=timeout, **options))
    text = "word " * 200
    for path, body in (("type", {"text": text}), ("type", {"text": text, "typo_chance": 0.1}),
                       ("drag_mouse", {"path": [[1, 1], [2, 2]], "steps_per_segment": 10_000, "step_delay_ms": 0})):
        assert client.post(f"/browsers/{session_id}/computer/{path}", json=body).status_code == 204
    instant, human, drag = timeouts
    assert instant < computer.ACTION_SECONDS + 30
    assert human > computer.ACTION_SECONDS + len(text) * 0.12 + 200 * 0.3  # its keys and pauses at their longest
    assert drag > computer.ACTION_SECONDS + 10_000 * 0.017  # a move is answered at the page's next frame (60 Hz)


@pytest.mark.parametrize("path, body, field", [
    ("type", {"text": "word " * 2000, "smooth": True}, "text"),  # a person types 10,000 characters in over 10 min
    ("press_key", {"keys": ["a"] * 11, "duration": 60_000}, "duration"),
    ("drag_mouse", {"path": [[1, 1], [2, 2]], "steps_per_segment": 10_000, "step_delay_ms": 100}, "step_delay_ms"),
    ("batch", {"actions": [{"type": "sleep", "sleep": {"duration_ms": 60_000}}] * 11}, "actions"),
])
def test_a_request_that_would_hold_the_screen_past_ten_minutes_is_a_400_naming_it(client, on_fake_host, path, body,
                                                                                  field):
    host = RecordingHost()
    session_id = on_fake_host(host)
    response = client.post(f"/browsers/{session_id}/computer/{path}", json=body)
    assert response.status_code == 400 and response.get_json()["details"][0]["field"] == field
    assert "at most 10" in response.get_json()["message"] and host.actions == []


def test_the_request_holds_no_database_connection_while_its_host_runs_the_actions(client, new_browser, on_fake_host,
                                                                                 monkeypatch):
    """A worker has 20 connections and a person's typing can take minutes: the request gives its connection back for
    the host's call, and takes one again to record the call (its api_call event) and the session's activity."""
    session_id = on_fake_host(RecordingHost(), new_browser(telemetry={
        "enabled": True, "browser": {"control": {"enabled": True}}})["session_id"])
    during = []
    send = host_client.send
    monkeypatch.setattr(host_client, "send", lambda *args, timeout, **options: during.append(db.is_closed()) or send(
        *args, timeout=timeout, **options))
    assert client.post(f"/browsers/{session_id}/computer/type", json={"text": "hi", "smooth": True}).status_code == 204
    assert during == [True]
    events = client.get(f"/browsers/{session_id}/telemetry/events").get_json()
    assert [(e["event"]["data"]["operation_id"], e["event"]["data"]["status"]) for e in events
            if e["event"]["type"] == "api_call"] == [("TypeText", 204)]


def test_a_session_is_active_for_as_long_as_its_host_runs_its_actions(app, client, new_browser, on_fake_host,
                                                                      monkeypatch):
    """A person's typing can outlast the session's timeout_seconds: the request is the session's activity all along
    (the idle sweep leaves the session while the host types), and the session times out that long after the typing
    ended, not before."""
    clock.freeze(clock.now())
    monkeypatch.setattr(computer, "ACTIVITY_SHARE", 0.01)  # every 0.1 s of a 10 s timeout

    class Typing(ComputerHost):
        def post(self, handler):
            handler.rfile.read(int(handler.headers["Content-Length"]))
            for _ in range(3):  # 24 s of the app's clock, sweeping as every worker does
                clock.advance(seconds=8)
                time.sleep(0.3)
                with app.app_context():
                    lifecycle.end_idle_sessions()
            handler.answer(200, {"results": [None]})

    session_id = on_fake_host(Typing(), new_browser(timeout_seconds=10)["session_id"])
    response = client.post(f"/browsers/{session_id}/computer/type", json={"text": "words " * 20, "smooth": True})
    assert response.status_code == 204
    clock.advance(seconds=9)
    assert client.get(f"/browsers/{session_id}").status_code == 200
    clock.advance(seconds=11)
    assert client.get(f"/browsers/{session_id}").status_code == 404


@pytest.mark.parametrize("tries, resend", [(None, False), ("0", False), ("1", True), ("2", True)])
def test_the_host_is_told_a_call_the_sdk_sends_again(client, on_fake_host, tries, resend):
    """The SDKs send a call again once they give up waiting for it (60 s by default), counting in
    x-stainless-retry-count: the host answers such a resend what the first send did, once it is done, rather than
    typing the text twice (browserhost/computer.py)."""
    host = RecordingHost()
    session_id = on_fake_host(host)
    headers = {"x-stainless-retry-count": tries} if tries else {}
    response = client.post(f"/browsers/{session_id}/computer/type", json={"text": "hi"}, headers=headers)
    assert response.status_code == 204 and host.bodies[0]["resend"] is resend
