"""Stored credentials: CRUD, merge semantics, write-only values (contract 6.3)."""
from app.core import clock
from tests.conftest import client_for

LOGIN = {"domain": "example.com", "name": "example-login", "values": {"username": "ada", "password": "s3cret!"}}


def create(client, **overrides):
    response = client.post("/credentials", json={**LOGIN, **overrides})
    assert response.status_code == 201, response.get_json()
    return response.get_json()


def test_create_shows_value_keys_never_values(client):
    created = create(client)
    assert created["value_keys"] == ["password", "username"]
    assert created["has_values"] is True and created["has_totp_secret"] is False
    assert created["domain"] == "example.com" and created["sso_provider"] is None
    assert "totp_code" not in created
    for response in (client.get(f"/credentials/{created['id']}"), client.get("/credentials/example-login"),
                     client.get("/credentials")):
        assert "s3cret!" not in response.get_data(as_text=True)
    assert client.get("/credentials/example-login").get_json() == created


def test_list_omits_value_keys_and_filters(client):
    a = create(client, name="a", domain="https://Login.Example.com/path")
    b = create(client, name="b", domain="other.org")
    assert a["domain"] == "login.example.com"
    listed = client.get("/credentials").get_json()
    assert [c["id"] for c in listed] == [a["id"], b["id"]]
    assert all("value_keys" not in c for c in listed)
    assert [c["id"] for c in client.get("/credentials?domain=LOGIN.example.com").get_json()] == [a["id"]]
    assert [c["id"] for c in client.get("/credentials?query=other").get_json()] == [b["id"]]
    assert [c["id"] for c in client.get(f"/credentials?query={a['id']}").get_json()] == [a["id"]]
    page = client.get("/credentials?limit=1")
    assert page.headers["X-Has-More"] == "true" and page.headers["X-Next-Offset"] == "1"


def test_validation(client):
    for body, field in (({"name": "x", "values": {}}, "domain"), ({"domain": "a.com", "values": {}}, "name"),
                        ({"domain": "a.com", "name": "x"}, "values"),
                        ({**LOGIN, "values": {"username": 3}}, "values.username.value"),
                        ({**LOGIN, "domain": "not a domain"}, "domain"),
                        ({**LOGIN, "totp_digits": 9, "totp_secret": "JBSWY3DPEHPK3PXPJBSWY3DP"}, "totp_digits")):
        response = client.post("/credentials", json=body)
        assert response.status_code == 400, body
        assert field in [d.get("field") for d in response.get_json()["details"]], (body, response.get_json())


def test_names_are_unique_within_a_project(app, client):
    create(client)
    duplicate = client.post("/credentials", json=LOGIN)
    assert duplicate.status_code == 409
    assert duplicate.get_json()["code"] == "credential_name_taken"
    assert duplicate.headers["x-should-retry"] == "false"
    client.post("/org/projects", json={"name": "other"})
    elsewhere = client.post("/credentials", json=LOGIN, headers={"X-Kernel-Project": "other"})
    assert elsewhere.status_code == 201


def test_credentials_belong_to_their_project(app, client):
    created = create(client)
    client.post("/org/projects", json={"name": "other"})
    assert client.get(f"/credentials/{created['id']}", headers={"X-Kernel-Project": "other"}).status_code == 404
    assert client.get("/credentials", headers={"X-Kernel-Project": "other"}).get_json() == []


def test_update_merges_values_after_removing_keys(app, client, owner_key):
    created = create(client, values={"username": "ada", "password": "old", "pin": "1234"})
    clock.freeze(clock.now())
    clock.advance(seconds=1)
    updated = client.patch("/credentials/example-login", json={
        "remove_value_keys": ["pin", "password"], "values": {"password": "new", "email": "ada@x.test"}}).get_json()
    assert updated["value_keys"] == ["email", "password", "username"]
    assert updated["updated_at"] > created["updated_at"]
    from app.core.db import db
    from app.credentials.models import Credential
    with app.app_context(), db.connection_context():
        stored = Credential.get_by_id(created["id"]).values
    assert stored == {"username": "ada", "password": "new", "email": "ada@x.test"}


def test_update_rename_and_sso_provider_clearing(client):
    create(client, sso_provider="google")
    assert client.get("/credentials/example-login").get_json()["sso_provider"] == "google"
    assert client.patch("/credentials/example-login", json={"sso_provider": ""}).get_json()["sso_provider"] is None
    client.patch("/credentials/example-login", json={"sso_provider": "github"})
    assert client.patch("/credentials/example-login", json={"sso_provider": None}).get_json()["sso_provider"] is None
    renamed = client.patch("/credentials/example-login", json={"name": "renamed"}).get_json()
    assert renamed["name"] == "renamed"
    assert client.get("/credentials/example-login").status_code == 404
    create(client, name="taken")
    assert client.patch("/credentials/renamed", json={"name": "taken"}).status_code == 409
    assert client.get("/credentials/renamed").status_code == 200


def test_a_refused_update_changes_nothing(client):
    create(client)
    response = client.patch("/credentials/example-login", json={"values": {"x": "y"}, "totp_secret": "not base32!"})
    assert response.status_code == 400
    assert client.get("/credentials/example-login").get_json()["value_keys"] == ["password", "username"]


def test_delete(client):
    created = create(client)
    assert client.delete(f"/credentials/{created['id']}").status_code == 204
    assert client.get(f"/credentials/{created['id']}").status_code == 404
    assert client.delete(f"/credentials/{created['id']}").status_code == 404


def test_a_project_with_credentials_is_not_empty(client):
    project = client.post("/org/projects", json={"name": "vaulted"}).get_json()
    client.post("/credentials", json=LOGIN, headers={"X-Kernel-Project-Id": project["id"]})
    response = client.delete(f"/org/projects/{project['id']}")
    assert response.status_code == 409
    assert {"code": "credentials", "message": "1 active credentials"} in response.get_json()["details"]


def test_scoped_key_works_in_its_project(app, client):
    project = client.post("/org/projects", json={"name": "scoped"}).get_json()
    key = client.post("/org/api_keys", json={"name": "k", "project_id": project["id"]}).get_json()["key"]
    scoped = client_for(app, key)
    assert scoped.post("/credentials", json=LOGIN).status_code == 201
    assert client.get("/credentials").get_json() == []
    assert len(client.get("/credentials", headers={"X-Kernel-Project": "scoped"}).get_json()) == 1


def test_names_with_a_slash_are_refused(client):
    response = client.post("/credentials", json={**LOGIN, "name": "team/github"})
    assert response.status_code == 400 and response.get_json()["details"][0]["field"] == "name"
    create(client)
    assert client.patch("/credentials/example-login", json={"name": "a/b"}).status_code == 400


def test_concurrent_value_merges_both_land(app, client, owner_key):
    import threading

    create(client, values={})
    barrier = threading.Barrier(4)

    def add(key):
        own = client_for(app, owner_key.plaintext)
        barrier.wait()
        assert own.patch("/credentials/example-login", json={"values": {key: "x"}}).status_code == 200

    threads = [threading.Thread(target=add, args=(f"k{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert client.get("/credentials/example-login").get_json()["value_keys"] == ["k0", "k1", "k2", "k3"]


def test_domains_longer_than_a_host_name_are_400(client):
    assert client.post("/credentials", json={**LOGIN, "domain": "a" * 250 + ".com"}).status_code == 400


def test_secrets_never_reach_the_logs(app, client, caplog):
    caplog.set_level("DEBUG")
    client.post("/credentials", json={**LOGIN, "totp_secret": "JBSWY3DPEHPK3PXPJBSWY3DP"})
    client.patch("/credentials/example-login", json={"values": {"password": "n3w-s3cret"}, "totp_secret": "bad!"})
    client.post("/org/credential_providers", json={"name": "p", "provider_type": "onepassword",
                                                   "token": "connect-token-secret"})
    assert "app.requests" in {r.name for r in caplog.records}
    for secret in ("s3cret!", "n3w-s3cret", "JBSWY3DPEHPK3PXPJBSWY3DP", "connect-token-secret"):
        assert secret not in caplog.text
