"""The control API's shapes: JSON both ways, their defaults once, and a refusal naming the field."""
import pytest
from pydantic import ValidationError

from lantern_wire import control
from lantern_wire.control import (
    BrowserSpec,
    Categories,
    ClientChange,
    ComputerRequest,
    ReplayStart,
    StartRequest,
    ViewportChange,
)

SHAPES = [
    StartRequest.of(BrowserSpec(headless=False, memory="16GiB", viewport={"width": 1280, "height": 720},
                                location={"timezone": "Asia/Tokyo"}, allowed_hosts=["example.com"],
                                extensions=[{"id": "e1", "sha256": "ab" * 32}], kiosk_mode=True,
                                chrome_policy={"BookmarkBarEnabled": False}),
                    session_id="s1", profile_state={"cookies": [], "origins": []},
                    categories=Categories(revision=3, names={"console"}), start_seconds=12.5),
    ComputerRequest(actions=[{"type": "click_mouse", "x": 1, "y": 2}], resend=True),
    ReplayStart(replay_id="abc123", framerate=10, max_seconds=60, max_bytes=1000),
    ViewportChange(width=1024, height=768, restart=True, start_seconds=20),
    ClientChange(delta=-1, connection_id="c1", worker_pid=7),
    Categories(revision=2, names={"network", "console"}),
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda shape: type(shape).__name__)
def test_a_shape_comes_back_as_it_was_sent(shape):
    assert type(shape).model_validate_json(shape.model_dump_json()) == shape


def test_a_start_request_carries_its_spec():
    spec = BrowserSpec(headless=False, viewport={"width": 1024, "height": 768}, stealth=True)
    assert StartRequest.of(spec, session_id="s1").spec == spec


def test_the_defaults_live_in_the_spec():
    spec = StartRequest.model_validate({"session_id": "s1"}).spec
    assert spec.viewport.size == (1920, 1080) and spec.headless and spec.extensions == []
    assert spec.memory_mb == 1024 and BrowserSpec(headless=False).memory_mb == 8192
    assert BrowserSpec(memory="4GiB").memory_mb == 4096
    assert StartRequest(session_id="s1").start_seconds == control.DEFAULT_START_SECONDS


def test_categories_travel_sorted_and_the_newest_revision_wins():
    assert Categories(revision=1, names={"page", "console"}).model_dump(mode="json") == {
        "revision": 1, "names": ["console", "page"]}
    old, new = Categories(revision=1, names={"console"}), Categories(revision=2)
    assert old.newest(new) is new and new.newest(old) is new and new.newest(Categories(revision=2)) is new


@pytest.mark.parametrize("shape, body, field", [
    (StartRequest, {"session_id": "s1", "viewport": {"width": "wide", "height": 1}}, "viewport.width"),
    (StartRequest, {"session_id": "s 1"}, "session_id"),
    (StartRequest, {"session_id": "s1", "memory": "3GiB"}, "memory"),
    (StartRequest, {"session_id": "s1", "gpu": True}, "gpu"),
    (StartRequest, {"session_id": "s1", "categories": {"revision": -1}}, "categories.revision"),
    (StartRequest, {"session_id": "s1", "start_seconds": 0}, "start_seconds"),
    (StartRequest, {"session_id": "s1", "extensions": [{"id": "e1", "sha256": "AB" * 32}]}, "extensions.0.sha256"),
    (StartRequest, {"session_id": "s1", "extensions": [{"id": "e1", "zip": "UEsFBg=="}]}, "extensions.0"),
    (ComputerRequest, {"actions": "click"}, "actions"),
    (ReplayStart, {"replay_id": "../x", "framerate": 1, "max_seconds": 1, "max_bytes": 1}, "replay_id"),
    (ViewportChange, {"width": 10}, "height"),
    (ClientChange, {"delta": 2, "connection_id": "c"}, "delta"),
    (Categories, {"names": ["Console!"]}, "names"),
])
def test_wrong_input_is_refused_naming_the_field(shape, body, field):
    with pytest.raises(ValidationError) as refused:
        shape.model_validate(body)
    named = [".".join(str(part) for part in error["loc"]) for error in refused.value.errors()]
    assert any(name == field or name.startswith(field + ".") for name in named), named


def test_a_shape_is_frozen():
    with pytest.raises(ValidationError):
        Categories().revision = 5


def test_paths_are_filled_from_their_templates():
    assert control.path(control.SESSION_REPLAY_STOP, session_id="s1", replay_id="r1") == "/sessions/s1/replays/r1/stop"
