"""API keys: create, list, get, rename, delete, rotate (contract 6.1)."""
from app.core import clock
from tests.conftest import client_for


def create_key(client, **body):
    response = client.post("/org/api_keys", json={"name": "key", **body})
    assert response.status_code == 201, response.get_json()
    return response.get_json()


def test_create_returns_plaintext_once_and_reads_show_only_the_mask(app, client):
    created = create_key(client, name="ci")
    assert created["key"].startswith("sk_")
    assert created["created_by"] == {"id": created["created_by"]["id"], "email": "owner@acme.test", "name": "Owner"}
    fetched = client.get(f"/org/api_keys/{created['id']}").get_json()
    assert "key" not in fetched
    assert fetched["masked_key"] == created["masked_key"]
    assert created["key"] not in client.get("/org/api_keys").get_data(as_text=True)
    assert client_for(app, created["key"]).get("/org/limits").status_code == 200


def test_create_validation(client):
    cases = [
        ({"name": ""}, "name"),
        ({"name": "   "}, "name"),
        ({"name": "x" * 256}, "name"),
        ({"name": "k", "days_to_expire": 0}, "days_to_expire"),
        ({"name": "k", "days_to_expire": 3651}, "days_to_expire"),
        ({"name": "k", "project_id": ""}, "project_id"),
        ({"name": "k", "days_to_expire": 3, "expires_at": "2030-01-01T00:00:00Z"}, "expires_at"),
        ({"name": "k", "expires_at": "2001-01-01T00:00:00Z"}, "expires_at"),
        ({"name": "k", "project_id": "no-such-project"}, "project_id"),
    ]
    for body, field in cases:
        response = client.post("/org/api_keys", json=body)
        assert response.status_code == 400, body
        assert field in [d.get("field") for d in response.get_json()["details"]], body


def test_expiry_from_days_or_timestamp_and_null_means_never(client):
    clock.freeze(clock.parse_rfc3339("2026-01-01T00:00:00Z"))
    assert create_key(client, days_to_expire=30)["expires_at"] == "2026-01-31T00:00:00.000000Z"
    assert create_key(client, expires_at="2026-03-01T12:00:00+02:00")["expires_at"] == "2026-03-01T10:00:00.000000Z"
    assert create_key(client, days_to_expire=None)["expires_at"] is None


def test_new_key_may_not_outlive_the_creating_key(app, client):
    clock.freeze(clock.parse_rfc3339("2026-01-01T00:00:00Z"))
    short = client_for(app, create_key(client, days_to_expire=10)["key"])
    assert short.post("/org/api_keys", json={"name": "k", "days_to_expire": 5}).status_code == 201
    for body in ({"name": "k", "days_to_expire": 11}, {"name": "k"}):
        assert short.post("/org/api_keys", json=body).status_code == 400


def test_project_scoped_keys(app, client):
    project = client.post("/org/projects", json={"name": "Scoped"}).get_json()
    other = client.post("/org/projects", json={"name": "Other"}).get_json()
    scoped = create_key(client, project_id=project["id"])
    assert (scoped["project_id"], scoped["project_name"]) == (project["id"], "Scoped")
    scoped_client = client_for(app, scoped["key"])
    # A scoped key creates keys in its own project only, and sees only those.
    child = scoped_client.post("/org/api_keys", json={"name": "child"}).get_json()
    assert child["project_id"] == project["id"]
    assert scoped_client.post("/org/api_keys", json={"name": "x", "project_id": other["id"]}).status_code == 403
    assert {k["id"] for k in scoped_client.get("/org/api_keys").get_json()} == {scoped["id"], child["id"]}
    org_wide_id = client.get("/org/api_keys?query=first").get_json()[0]["id"]
    assert scoped_client.get(f"/org/api_keys/{org_wide_id}").status_code == 404


def test_get_deleted_key_needs_include_deleted(client):
    key = create_key(client)
    assert client.delete(f"/org/api_keys/{key['id']}").status_code == 204
    response = client.get(f"/org/api_keys/{key['id']}")
    assert response.status_code == 404
    deleted = client.get(f"/org/api_keys/{key['id']}?include_deleted=true").get_json()
    assert deleted["deleted_at"] is not None
    assert client.delete(f"/org/api_keys/{key['id']}").status_code == 404


def test_a_key_cannot_delete_itself(owner_key, client):
    response = client.delete(f"/org/api_keys/{owner_key.id}")
    assert response.status_code == 409
    assert response.get_json()["code"] == "cannot_delete_current_key"
    assert response.headers["x-should-retry"] == "false"


def test_rename(client):
    key = create_key(client, name="before")
    response = client.patch(f"/org/api_keys/{key['id']}", json={"name": "after"})
    assert response.get_json()["name"] == "after"
    assert client.patch(f"/org/api_keys/{key['id']}", json={}).status_code == 400
    assert client.patch("/org/api_keys/nope", json={"name": "x"}).status_code == 404


def test_list_filters_status_and_sorting(client):
    clock.freeze(clock.parse_rfc3339("2026-01-01T00:00:00Z"))
    a = create_key(client, name="Zoë alpha", days_to_expire=5)
    clock.advance(seconds=1)
    b = create_key(client, name="build alpha", days_to_expire=1)
    clock.advance(seconds=1)
    gone = create_key(client, name="gone")
    client.delete(f"/org/api_keys/{gone['id']}")

    def ids(query):
        response = client.get("/org/api_keys" + query)
        assert response.status_code == 200, response.get_json()
        return [k["id"] for k in response.get_json()]

    assert gone["id"] not in ids("")
    assert ids("?status=deleted") == [gone["id"]]
    assert gone["id"] in ids("?status=all")
    assert gone["id"] in ids("?include_deleted=true")
    assert ids("?name=zoe%20ALPHA") == [a["id"]]
    assert ids("?query=zoe") == [a["id"]]
    assert ids(f"?query={b['id']}") == [b["id"]]
    assert ids(f"?query={b['masked_key']}") == [b["id"]]
    assert set(ids("?query=owner@acme")) >= {a["id"], b["id"]}
    assert ids("?sort_by=expires_at&sort_direction=asc")[:2] == [b["id"], a["id"]]
    assert ids("?sort_by=name&sort_direction=desc&query=alpha") == [a["id"], b["id"]]
    assert ids("?sort_by=created_at&sort_direction=asc&query=alpha") == [a["id"], b["id"]]
    assert ids("?sort_by=created_at&query=alpha") == [b["id"], a["id"]]
    assert client.get("/org/api_keys?status=weird").status_code == 400
    assert client.get("/org/api_keys?sort_by=key_hash").status_code == 400


def test_expired_keys_are_listed_as_active(app, client):
    clock.freeze(clock.parse_rfc3339("2026-01-01T00:00:00Z"))
    key = create_key(client, days_to_expire=1)
    clock.advance(days=2)
    assert key["id"] in [k["id"] for k in client.get("/org/api_keys").get_json()]


def test_paging_headers_walk_every_key_once(client):
    made = {create_key(client, name=f"k{i}")["id"] for i in range(4)}
    seen, offset = [], 0
    while True:
        response = client.get(f"/org/api_keys?limit=2&offset={offset}")
        seen += [k["id"] for k in response.get_json()]
        if response.headers["X-Has-More"] != "true":
            assert response.headers["X-Next-Offset"] == "0"
            break
        offset = int(response.headers["X-Next-Offset"])
    assert len(seen) == len(set(seen)) == 5
    assert made <= set(seen)


def test_rotate_issues_successor_and_old_key_works_through_grace(app, client):
    clock.freeze(clock.parse_rfc3339("2026-01-01T00:00:00Z"))
    project = client.post("/org/projects", json={"name": "P"}).get_json()
    old = create_key(client, name="deploy", project_id=project["id"], days_to_expire=90)
    response = client.post(f"/org/api_keys/{old['id']}/rotate", data="", content_type="application/json")
    assert response.status_code == 200
    new = response.get_json()
    assert new["id"] != old["id"] and new["key"] != old["key"]
    assert (new["name"], new["project_id"]) == ("deploy", project["id"])
    # days_to_expire omitted: the successor gets the old key's original lifetime.
    assert new["expires_at"] == "2026-04-01T00:00:00.000000Z"
    old_now = client.get(f"/org/api_keys/{old['id']}").get_json()
    assert old_now["expires_at"] == "2026-01-08T00:00:00.000000Z"
    old_client, new_client = client_for(app, old["key"]), client_for(app, new["key"])
    clock.advance(days=6, hours=23)
    assert old_client.get("/org/limits").status_code == 200
    clock.advance(hours=1)
    assert old_client.get("/org/limits").status_code == 401
    assert new_client.get("/org/limits").status_code == 200


def test_rotate_with_zero_grace_rejects_old_key_at_once(app, client):
    old = create_key(client)
    new = client.post(f"/org/api_keys/{old['id']}/rotate", json={"expire_in_days": 0}).get_json()
    assert client_for(app, old["key"]).get("/org/limits").status_code == 401
    assert client_for(app, new["key"]).get("/org/limits").status_code == 200
    assert new["expires_at"] is None


def test_a_key_cannot_rotate_itself_with_zero_grace(app, owner_key, client):
    response = client.post(f"/org/api_keys/{owner_key.id}/rotate", json={"expire_in_days": 0})
    assert response.status_code == 409
    assert response.get_json()["code"] == "cannot_expire_current_key"
    assert response.headers["x-should-retry"] == "false"
    assert client.get(f"/org/api_keys/{owner_key.id}").get_json()["expires_at"] is None
    assert len(client.get("/org/api_keys").get_json()) == 1, "no successor was issued"
    assert client.post(f"/org/api_keys/{owner_key.id}/rotate", json={"expire_in_days": 1}).status_code == 200


def test_rotate_options_and_refusals(client):
    clock.freeze(clock.parse_rfc3339("2026-01-01T00:00:00Z"))
    key = create_key(client)
    new = client.post(f"/org/api_keys/{key['id']}/rotate", json={"days_to_expire": 10, "expire_in_days": 2}).get_json()
    assert new["expires_at"] == "2026-01-11T00:00:00.000000Z"
    for body in ({"days_to_expire": 1, "expire_in_days": 2}, {"expire_in_days": -1},
                 {"expire_in_days": 3651}, {"days_to_expire": 0}):
        assert client.post(f"/org/api_keys/{new['id']}/rotate", json=body).status_code == 400, body
    clock.advance(days=3)
    expired = client.post(f"/org/api_keys/{key['id']}/rotate", json={})
    assert expired.status_code == 409
    assert expired.get_json()["code"] == "api_key_expired"
    client.delete(f"/org/api_keys/{new['id']}")
    deleted = client.post(f"/org/api_keys/{new['id']}/rotate", json={})
    assert deleted.status_code == 409
    assert deleted.get_json()["code"] == "api_key_deleted"
    assert client.post("/org/api_keys/nope/rotate", json={}).status_code == 404


def test_rotation_never_extends_an_earlier_expiry(client):
    clock.freeze(clock.parse_rfc3339("2026-01-01T00:00:00Z"))
    key = create_key(client, days_to_expire=2)
    client.post(f"/org/api_keys/{key['id']}/rotate", json={"expire_in_days": 7})
    assert client.get(f"/org/api_keys/{key['id']}").get_json()["expires_at"] == "2026-01-03T00:00:00.000000Z"


def test_rotated_key_records_the_rotating_user(client):
    key = create_key(client)
    new = client.post(f"/org/api_keys/{key['id']}/rotate", json={}).get_json()
    assert new["created_by"]["email"] == "owner@acme.test"


def test_rotation_may_not_mint_a_successor_that_outlives_the_caller(app, client):
    clock.freeze(clock.parse_rfc3339("2026-01-01T00:00:00Z"))
    short = create_key(client, days_to_expire=10)
    forever = create_key(client)
    short_client = client_for(app, short["key"])
    refused = short_client.post(f"/org/api_keys/{forever['id']}/rotate", json={})
    assert refused.status_code == 400
    assert "2026-01-11" in refused.get_json()["message"]
    assert short_client.post(f"/org/api_keys/{forever['id']}/rotate", json={"days_to_expire": 5}).status_code == 200


def test_a_key_rotating_itself_renews_but_never_lengthens_its_lifetime(app, client):
    clock.freeze(clock.parse_rfc3339("2026-01-01T00:00:00Z"))
    key = create_key(client, days_to_expire=30)
    own = client_for(app, key["key"])
    clock.advance(days=20)
    assert own.post(f"/org/api_keys/{key['id']}/rotate", json={"days_to_expire": 31}).status_code == 400
    renewed = own.post(f"/org/api_keys/{key['id']}/rotate", json={}).get_json()
    assert renewed["expires_at"] == "2026-02-20T00:00:00.000000Z"


def test_policies_are_refused(client):
    response = client.post("/org/api_keys", json={"name": "k", "policy": {"statements": []}})
    assert response.status_code == 400
    assert "not supported" in response.get_json()["details"][0]["message"]


def test_integers_in_bodies_are_strict(client):
    for body in ({"name": "k", "days_to_expire": 2.5}, {"name": "k", "days_to_expire": "3"}):
        assert client.post("/org/api_keys", json=body).status_code == 400, body
    assert client.patch("/org/limits", json={"default_project_max_concurrent_sessions": "3"}).status_code == 400
    assert client.patch("/org/projects/Default/limits", json={"max_concurrent_sessions": 2.5}).status_code == 400
    assert client.get("/org/projects/Default/limits").get_json()["max_concurrent_sessions"] is None
