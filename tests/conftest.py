"""Fixtures: an app on a clean database (SQLite, or Postgres with TEST_DATABASE_URL)."""
import os
import shutil
import socket
import tempfile
import uuid
from pathlib import Path

import pytest

from app import create_app
from app.core import clock, migrations
from app.core.db import db, open_database
from app.orgs.onboarding import create_organization
from tests.fakes import FakeConnect
from tests.login_site import LoginSite

pytest_plugins = ["tests.redis_server"]  # the redis_url fixture
POSTGRES_URL = os.environ.get("TEST_DATABASE_URL")
TEST_ENCRYPTION_KEY = "0Bf1nWLZbzmB0b4YqMFKJCwZ2hYbYX7z1sO6oq3b9_c="


@pytest.fixture(scope="session", autouse=True)
def no_playwright_leftovers():
    """Playwright's driver leaves an empty playwright-artifacts-* folder in the temp folder for many a
    connect_over_cdp (when the browser it drove is gone first): the suite removes the ones it made."""
    before = set(Path(tempfile.gettempdir()).glob("playwright-artifacts-*"))
    yield
    for folder in set(Path(tempfile.gettempdir()).glob("playwright-artifacts-*")) - before:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def database_url(tmp_path_factory):
    """A migrated database for the whole run; each test starts from empty tables."""
    if POSTGRES_URL:
        database = open_database(POSTGRES_URL, pool_size=2)
        with database.connection_context():
            database.execute_sql("DROP SCHEMA public CASCADE")
            database.execute_sql("CREATE SCHEMA public")
        url = POSTGRES_URL
    else:
        database = open_database(f"sqlite:///{tmp_path_factory.mktemp('db') / 'lantern.db'}",
                                 sqlite_pragmas={"journal_mode": "wal"})
        url = f"sqlite:///{database.database}"
    migrations.upgrade(database)
    database.close_all()
    return url


def empty_all_tables(database):
    with database.connection_context():
        tables = [t for t in database.get_tables() if t != "schema_version"]
        if not tables:
            return
        if POSTGRES_URL:
            database.execute_sql("TRUNCATE " + ", ".join(f'"{t}"' for t in tables) + " CASCADE")
        else:
            database.execute_sql("PRAGMA foreign_keys = OFF")
            for table in tables:
                database.execute_sql(f'DELETE FROM "{table}"')
            database.execute_sql("PRAGMA foreign_keys = ON")


@pytest.fixture
def make_app(database_url, tmp_path):
    """make_app(**config) -> another app on the test database; its connections are closed after the test."""
    made = []

    def make(**config):
        made.append(create_app({"TESTING": True, "DATABASE_URL": database_url, "BLOB_DIR": str(tmp_path / "blobs"),
                                "ENCRYPTION_KEYS": [TEST_ENCRYPTION_KEY], "BROWSER_DRIVER": "external",
                                **config}))
        return made[-1]

    yield make
    clock.unfreeze()
    for app in made:
        app.extensions["database"].close_all()


@pytest.fixture
def app(make_app):
    app = make_app()
    empty_all_tables(app.extensions["database"])
    return app


@pytest.fixture
def make_org(app):
    """make_org(name) -> the first API key (its `.plaintext` authenticates)."""
    def make(name="Acme", owner_email="owner@acme.test"):
        with app.app_context(), db.connection_context():
            return create_organization(name, owner_email, owner_name="Owner")
    return make


@pytest.fixture
def owner_key(make_org):
    return make_org()


def client_for(app, plaintext, **headers):
    client = app.test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {plaintext}"
    for name, value in headers.items():
        client.environ_base["HTTP_" + name.upper().replace("-", "_")] = value
    return client


def scoped_client(app, client, project_id):
    """A client whose new API key is scoped to `project_id` (created through `client`)."""
    key = client.post("/org/api_keys", json={"name": "scoped", "project_id": project_id}).get_json()["key"]
    return client_for(app, key)


@pytest.fixture
def client(app, owner_key):
    """A test client authenticated with the owner's organization-wide key."""
    return client_for(app, owner_key.plaintext)


@pytest.fixture
def anonymous(app):
    return app.test_client()


@pytest.fixture
def connect():
    """A 1Password Connect look-alike on 127.0.0.1 with a token of its own."""
    server = FakeConnect(token=f"connect-token-{uuid.uuid4().hex[:8]}").start()
    yield server
    server.stop()


@pytest.fixture
def site():
    """The login test website (tests/login_site.py) on 127.0.0.1, fresh per test (its sessions and
    texted codes are the test's)."""
    server = LoginSite().start()
    yield server
    server.stop()


@pytest.fixture
def closed_port_url():
    """A 127.0.0.1 URL where nothing listens."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"
