"""Bearer authentication and project scoping (spec part 5)."""
import pytest
from flask import Blueprint, g

from app.core import clock
from app.core.db import db
from app.orgs.models import ApiKey
from tests.conftest import client_for, scoped_client


@pytest.mark.parametrize("header", [None, "", "Bearer", "Bearer ", "Basic abc", "sk_nope", "Bearer sk_unknown"])
def test_missing_malformed_or_unknown_key_is_401(anonymous, header):
    headers = {"Authorization": header} if header is not None else {}
    response = anonymous.get("/org/projects", headers=headers)
    assert response.status_code == 401
    assert response.get_json()["code"] == "unauthorized"
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


def test_unknown_route_without_key_is_401_not_404(anonymous):
    assert anonymous.get("/nothing/here").status_code == 401


def test_openapi_document_and_docs_are_public(anonymous):
    assert anonymous.get("/openapi.json").status_code == 200
    assert anonymous.get("/docs").status_code == 200


def test_expired_key_is_401(app, owner_key, client):
    new = client.post("/org/api_keys", json={"name": "short", "days_to_expire": 1}).get_json()
    short = client_for(app, new["key"])
    assert short.get("/org/projects").status_code == 200
    clock.freeze(clock.now())
    clock.advance(days=1, seconds=1)
    response = short.get("/org/projects")
    assert response.status_code == 401
    assert "expired" in response.get_json()["message"]


def test_deleted_key_is_401(app, client):
    new = client.post("/org/api_keys", json={"name": "gone"}).get_json()
    assert client.delete(f"/org/api_keys/{new['id']}").status_code == 204
    assert client_for(app, new["key"]).get("/org/projects").status_code == 401


def test_keys_are_stored_only_as_hash_and_mask(app, client):
    new = client.post("/org/api_keys", json={"name": "k"}).get_json()
    with app.app_context(), db.connection_context():
        stored = ApiKey.get_by_id(new["id"])
        columns = [str(v) for v in stored.__data__.values()]
    assert not any(new["key"] in c for c in columns)
    assert not any(new["key"][3:-4] in c for c in columns)
    assert new["masked_key"] == "sk_..." + new["key"][-4:]


def test_without_header_requests_act_on_default_project(client):
    new = client.post("/org/api_keys", json={"name": "k"}).get_json()
    assert new["project_id"] is None


def project(client, name):
    return client.post("/org/projects", json={"name": name}).get_json()


def test_unknown_or_archived_project_header_is_404_project_not_found(app, owner_key, client):
    archived = project(client, "old")
    client.patch(f"/org/projects/{archived['id']}", json={"status": "archived"})
    for headers in ({"X-Kernel-Project-Id": "nope"}, {"X-Kernel-Project": "nope"},
                    {"X-Kernel-Project-Id": archived["id"]}, {"X-Kernel-Project": "old"}):
        response = client.get("/org/limits", headers=headers)
        assert response.status_code == 404, headers
        assert response.get_json()["code"] == "project_not_found"


def test_project_header_takes_id_or_name(client):
    p = project(client, "Alpha")
    assert client.get("/org/limits", headers={"X-Kernel-Project": "alpha"}).status_code == 200
    assert client.get("/org/limits", headers={"X-Kernel-Project": p["id"]}).status_code == 200
    # X-Kernel-Project-Id takes ids only
    assert client.get("/org/limits", headers={"X-Kernel-Project-Id": "Alpha"}).status_code == 404


def test_conflicting_project_headers_are_400(client):
    a, b = project(client, "a"), project(client, "b")
    response = client.get("/org/limits", headers={"X-Kernel-Project-Id": a["id"], "X-Kernel-Project": b["id"]})
    assert response.status_code == 400


def test_project_scoped_key_naming_another_project_is_403(app, client):
    a, b = project(client, "a"), project(client, "b")
    scoped = client.post("/org/api_keys", json={"name": "a-key", "project_id": a["id"]}).get_json()
    scoped_client = client_for(app, scoped["key"])
    assert scoped_client.get("/org/limits", headers={"X-Kernel-Project-Id": a["id"]}).status_code == 200
    response = scoped_client.get("/org/limits", headers={"X-Kernel-Project-Id": b["id"]})
    assert response.status_code == 403
    assert response.get_json()["code"] == "forbidden"


def test_keys_of_another_organization_see_nothing_of_this_one(app, make_org, client):
    other = client_for(app, make_org("Other", "o@other.test").plaintext)
    mine = project(client, "mine")
    assert other.get(f"/org/projects/{mine['id']}").status_code == 404
    assert other.get("/org/limits", headers={"X-Kernel-Project-Id": mine["id"]}).status_code == 404
    assert [p["name"] for p in other.get("/org/projects").get_json()] == ["Default"]


@pytest.fixture
def whoami(app):
    """A route that answers the project a request acts in."""
    probe = Blueprint("probe", __name__)
    probe.route("/probe")(lambda: {"project": g.project.name})
    app.register_blueprint(probe)


def test_the_project_a_request_acts_in(app, client, whoami):
    assert client.get("/probe").get_json() == {"project": "Default"}
    default = client.get("/org/projects").get_json()[0]
    scoped_to = project(client, "scoped")
    assert client.get("/probe", headers={"X-Kernel-Project": "SCOPED"}).get_json() == {"project": "scoped"}
    scoped = scoped_client(app, client, scoped_to["id"])
    assert scoped.get("/probe").get_json() == {"project": "scoped"}
    # Deleting the default project hands the default to the oldest other active project.
    project(client, "later")
    assert client.delete(f"/org/projects/{default['id']}").status_code == 204
    assert client.get("/probe").get_json() == {"project": "scoped"}
    client.patch(f"/org/projects/{scoped_to['id']}", json={"status": "archived"})
    assert client.get("/probe").get_json() == {"project": "later"}
    # The scoped key is now unusable, and says no more than any unusable key (not "project not found").
    for path in ("/probe", "/org/api_keys", "/org/limits"):
        response = scoped.get(path)
        assert response.status_code == 401, path
        assert response.get_json() == {"code": "unauthorized", "message": "Invalid API key.", "details": []}


def test_options_needs_a_key_too(anonymous):
    assert anonymous.options("/org/projects").status_code == 401


def test_deleted_project_header_is_404(client):
    gone = project(client, "gone")
    client.delete(f"/org/projects/{gone['id']}")
    response = client.get("/org/limits", headers={"X-Kernel-Project-Id": gone["id"]})
    assert response.status_code == 404 and response.get_json()["code"] == "project_not_found"


def test_plaintext_keys_never_reach_the_logs(app, client, caplog):
    caplog.set_level("DEBUG")
    created = client.post("/org/api_keys", json={"name": "k"}).get_json()
    client_for(app, created["key"]).get("/org/limits")
    cli = app.test_cli_runner().invoke(args=["orgs", "create", "--name", "Logged", "--owner-email", "l@l.test"])
    cli_key = cli.output.strip().splitlines()[-1]
    assert "app.requests" in {r.name for r in caplog.records}, "requests are logged"
    assert created["key"] not in caplog.text and cli_key not in caplog.text
