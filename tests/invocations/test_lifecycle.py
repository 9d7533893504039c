"""Invocations: create, list, get, update; lifecycle and finality (contract 6.6, spec part 3)."""
import threading

from app.core import clock, settings
from tests.waiting import eventually


def test_async_create_is_202_and_running_within_the_caps(invoke):
    response = invoke(payload='{"cart": 3}')
    assert response.status_code == 202
    body = response.get_json()
    assert (body["status"], body["app_name"], body["action_name"], body["version"]) == (
        "running", "shop", "checkout", "1")
    assert body["payload"] == '{"cart": 3}' and body["finished_at"] is None and body["output"] is None


def test_validation(invoke, client):
    assert invoke(payload="not json").status_code == 400
    assert invoke(async_timeout_seconds=5).status_code == 400
    assert invoke(async_timeout_seconds=3601).status_code == 400
    assert invoke(asynchronous=False, async_timeout_seconds=60).status_code == 400
    assert client.post("/invocations", json={"app_name": "a", "action_name": "b"}).status_code == 400


def test_succeeded_is_final_and_a_different_terminal_status_is_409(client, invoke):
    invocation = invoke().get_json()
    done = client.patch(f"/invocations/{invocation['id']}", json={"status": "succeeded", "output": '{"ok": true}'})
    body = done.get_json()
    assert (body["status"], body["output"]) == ("succeeded", '{"ok": true}')
    assert body["finished_at"] is not None and body["status_reason"] is None
    again = client.patch(f"/invocations/{invocation['id']}", json={"status": "succeeded"})
    assert again.status_code == 200 and again.get_json() == body
    refused = client.patch(f"/invocations/{invocation['id']}", json={"status": "failed"})
    assert refused.status_code == 409 and refused.get_json()["code"] == "invocation_finished"
    assert refused.headers["x-should-retry"] == "false"


def test_failed_cancels_from_any_live_state(client, invoke):
    running = invoke().get_json()
    cancelled = client.patch(f"/invocations/{running['id']}", json={"status": "failed"}).get_json()
    assert cancelled["status"] == "failed" and "Cancelled" in cancelled["status_reason"]
    client.patch("/org/projects/Default/limits", json={"max_concurrent_invocations": 1})
    invoke()
    queued = invoke().get_json()
    assert queued["status"] == "queued"
    failed = client.patch(f"/invocations/{queued['id']}", json={"status": "failed", "status_reason": "worker crashed"})
    assert failed.get_json()["status_reason"] == "worker crashed"


def test_patch_validation(client, invoke):
    invocation = invoke().get_json()
    url = f"/invocations/{invocation['id']}"
    for body in ({}, {"status": "queued"}, {"output": "not json"}, {"status": "succeeded", "status_reason": "x"}):
        assert client.patch(url, json=body).status_code == 400, body
    assert client.patch(url, json={"output": '"partial"'}).get_json()["output"] == '"partial"'
    assert client.patch("/invocations/nope", json={"status": "failed"}).status_code == 404


def test_list_filters_newest_first(client, invoke):
    clock.freeze(clock.parse_rfc3339("2026-06-01T00:00:00Z"))
    old = invoke(app_name="billing").get_json()
    clock.advance(minutes=10)
    new = invoke(action_name="refund", version="2").get_json()
    client.patch(f"/invocations/{new['id']}", json={"status": "succeeded"})

    def ids(query):
        response = client.get("/invocations" + query)
        assert response.status_code == 200, response.get_json()
        return [i["id"] for i in response.get_json()]

    assert ids("") == [new["id"], old["id"]]
    assert ids("?app_name=billing") == [old["id"]]
    assert ids("?action_name=refund&version=2") == [new["id"]]
    assert ids("?status=succeeded") == [new["id"]]
    assert ids("?status=running") == [old["id"]]
    assert ids("?since=5m") == [new["id"]]
    assert ids("?since=2026-06-01T00:05:00Z") == [new["id"]]
    assert ids("?query=bill") == [old["id"]]
    assert ids(f"?query={new['id']}") == [new["id"]]
    assert ids("?deployment_id=dep_1") == []
    assert client.get("/invocations?since=yesterday").status_code == 400
    assert client.get("/invocations?status=paused").status_code == 400
    assert ids("?limit=1") == [new["id"]]


def test_invocations_belong_to_their_project(client, invoke):
    invocation = invoke().get_json()
    client.post("/org/projects", json={"name": "other"})
    assert client.get(f"/invocations/{invocation['id']}", headers={"X-Kernel-Project": "other"}).status_code == 404


def test_live_invocations_keep_a_project_from_being_deleted(client, invoke):
    project = client.post("/org/projects", json={"name": "busy"}).get_json()
    invocation = invoke(headers={"X-Kernel-Project-Id": project["id"]}).get_json()
    assert client.delete(f"/org/projects/{project['id']}").status_code == 409
    client.patch(f"/invocations/{invocation['id']}", json={"status": "succeeded"},
                 headers={"X-Kernel-Project-Id": project["id"]})
    assert client.delete(f"/org/projects/{project['id']}").status_code == 204


def test_sync_create_waits_for_the_result(app, client, invoke, owner_key):
    from tests.conftest import client_for

    def worker():
        worker_client = client_for(app, owner_key.plaintext)
        running = eventually(lambda: worker_client.get("/invocations?status=running").get_json(), 4, interval=0.02)
        if running:
            worker_client.patch(f"/invocations/{running[0]['id']}", json={"status": "succeeded", "output": '"done"'})

    thread = threading.Thread(target=worker)
    thread.start()
    response = invoke(asynchronous=False)
    thread.join()
    assert response.status_code == 200
    assert (response.get_json()["status"], response.get_json()["output"]) == ("succeeded", '"done"')


def test_sync_create_returns_the_state_when_the_wait_limit_passes(app, invoke):
    settings.change(app, INVOCATION_SYNC_WAIT_SECONDS=0.2)
    response = invoke(asynchronous=False)
    assert response.status_code == 200 and response.get_json()["status"] == "running"


def test_browsers_are_empty_until_browser_sessions_exist(client, invoke):
    invocation = invoke().get_json()
    assert client.get(f"/invocations/{invocation['id']}/browsers").get_json() == {"browsers": []}
    assert client.delete(f"/invocations/{invocation['id']}/browsers").status_code == 204
    assert client.get("/invocations/nope/browsers").status_code == 404
