"""Each list shows its items exactly as the read of one item shows it.

The hot lists select only the columns their items show (app/core/paging.py); a
field added to a record but not to its list's columns would show up here as a
difference, not as a silent null.
"""
from datetime import datetime

from app.core import clock
from tests.conftest import client_for


def assert_items_read_alike(client, listed, read_path, **query):
    assert listed, "the list is empty: nothing was compared"
    for item in listed:
        one = client.get(read_path(item), query_string=query)
        assert one.status_code == 200, one.get_json()
        assert item == one.get_json()


def test_api_keys(client):
    project = client.post("/org/projects", json={"name": "crawlers"}).get_json()
    client.post("/org/api_keys", json={"name": "scoped", "project_id": project["id"]})
    client.post("/org/api_keys", json={"name": "expiring", "days_to_expire": 30})
    gone = client.post("/org/api_keys", json={"name": "gone"}).get_json()
    assert client.delete(f"/org/api_keys/{gone['id']}").status_code == 204
    listed = client.get("/org/api_keys", query_string={"status": "all"}).get_json()
    assert {"scoped", "expiring", "gone"} <= {key["name"] for key in listed}
    assert any(key["project_name"] == "crawlers" for key in listed)
    assert any(key["deleted_at"] for key in listed) and any(key["expires_at"] for key in listed)
    assert_items_read_alike(client, listed, lambda key: f"/org/api_keys/{key['id']}", include_deleted="true")


def test_api_keys_seen_by_a_scoped_key(app, client):
    project = client.post("/org/projects", json={"name": "crawlers"}).get_json()
    scoped = client_for(app, client.post("/org/api_keys", json={"name": "scoped", "project_id": project["id"]})
                        .get_json()["key"])
    listed = scoped.get("/org/api_keys").get_json()
    assert [key["name"] for key in listed] == ["scoped"]
    assert_items_read_alike(scoped, listed, lambda key: f"/org/api_keys/{key['id']}")


def test_projects(client):
    client.post("/org/projects", json={"name": "crawlers"})
    archived = client.post("/org/projects", json={"name": "old"}).get_json()
    client.patch(f"/org/projects/{archived['id']}", json={"status": "archived"})
    listed = client.get("/org/projects").get_json()
    assert {"crawlers", "old"} <= {project["name"] for project in listed}
    assert_items_read_alike(client, listed, lambda project: f"/org/projects/{project['id']}")


def test_invocations(client):
    body = {"app_name": "shop", "version": "1", "async": True}
    client.post("/invocations", json={**body, "action_name": "queued", "payload": '{"n": 1}'})
    done = client.post("/invocations", json={**body, "action_name": "done"}).get_json()
    client.patch(f"/invocations/{done['id']}", json={"status": "succeeded", "output": '{"ok": true}'})
    failed = client.post("/invocations", json={**body, "action_name": "failed"}).get_json()
    client.patch(f"/invocations/{failed['id']}", json={"status": "failed", "status_reason": "gave up"})
    listed = client.get("/invocations").get_json()
    assert {item["status"] for item in listed} >= {"succeeded", "failed"}
    assert any(item["output"] for item in listed) and any(item["payload"] for item in listed)
    assert_items_read_alike(client, listed, lambda item: f"/invocations/{item['id']}")


def test_browsers(client):
    clock.freeze(datetime(2026, 11, 25, 12, 0, 0))  # a record's usage counts up to now
    client.post("/profiles", json={"name": "shopper"})
    client.post("/browsers", json={"name": "with-profile", "profile": {"name": "shopper", "save_changes": True},
                                   "tags": {"team": "a"}, "viewport": {"width": 1280, "height": 800}})
    client.post("/browsers", json={"headless": True, "stealth": True, "timeout_seconds": 120})
    ended = client.post("/browsers", json={"name": "ended"}).get_json()
    clock.advance(seconds=30)
    assert client.delete(f"/browsers/{ended['session_id']}").status_code == 204
    listed = client.get("/browsers", query_string={"include_deleted": "true"}).get_json()
    assert len(listed) == 3
    assert any(item.get("profile") for item in listed) and any(item.get("deleted_at") for item in listed)
    assert_items_read_alike(client, listed, lambda item: f"/browsers/{item['session_id']}", include_deleted="true")
