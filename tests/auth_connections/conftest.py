import threading

import pytest

from app.auth_connections.models import CANCELED, IN_PROGRESS, LoginFlow
from app.core.db import db
from app.streams import channels
from tests.waiting import eventually


@pytest.fixture(autouse=True)
def runners_end_with_the_test(app):
    """Flow runners are background threads: end their flows and wait for them after each test.

    A runner outliving its test would run on while the next test's app takes over the
    database proxy, and could leave a connection of the old pool open.
    """
    yield
    with app.app_context(), db.connection_context():
        running = list(LoginFlow.select(LoginFlow.id, LoginFlow.connection).where(LoginFlow.status == IN_PROGRESS))
        LoginFlow.update(status=CANCELED).where(LoginFlow.status == IN_PROGRESS).execute()
    for flow in running:
        channels().append(f"auth:{flow.connection_id}", "state")
    for thread in threading.enumerate():
        if thread.name.startswith("login-flow-"):
            thread.join(timeout=10)
            assert not thread.is_alive(), f"{thread.name} did not end"


@pytest.fixture
def new_connection(client, site):
    """new_connection(**body) -> the created connection record for the test site (login_url set)."""
    def create(using=None, **body):
        body = {"domain": "127.0.0.1", "profile_name": "shopper", "login_url": f"{site.url}/login", **body}
        response = (using or client).post("/auth/connections", json=body)
        assert response.status_code == 201, response.get_json()
        return response.get_json()
    return create


@pytest.fixture
def wait_for(client):
    """wait_for(connection_id, predicate) -> the connection record once predicate(record) holds (10 s)."""
    def wait(connection_id, predicate, timeout=10.0, using=None):
        record = None

        def reached():
            nonlocal record
            record = (using or client).get(f"/auth/connections/{connection_id}").get_json()
            return predicate(record)

        assert eventually(reached, timeout, interval=0.02), \
            f"connection never reached the expected state; last: {record}"
        return record
    return wait


def awaiting_input(record):
    return record.get("flow_step") == "AWAITING_INPUT" or record.get("flow_status") not in (None, "IN_PROGRESS")


def finished(record):
    return record.get("flow_status") not in (None, "IN_PROGRESS")
