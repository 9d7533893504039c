"""Profiles: create, list, get, rename, delete, download; state saved by id (contract 6.4)."""
import json
import threading

import marshmallow
import pytest

from app.core import clock, settings
from app.core.db import db
from app.profiles.models import Profile, save_profile_state

STATE = {"cookies": [{"name": "sid", "value": "abc", "domain": ".example.com", "path": "/", "httpOnly": True,
                      "secure": True, "sameSite": "Lax", "expires": -1}],
         "origins": [{"origin": "https://example.com", "localStorage": [{"name": "k", "value": "v"}]}]}


def create(client, **body):
    response = client.post("/profiles", json=body)
    assert response.status_code == 201, response.get_json()
    return response.get_json()


def test_create_with_and_without_a_name(client):
    named = create(client, name="shopper")
    assert named["name"] == "shopper" and named["last_used_at"] is None
    unnamed = create(client)
    assert unnamed["name"] is None
    empty_body = client.post("/profiles", data="", content_type="application/json")
    assert empty_body.status_code == 201
    assert client.get("/profiles/shopper").get_json() == named
    assert client.get(f"/profiles/{unnamed['id']}").get_json() == unnamed


def test_name_rules(client):
    for name in ("", "has space", "a/b", "x" * 256, "ünïcode"):
        assert client.post("/profiles", json={"name": name}).status_code == 400, name
    create(client, name="A.b_c-1")


def test_names_are_unique_in_the_logical_project(client):
    create(client, name="dup")
    duplicate = client.post("/profiles", json={"name": "dup"})
    assert duplicate.status_code == 409
    assert duplicate.get_json()["code"] == "profile_name_taken"
    assert duplicate.headers["x-should-retry"] == "false"
    default = client.get("/org/projects").get_json()[0]
    # No header and the default project's header are the same logical project.
    in_default = client.post("/profiles", json={"name": "dup"}, headers={"X-Kernel-Project-Id": default["id"]})
    assert in_default.status_code == 409
    client.post("/org/projects", json={"name": "other"})
    assert client.post("/profiles", json={"name": "dup"}, headers={"X-Kernel-Project": "other"}).status_code == 201


def test_list_filters_and_paging(client):
    a, b = create(client, name="alpha"), create(client, name="beta")
    create(client)
    assert [p["id"] for p in client.get("/profiles?name=alpha").get_json()] == [a["id"]]
    assert [p["id"] for p in client.get("/profiles?query=et").get_json()] == [b["id"]]
    assert [p["id"] for p in client.get(f"/profiles?query={a['id']}").get_json()] == [a["id"]]
    first = client.get("/profiles?limit=2")
    assert len(first.get_json()) == 2 and first.headers["X-Next-Offset"] == "2"


def test_rename(client):
    profile = create(client, name="before")
    clock.freeze(clock.now())
    clock.advance(seconds=1)
    renamed = client.patch("/profiles/before", json={"name": "after"}).get_json()
    assert renamed["name"] == "after" and renamed["updated_at"] > profile["updated_at"]
    assert client.get("/profiles/before").status_code == 404
    create(client, name="taken")
    assert client.patch("/profiles/after", json={"name": "taken"}).status_code == 409
    assert client.patch("/profiles/after", json={}).status_code == 400
    assert client.patch("/profiles/nope", json={"name": "x"}).status_code == 404


def test_download_of_a_profile_never_used_is_an_empty_state(client):
    create(client, name="fresh")
    response = client.get("/profiles/fresh/download")
    assert response.status_code == 200 and response.mimetype == "application/json"
    assert response.get_json() == {"cookies": [], "origins": []}
    assert client.get("/profiles/fresh/download?format=tar").get_json() == {"cookies": [], "origins": []}
    assert client.get("/profiles/fresh/download?format=zip").status_code == 400


def test_saved_state_downloads_and_survives_a_rename(app, client):
    profile = create(client, name="session-owned")
    client.patch("/profiles/session-owned", json={"name": "renamed-meanwhile"})
    clock.freeze(clock.now())
    clock.advance(minutes=5)
    with app.app_context(), db.connection_context():
        save_profile_state(profile["id"], STATE)
    fetched = client.get("/profiles/renamed-meanwhile").get_json()
    assert fetched["last_used_at"] == fetched["updated_at"] == clock.isoformat(clock.now())
    assert client.get("/profiles/renamed-meanwhile/download").get_json() == STATE


def test_saving_a_state_that_is_not_a_storage_state_is_refused(app, client):
    profile = create(client)
    with app.app_context(), db.connection_context(), pytest.raises(marshmallow.ValidationError):
        save_profile_state(profile["id"], {"cookies": "nope"})


def test_delete_removes_the_state_blob(app, client):
    settings.change(app, BLOB_GRACE_SECONDS=0)
    profile = create(client, name="gone")
    with app.app_context(), db.connection_context():
        save_profile_state(profile["id"], STATE)
        path = app.extensions["blobs"].path(Profile.get_by_id(profile["id"]).state_blob)
    assert client.delete("/profiles/gone").status_code == 204
    assert client.get("/profiles/gone").status_code == 404
    import os
    assert not os.path.exists(path)


def test_blobs_shared_by_two_profiles_stay_until_the_last_goes(app, client):
    a, b = create(client, name="a"), create(client, name="b")
    with app.app_context(), db.connection_context():
        save_profile_state(a["id"], STATE)
        save_profile_state(b["id"], STATE)
    client.delete("/profiles/a")
    assert client.get("/profiles/b/download").get_json() == STATE


def test_profiles_keep_a_project_from_being_deleted(client):
    project = client.post("/org/projects", json={"name": "with-profile"}).get_json()
    client.post("/profiles", json={"name": "p"}, headers={"X-Kernel-Project-Id": project["id"]})
    response = client.delete(f"/org/projects/{project['id']}")
    assert response.status_code == 409
    assert {"code": "profiles", "message": "1 active profiles"} in response.get_json()["details"]


def test_stored_state_file_is_json(app, client):
    profile = create(client)
    with app.app_context(), db.connection_context():
        save_profile_state(profile["id"], STATE)
        digest = Profile.get_by_id(profile["id"]).state_blob
        assert json.loads(app.extensions["blobs"].read(digest)) == STATE


@pytest.mark.parametrize("operation", ["create", "rename"])
def test_concurrent_creates_or_renames_to_one_name_let_exactly_one_win(app, owner_key, client, operation):
    from tests.conftest import client_for

    sources = [create(client, name=f"src-{i}")["id"] for i in range(6)]
    barrier = threading.Barrier(len(sources))
    statuses = []

    def attempt(source_id):
        own = client_for(app, owner_key.plaintext)
        barrier.wait()
        if operation == "create":
            statuses.append(own.post("/profiles", json={"name": "contested"}).status_code)
        else:
            statuses.append(own.patch(f"/profiles/{source_id}", json={"name": "contested"}).status_code)

    threads = [threading.Thread(target=attempt, args=(s,)) for s in sources]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(statuses) == [200 if operation == "rename" else 201] + [409] * (len(sources) - 1)
    assert len(client.get("/profiles?name=contested").get_json()) == 1
