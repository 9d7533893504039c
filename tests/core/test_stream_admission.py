"""Stream admission (#11 item 5): per-worker and per-organization caps, slots given back, none while stopping."""
import pytest

from app.config import Settings
from app.core import shutdown, streamslots
from tests.conftest import client_for


@pytest.fixture
def capped(make_app, make_org):
    app = make_app(STREAMS_PER_WORKER=3, STREAMS_PER_ORG=2)
    first, second = (client_for(app, make_org(name, f"{name}@x.test").plaintext) for name in ("one", "two"))
    return first, second


def follow(client):
    invocation = client.post("/invocations", json={"app_name": "a", "action_name": "b", "version": "1",
                                                   "async": True}).get_json()
    return client.get(f"/invocations/{invocation['id']}/events", buffered=False)


def assert_refused(response, scope):
    assert response.status_code == 503 and response.headers["Retry-After"] == "5"
    body = response.get_json()
    assert body["code"] == "too_many_streams"
    assert body["details"][0]["scope"] == scope and body["details"][0]["limit"] == {"organization": 2}.get(scope, 3)


def test_streams_are_admitted_up_to_each_cap_and_a_closed_one_gives_its_slot_back(capped):
    first, second = capped
    opened = [follow(first), follow(first)]
    try:
        assert all(r.status_code == 200 for r in opened)
        assert_refused(follow(first), "organization")
        opened.append(follow(second))
        assert opened[-1].status_code == 200
        assert_refused(follow(second), "server process")
        opened.pop(0).close()
        opened.append(follow(second))
        assert opened[-1].status_code == 200
    finally:
        for response in opened:
            response.close()
    assert streamslots.open_streams() == 0


def test_no_new_stream_while_the_worker_stops(client):
    shutdown.stopping.set()
    try:
        response = follow(client)
    finally:
        shutdown.stopping.clear()
    assert response.status_code == 503 and response.headers["Retry-After"] == "1"
    assert response.get_json()["code"] == "server_restarting"


def test_the_worker_cap_keeps_connections_for_ordinary_requests():
    config = Settings(STREAMS_PER_WORKER=None, STREAMS_RESERVED_CONNECTIONS=100, STREAMS_PER_ORG=None,
                      STREAMS_DEFAULT_WORKER_CONNECTIONS=1000)
    assert streamslots.worker_cap(config) == 900 and streamslots.org_cap(config) == 450
    streamslots.set_worker_connections(60)
    try:
        assert streamslots.worker_cap(config) == 30  # a small worker keeps half for requests
    finally:
        streamslots.set_worker_connections(None)
