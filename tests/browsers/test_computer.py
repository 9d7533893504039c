"""The computer API's checks before anything reaches a browser (app/browsers/computer*.py); what the browser
does is tested on a real one (tests/browsers/live/test_computer.py)."""
import pytest


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
