"""JSON that Python parses but Lantern cannot store or send back is a 400, never a 500 (#11 items 6-8)."""
import json

import pytest

from app.core import strictjson

DEEP = "[" * 2000 + "]" * 2000
HUGE_INTEGER = "1" * 5000
LONE_SURROGATE = '"\\ud800"'


def raw(client, path, text):
    return client.post(path, data=text, content_type="application/json")


@pytest.fixture
def targets(client):
    """A body for each kind of JSON field the probe reached, with a hole where the hostile value goes."""
    session = client.post("/browsers", json={"telemetry": {"enabled": True}}).get_json()["session_id"]
    invocation = client.post("/invocations", json={"app_name": "a", "action_name": "b", "version": "1",
                                                   "async": True}).get_json()["id"]
    return {
        "project name": ("/org/projects", '{"name": %s}'),
        "invocation log message": (f"/invocations/{invocation}/logs", '{"message": %s}'),
        "browser tags": ("/browsers", '{"tags": {"k": %s}}'),
        "telemetry data": (f"/browsers/{session}/telemetry/events",
                           '{"events": [{"type": "console_log", "source": {"kind": "cdp"}, "data": {"text": %s}}]}'),
        "credential values": ("/credentials", '{"name": "c", "domain": "x.test", "values": {"password": %s}}'),
    }


@pytest.mark.parametrize("hostile", [DEEP, HUGE_INTEGER, LONE_SURROGATE, "1e999", "NaN"],
                         ids=["deep", "huge-integer", "lone-surrogate", "overflow", "nan"])
def test_hostile_values_are_400_wherever_they_appear(client, targets, hostile):
    for what, (path, template) in targets.items():
        response = raw(client, path, template % hostile)
        assert response.status_code == 400, (what, response.get_json())
        body = response.get_json()
        assert body["code"] == "bad_request" and body["message"].startswith("The request body "), (what, body)


def test_raw_surrogate_bytes_are_invalid_utf8(client):
    response = client.post("/org/projects", data=b'{"name": "\xed\xa0\x80"}', content_type="application/json")
    assert response.status_code == 400
    assert response.get_json()["message"] == "The request body is not valid UTF-8."


def test_a_json_string_field_holding_hostile_json_is_400(client):
    for document in (DEEP, HUGE_INTEGER, LONE_SURROGATE):
        body = {"app_name": "a", "action_name": "b", "version": "1", "async": True, "payload": document}
        response = raw(client, "/invocations", json.dumps(body))
        assert response.status_code == 400, document[:10]
        assert response.get_json()["details"][0]["field"] == "payload"


def test_paired_surrogates_and_reasonable_nesting_are_accepted(client):
    emoji = client.post("/org/projects", data='{"name": "lamp \\ud83d\\udca1"}', content_type="application/json")
    assert emoji.status_code == 201 and emoji.get_json()["name"] == "lamp \U0001f4a1"
    nested = "[" * strictjson.MAX_DEPTH + "]" * strictjson.MAX_DEPTH
    assert strictjson.loads(nested) is not None
    with pytest.raises(strictjson.InvalidJson):
        strictjson.loads("[" + nested + "]")
