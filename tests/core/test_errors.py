"""Every non-2xx answer has the error body of spec part 7."""
import pytest
from flask import Blueprint

from app.core import settings
from app.core.errors import validation_details


def assert_error_body(response, status, code):
    assert response.status_code == status
    body = response.get_json()
    assert body["code"] == code
    assert isinstance(body["message"], str) and body["message"]
    assert isinstance(body["details"], list)
    return body


def test_unknown_route_is_404_with_error_body(client):
    body = assert_error_body(client.get("/no/such/route"), 404, "not_found")
    assert "/no/such/route" in body["message"]


def test_wrong_method_is_405_with_allow_header(client):
    response = client.put("/org/projects")
    assert_error_body(response, 405, "method_not_allowed")
    assert "GET" in response.headers["Allow"]


def test_invalid_json_is_400(client):
    response = client.post("/org/projects", data="{not json", content_type="application/json")
    body = assert_error_body(response, 400, "bad_request")
    assert "JSON" in body["message"]


def test_validation_error_has_one_detail_per_field(client):
    response = client.post("/org/api_keys", json={"days_to_expire": 0, "surprise": 1})
    body = assert_error_body(response, 400, "bad_request")
    by_field = {d["field"]: d for d in body["details"]}
    assert set(by_field) == {"name", "days_to_expire", "surprise"}
    assert by_field["name"]["code"] == "required"
    assert by_field["surprise"]["code"] == "unknown_field"
    assert by_field["days_to_expire"]["code"] == "invalid"


def test_empty_json_body_is_accepted_where_the_body_is_optional(client):
    project = client.post("/org/projects", json={"name": "p"}).get_json()
    response = client.patch(f"/org/projects/{project['id']}/limits", data="", content_type="application/json")
    assert response.status_code == 200


def test_unexpected_exception_is_500_without_internals(app, client):
    boom = Blueprint("boom", __name__)

    @boom.route("/boom")
    def explode():
        raise RuntimeError("secret internals")

    app.register_blueprint(boom)
    app.testing = False  # let the handler answer instead of re-raising
    app.config["PROPAGATE_EXCEPTIONS"] = False
    response = client.get("/boom")
    body = assert_error_body(response, 500, "internal_error")
    assert "secret" not in response.get_data(as_text=True)
    assert body["details"] == []


@pytest.mark.parametrize("messages, expected", [
    ({"json": {"name": ["Missing data for required field."]}},
     [{"code": "required", "field": "name", "message": "Missing data for required field."}]),
    ({"json": {"a": {"b": ["Not a valid integer."]}}},
     [{"code": "invalid", "field": "a.b", "message": "Not a valid integer."}]),
    ({"json": {"_schema": ["Give one."]}}, [{"code": "invalid", "message": "Give one."}]),
])
def test_validation_details_flatten_nested_fields(messages, expected):
    assert validation_details(messages) == expected


def test_body_less_post_and_delete_with_json_content_type_are_accepted(client):
    key = client.post("/org/api_keys", json={"name": "k"}).get_json()
    rotated = client.post(f"/org/api_keys/{key['id']}/rotate", data="", content_type="application/json")
    assert rotated.status_code == 200
    deleted = client.delete(f"/org/api_keys/{rotated.get_json()['id']}", data="", content_type="application/json")
    assert deleted.status_code == 204


def test_oversized_body_is_413_with_error_body(app, client):
    settings.change(app, MAX_CONTENT_LENGTH=1024)
    response = client.post("/org/projects", data="x" * 2048, content_type="application/json")
    assert_error_body(response, 413, "payload_too_large")


def test_messages_with_braces_are_not_templates(app, client):
    from flask_smorest import abort
    boom = Blueprint("braces", __name__)
    boom.route("/braces")(lambda: abort(409, message="{not a template}"))
    app.register_blueprint(boom)
    assert client.get("/braces").get_json()["message"] == "{not a template}"


def test_nul_characters_and_out_of_range_values_are_400_on_every_database(client):
    for path in ("/profiles/a%00b", "/profiles?name=a%00", "/org/projects?query=%00"):
        response = client.get(path)
        assert response.status_code == 400, path
        assert response.get_json()["code"] == "bad_request"
    too_big = client.patch("/org/projects/Default/limits", json={"max_concurrent_sessions": 10**12})
    assert too_big.status_code == 400
    log = client.post("/invocations", json={"app_name": "a", "action_name": "b", "version": "1", "async": True})
    message = client.post(f"/invocations/{log.get_json()['id']}/logs", json={"message": "nul \u0000 here"})
    assert message.status_code == 400
