"""Concurrency caps: admission, 429, FIFO promotion, async timeouts."""
import threading

from app.core import clock, settings
from app.core.db import db
from app.orgs.models import Organization
from tests.conftest import client_for


def cap_project(client, cap):
    client.patch("/org/projects/Default/limits", json={"max_concurrent_invocations": cap})


def test_over_the_project_cap_async_queues_and_sync_is_429(client, invoke):
    cap_project(client, 2)
    assert [invoke().get_json()["status"] for _ in range(3)] == ["running", "running", "queued"]
    refused = invoke(asynchronous=False)
    assert refused.status_code == 429
    body = refused.get_json()
    assert body["code"] == "concurrency_limit_exceeded"
    assert body["details"][0] == {"code": "max_concurrent_invocations", "scope": "project", "limit": 2,
                                       "usage": 2, "message": "project limit 2, 2 running"}
    assert refused.headers["Retry-After"] == "5"


def test_queued_invocations_are_promoted_in_order(client, invoke):
    cap_project(client, 1)
    first = invoke().get_json()
    queued = [invoke(app_name=f"q{i}").get_json() for i in range(3)]
    assert {q["status"] for q in queued} == {"queued"}
    client.patch(f"/invocations/{first['id']}", json={"status": "succeeded"})
    states = [client.get(f"/invocations/{q['id']}").get_json()["status"] for q in queued]
    assert states == ["running", "queued", "queued"]
    client.patch(f"/invocations/{queued[0]['id']}", json={"status": "failed"})
    states = [client.get(f"/invocations/{q['id']}").get_json()["status"] for q in queued]
    assert states == ["failed", "running", "queued"]


def test_the_organization_cap_applies_across_projects(app, client, invoke, owner_key):
    with app.app_context(), db.connection_context():
        Organization.update(max_concurrent_invocations=1).where(Organization.id == owner_key.org_id).execute()
    client.post("/org/projects", json={"name": "other"})
    assert invoke().get_json()["status"] == "running"
    other = invoke(headers={"X-Kernel-Project": "other"}).get_json()
    assert other["status"] == "queued"
    refused = invoke(asynchronous=False, headers={"X-Kernel-Project": "other"})
    assert refused.status_code == 429 and refused.get_json()["details"][0]["scope"] == "organization"


def test_running_via_patch_admits_a_queued_invocation_only_with_room(client, invoke):
    cap_project(client, 1)
    first = invoke().get_json()
    queued = invoke().get_json()
    assert client.patch(f"/invocations/{queued['id']}", json={"status": "running"}).status_code == 429
    cap_project(client, 2)
    assert client.patch(f"/invocations/{queued['id']}", json={"status": "running"}).get_json()["status"] == "running"
    assert client.patch(f"/invocations/{first['id']}", json={"status": "running"}).get_json()["status"] == "running"


def test_async_invocations_time_out_and_free_their_slot(client, invoke):
    cap_project(client, 1)
    clock.freeze(clock.now())
    slow = invoke(async_timeout_seconds=60).get_json()
    waiting = invoke().get_json()
    clock.advance(seconds=59)
    assert client.get(f"/invocations/{slow['id']}").get_json()["status"] == "running"
    clock.advance(seconds=2)
    timed_out = client.get(f"/invocations/{slow['id']}").get_json()
    assert timed_out["status"] == "failed" and "Timed out" in timed_out["status_reason"]
    assert timed_out["finished_at"] is not None
    assert client.get(f"/invocations/{waiting['id']}").get_json()["status"] == "running"


def test_parallel_creates_never_exceed_the_cap(app, client, owner_key):
    cap_project(client, 3)
    barrier = threading.Barrier(12)
    statuses = []

    def create():
        own = client_for(app, owner_key.plaintext)
        barrier.wait()
        statuses.append(own.post("/invocations", json={"app_name": "a", "action_name": "b", "version": "1",
                                                      "async": True}).get_json()["status"])

    threads = [threading.Thread(target=create) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(statuses) == ["queued"] * 9 + ["running"] * 3
    assert len(client.get("/invocations?status=running").get_json()) == 3


def test_raising_a_cap_lets_the_queue_go_first(client, invoke):
    cap_project(client, 1)
    invoke()
    queued = invoke().get_json()
    cap_project(client, 5)
    newcomer = invoke().get_json()
    assert client.get(f"/invocations/{queued['id']}").get_json()["status"] == "running"
    assert newcomer["status"] == "running"


def test_sync_invocations_nobody_finishes_time_out_too(app, client, invoke):
    settings.change(app, INVOCATION_SYNC_WAIT_SECONDS=0)
    clock.freeze(clock.now())
    abandoned = invoke(asynchronous=False).get_json()
    clock.advance(seconds=app.config["INVOCATION_SYNC_TIMEOUT_SECONDS"] + 1)
    body = client.get(f"/invocations/{abandoned['id']}").get_json()
    assert body["status"] == "failed" and "sync" in body["status_reason"]
