"""#26.3: a body the endpoint cannot read in the type it was sent is 415 unsupported_media_type naming the
type it reads, on every endpoint that reads a body; never a silent success with the body ignored."""
import re

import pytest

SENT_AS = [None, "text/plain", "application/x-www-form-urlencoded"]


@pytest.mark.parametrize("content_type", SENT_AS)
def test_a_json_body_sent_as_another_type_is_415_and_nothing_is_created(client, content_type):
    headers = {"Content-Type": content_type} if content_type else {}
    answer = client.post("/org/projects", data='{"name": "sent as text"}', headers=headers)
    assert answer.status_code == 415
    body = answer.get_json()
    assert body["code"] == "unsupported_media_type" and "application/json" in body["message"]
    assert all(p["name"] != "sent as text" for p in client.get("/org/projects").get_json())


def test_json_types_and_an_empty_body_are_read_as_before(client):
    assert client.post("/org/projects", data='{"name": "a"}', content_type="application/json").status_code == 201
    assert client.post("/org/projects", data='{"name": "b"}',
                       content_type="application/merge-patch+json").status_code == 201
    created = client.post("/browsers")  # no body at all: the defaults
    assert created.status_code == 201 and created.get_json()["headless"] is False


def test_a_json_body_sent_to_the_multipart_upload_is_415_naming_multipart(client):
    answer = client.post("/extensions", json={"name": "x"})
    assert answer.status_code == 415 and "multipart/form-data" in answer.get_json()["message"]


def test_every_endpoint_that_reads_a_body_refuses_one_it_cannot_read(client, anonymous):
    spec = anonymous.get("/openapi.json").get_json()
    checked = []
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            if method not in ("post", "put", "patch", "delete") or operation.get("deprecated"):
                continue  # (path-level "parameters"; the deprecated routes answer 410 Gone first)
            content = (operation.get("requestBody") or {}).get("content", {})
            if not content:
                continue
            url = re.sub(r"\{[^}]+\}", "nothing-here", path)
            sent = "text/plain" if "application/json" in content else "application/json"
            answer = client.open(url, method=method.upper(), data='{"a": 1}', content_type=sent)
            assert answer.status_code == 415, (method, path, answer.status_code, answer.get_data(as_text=True))
            assert "415" in operation["responses"], (method, path)  # and the OpenAPI document says so
            checked.append((method, path))
    assert len(checked) > 20  # every body-taking endpoint of the API, not a few
