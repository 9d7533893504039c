"""Project limits and organization limits (spec parts 2 and 8, contract 6.2)."""
from app.core.db import db
from app.orgs.models import Organization
from tests.conftest import scoped_client

EMPTY = {"max_concurrent_sessions": None, "max_concurrent_invocations": None, "max_pooled_sessions": None}


def limits_url(client):
    project = client.post("/org/projects", json={"name": "limited"}).get_json()
    return f"/org/projects/{project['id']}/limits"


def test_new_project_has_no_caps(client):
    assert client.get(limits_url(client)).get_json() == EMPTY


def test_patch_changes_only_present_fields_and_zero_or_null_removes(client):
    url = limits_url(client)
    both = client.patch(url, json={"max_concurrent_sessions": 5, "max_concurrent_invocations": 3}).get_json()
    assert both == {**EMPTY, "max_concurrent_sessions": 5, "max_concurrent_invocations": 3}
    assert client.patch(url, json={"max_concurrent_invocations": 4}).get_json()["max_concurrent_sessions"] == 5
    assert client.patch(url, json={"max_concurrent_sessions": 0}).get_json()["max_concurrent_sessions"] is None
    assert client.patch(url, json={"max_concurrent_invocations": None}).get_json() == EMPTY
    assert client.get(url).get_json() == EMPTY


def test_patch_validation(client):
    url = limits_url(client)
    for body in ({"max_concurrent_sessions": -1}, {"max_concurrent_invocations": "many"},
                 {"max_pooled_sessions": 2}, {"max_pooled_sessions": 0}, {"unknown": 1}):
        assert client.patch(url, json=body).status_code == 400, body
    assert client.patch(url, json={"max_concurrent_sessions": 2, "max_pooled_sessions": 1}).status_code == 400
    assert client.get(url).get_json() == EMPTY, "a refused request changes nothing"
    assert client.patch(url, json={"max_pooled_sessions": None}).status_code == 200


def test_limits_of_unknown_project_is_404(client):
    response = client.get("/org/projects/nope/limits")
    assert response.status_code == 404
    assert response.get_json()["code"] == "project_not_found"


def test_org_limits_report_limit_cap_and_usage(client):
    assert client.get("/org/limits").get_json() == {
        "max_concurrent_sessions": 10,
        "default_project_max_concurrent_sessions": None,
        "concurrent_sessions_used": 0,
        "concurrent_sessions_available": 10,
        "auth_connections_used": 0,
        "max_auth_connections": None,
        "vaults_used": 0,
        "max_vaults": None,
        "min_health_check_interval_seconds": 300,
    }


def test_org_default_cap_update(client):
    assert client.patch("/org/limits", json={"default_project_max_concurrent_sessions": 4}).get_json()[
        "default_project_max_concurrent_sessions"] == 4
    assert client.patch("/org/limits", json={}).get_json()["default_project_max_concurrent_sessions"] == 4
    assert client.patch("/org/limits", json={"default_project_max_concurrent_sessions": 0}).get_json()[
        "default_project_max_concurrent_sessions"] is None
    client.patch("/org/limits", json={"default_project_max_concurrent_sessions": 4})
    assert client.patch("/org/limits", json={"default_project_max_concurrent_sessions": None}).get_json()[
        "default_project_max_concurrent_sessions"] is None


def test_org_default_cap_may_not_exceed_the_org_limit(client):
    response = client.patch("/org/limits", json={"default_project_max_concurrent_sessions": 11})
    assert response.status_code == 400
    assert response.get_json()["details"][0]["field"] == "default_project_max_concurrent_sessions"
    assert client.patch("/org/limits", json={"default_project_max_concurrent_sessions": -1}).status_code == 400
    assert client.get("/org/limits").get_json()["default_project_max_concurrent_sessions"] is None


def test_unlimited_org_has_no_available_figure(app, owner_key, client):
    with app.app_context(), db.connection_context():
        Organization.update(max_concurrent_sessions=None).where(Organization.id == owner_key.org_id).execute()
    limits = client.get("/org/limits").get_json()
    assert limits["max_concurrent_sessions"] is None and limits["concurrent_sessions_available"] is None
    assert client.patch("/org/limits", json={"default_project_max_concurrent_sessions": 500}).status_code == 200


def test_scoped_key_reads_but_cannot_change_org_limits(app, client):
    project = client.post("/org/projects", json={"name": "p"}).get_json()
    scoped = scoped_client(app, client, project["id"])
    assert scoped.get("/org/limits").status_code == 200
    assert scoped.patch("/org/limits", json={"default_project_max_concurrent_sessions": 1}).status_code == 403
