"""Projects: create, list, get, update, soft delete (contract 6.2)."""
from app.core import clock
from tests.conftest import client_for, scoped_client


def create(client, name):
    response = client.post("/org/projects", json={"name": name})
    assert response.status_code == 201, response.get_json()
    return response.get_json()


def names(client, query=""):
    response = client.get("/org/projects" + query)
    assert response.status_code == 200, response.get_json()
    return [p["name"] for p in response.get_json()]


def test_create_and_get_by_id_or_name(client):
    project = create(client, "Web scrapers")
    assert project["status"] == "active"
    assert client.get(f"/org/projects/{project['id']}").get_json() == project
    assert client.get("/org/projects/Web scrapers").get_json() == project
    assert client.get("/org/projects/nope").status_code == 404


def test_name_validation(client):
    for body in ({}, {"name": ""}, {"name": " "}, {"name": "a/b"}, {"name": "50%"}, {"name": "x" * 256}):
        response = client.post("/org/projects", json=body)
        assert response.status_code == 400, body
        assert response.get_json()["details"][0]["field"] == "name"


def test_names_are_unique_case_and_accent_insensitively(client):
    create(client, "Zoë")
    for duplicate in ("Zoë", "zoe", "ZOË", " Zoe "):
        response = client.post("/org/projects", json={"name": duplicate})
        assert response.status_code == 409, duplicate
        assert response.get_json()["code"] == "project_name_taken"
        assert response.headers["x-should-retry"] == "false"


def test_name_of_a_deleted_project_can_be_reused(client):
    project = create(client, "temp")
    assert client.delete(f"/org/projects/{project['id']}").status_code == 204
    assert create(client, "temp")["id"] != project["id"]


def test_list_filters(client):
    create(client, "Zoë")
    create(client, "Zoey's lab")
    create(client, "production")
    assert names(client, "?name=zoe") == ["Zoë"]
    assert names(client, "?name=ZOË") == ["Zoë"]
    assert names(client, "?name=Zo") == []
    assert names(client, "?query=ZO") == ["Zoë", "Zoey's lab"]
    assert names(client, "?query=duct") == ["production"]
    assert names(client, "?query=%25") == []


def test_list_paging(client):
    for i in range(4):
        create(client, f"p{i}")
    first = client.get("/org/projects?limit=2")
    assert [p["name"] for p in first.get_json()] == ["Default", "p0"]
    assert (first.headers["X-Has-More"], first.headers["X-Next-Offset"]) == ("true", "2")
    last = client.get("/org/projects?limit=2&offset=4")
    assert [p["name"] for p in last.get_json()] == ["p3"]
    assert (last.headers["X-Has-More"], last.headers["X-Next-Offset"]) == ("false", "0")
    for bad in ("?limit=0", "?limit=101", "?offset=-1", "?limit=x"):
        assert client.get("/org/projects" + bad).status_code == 400, bad


def test_update_renames_and_archives(client):
    project = create(client, "old name")
    clock.freeze(clock.now())
    clock.advance(seconds=5)
    updated = client.patch(f"/org/projects/{project['id']}", json={"name": "new name"}).get_json()
    assert updated["name"] == "new name"
    assert updated["updated_at"] > project["updated_at"]
    archived = client.patch("/org/projects/new name", json={"status": "archived"}).get_json()
    assert archived["status"] == "archived"
    assert client.patch(f"/org/projects/{project['id']}", json={"status": "active"}).get_json()["status"] == "active"
    assert client.patch(f"/org/projects/{project['id']}", json={"status": "gone"}).status_code == 400
    create(client, "taken")
    clash = client.patch(f"/org/projects/{project['id']}", json={"name": "TAKEN"})
    assert clash.status_code == 409
    assert client.get(f"/org/projects/{project['id']}").get_json()["name"] == "new name"


def test_delete_is_soft_and_answers_no_body(client):
    project = create(client, "short-lived")
    response = client.delete(f"/org/projects/{project['id']}")
    assert response.status_code == 204 and response.data == b""
    assert client.get(f"/org/projects/{project['id']}").status_code == 404
    assert "short-lived" not in names(client)
    assert client.delete(f"/org/projects/{project['id']}").status_code == 404


def test_delete_refuses_a_project_with_live_keys(app, client):
    project = create(client, "busy")
    key = client.post("/org/api_keys", json={"name": "k", "project_id": project["id"]}).get_json()
    response = client.delete(f"/org/projects/{project['id']}")
    assert response.status_code == 409
    body = response.get_json()
    assert body["code"] == "project_not_empty"
    assert body["details"] == [{"code": "api_keys", "message": "1 active api keys"}]
    assert response.headers["x-should-retry"] == "false"
    client.delete(f"/org/api_keys/{key['id']}")
    assert client.delete(f"/org/projects/{project['id']}").status_code == 204


def test_expired_keys_do_not_keep_a_project_alive(client):
    project = create(client, "expiring")
    client.post("/org/api_keys", json={"name": "k", "project_id": project["id"], "days_to_expire": 1})
    clock.freeze(clock.now())
    clock.advance(days=2)
    assert client.delete(f"/org/projects/{project['id']}").status_code == 204


def test_last_active_project_cannot_be_deleted_or_archived(client):
    default = client.get("/org/projects").get_json()[0]
    for response in (client.delete(f"/org/projects/{default['id']}"),
                     client.patch(f"/org/projects/{default['id']}", json={"status": "archived"})):
        assert response.status_code == 409
        assert response.get_json()["code"] == "last_active_project"
        assert response.headers["x-should-retry"] == "false"


def test_deleting_the_default_project_moves_the_default(client):
    default = client.get("/org/projects").get_json()[0]
    successor = create(client, "successor")
    assert client.delete(f"/org/projects/{default['id']}").status_code == 204
    # Requests without a project header now act in the successor.
    key = client.post("/org/api_keys", json={"name": "k", "project_id": successor["id"]}).get_json()
    assert client.delete(f"/org/projects/{successor['id']}").status_code == 409
    assert key["project_name"] == "successor"
    assert client.get("/org/limits").status_code == 200


def test_project_scoped_keys_cannot_administer_projects(app, client):
    project = create(client, "mine")
    other = create(client, "theirs")
    scoped = scoped_client(app, client, project["id"])
    assert [p["name"] for p in scoped.get("/org/projects").get_json()] == ["mine"]
    assert scoped.get(f"/org/projects/{project['id']}").status_code == 200
    assert scoped.get(f"/org/projects/{other['id']}").status_code == 404
    assert scoped.post("/org/projects", json={"name": "x"}).status_code == 403
    assert scoped.patch(f"/org/projects/{project['id']}", json={"name": "y"}).status_code == 403
    assert scoped.delete(f"/org/projects/{other['id']}").status_code == 403
    assert scoped.patch(f"/org/projects/{project['id']}/limits", json={"max_concurrent_sessions": 1}).status_code == 403


def test_concurrent_deletes_never_remove_the_last_active_project(app, owner_key, client):
    import threading

    for round_ in range(3):
        projects = [create(client, f"race{round_}-{i}") for i in range(3)]
        for p in client.get("/org/projects").get_json():
            if p["id"] not in {x["id"] for x in projects}:
                assert client.delete(f"/org/projects/{p['id']}").status_code == 204
        barrier = threading.Barrier(len(projects))
        statuses = []

        def delete(project_id, barrier=barrier, statuses=statuses):
            own_client = client_for(app, owner_key.plaintext)
            barrier.wait()
            statuses.append(own_client.delete(f"/org/projects/{project_id}").status_code)

        threads = [threading.Thread(target=delete, args=(p["id"],)) for p in projects]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(statuses) == [204, 204, 409]
        assert len(client.get("/org/projects").get_json()) == 1


def test_names_whose_folded_form_is_too_long_are_400(client):
    response = client.post("/org/projects", json={"name": "ß" * 200})
    assert response.status_code == 400 and response.get_json()["details"][0]["field"] == "name"


def test_a_stale_row_never_puts_back_what_another_request_changed(app, client):
    from app.core.db import db
    from app.orgs.models import ApiKey

    key = client.post("/org/api_keys", json={"name": "k"}).get_json()
    with app.app_context(), db.connection_context():
        stale = ApiKey.get_by_id(key["id"])
    client.delete(f"/org/api_keys/{key['id']}")
    with app.app_context(), db.connection_context():
        stale.rename("renamed late")
    assert client.get(f"/org/api_keys/{key['id']}").status_code == 404
    assert client.get(f"/org/api_keys/{key['id']}?include_deleted=true").get_json()["name"] == "renamed late"


def test_a_key_is_never_left_live_in_a_deleted_project(app, owner_key, client):
    import threading

    for round_ in range(4):
        project = create(client, f"contested-{round_}")
        barrier = threading.Barrier(2)
        results = {}

        def run(name, call, barrier=barrier, results=results):
            own = client_for(app, owner_key.plaintext)
            barrier.wait()
            results[name] = call(own)

        threads = [
            threading.Thread(target=run, args=("key", lambda c, p=project: c.post(
                "/org/api_keys", json={"name": "late", "project_id": p["id"]}).status_code)),
            threading.Thread(target=run, args=("delete", lambda c, p=project: c.delete(
                f"/org/projects/{p['id']}").status_code)),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(results.values()) in ([201, 409], [204, 400]), results
