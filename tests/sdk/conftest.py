"""The official `kernel` SDK against a real server: gunicorn + gevent on a private database.

One server serves the whole SDK session, on a private database (tests/live_server.py).

Tests share the server, so each one works on data it creates itself (uniquely
named projects and keys, or an organization of its own from `new_org`).
"""
import uuid
from dataclasses import dataclass
from pathlib import Path

import kernel
import pytest

from tests.live_server import gunicorn, private_database, run_cli, server_env

ORG_MAX_CONCURRENT_SESSIONS = 10
OWNER_EMAIL = "owner@sdk.test"


def unique(prefix="t"):
    """A name no other test uses: `prefix-<8 hex>`."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@dataclass
class LiveServer:
    base_url: str
    api_key: str
    env: dict
    log_path: Path

    def cli(self, *args):
        """Run `flask --app app <args>` against the server's database; returns stdout."""
        return run_cli(self.env, *args)

    def new_org(self, name=None, owner_email=None):
        """Create an organization through the CLI; returns its first (owner) API key."""
        name = name or unique("org")
        output = self.cli("orgs", "create", "--name", name,
                          "--owner-email", owner_email or f"{name}@example.test")
        return output.strip().splitlines()[-1].strip()


@pytest.fixture(scope="session")
def live_server(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("sdk_server")
    with pytest.MonkeyPatch.context() as patch, private_database(workdir) as database_url:
        # The SDK would add these headers to every request of every client.
        patch.delenv("KERNEL_CUSTOM_HEADERS", raising=False)
        env = server_env(database_url, workdir)
        run_cli(env, "db", "upgrade")
        output = run_cli(env, "orgs", "create", "--name", "SDK shared", "--owner-email", OWNER_EMAIL)
        api_key = output.strip().splitlines()[-1].strip()  # printed alone on the last line
        log_path = workdir / "gunicorn.log"
        with gunicorn(env, log_path) as base_url:
            yield LiveServer(base_url=base_url, api_key=api_key, env=env, log_path=log_path)


@pytest.fixture
def sdk(live_server, make_client):
    """The shared organization's owner key: organization-wide, strict, no retries."""
    return make_client(live_server.api_key)


@pytest.fixture
def make_client(live_server):
    """make_client(api_key, **options) -> another strict SDK client, closed after the test."""
    clients = []

    def make(api_key, **options):
        options.setdefault("max_retries", 0)
        client = kernel.Kernel(api_key=api_key, base_url=live_server.base_url,
                               _strict_response_validation=True, **options)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def new_org(live_server, make_client):
    """new_org() -> an SDK client for the owner of a brand-new organization (via the CLI)."""
    def make(name=None):
        return make_client(live_server.new_org(name))
    return make


@pytest.fixture
def project(sdk):
    """A project of this test's own in the shared organization."""
    return sdk.projects.create(name=unique("project"))


@pytest.fixture
def in_project(sdk, project):
    """The shared organization's client, acting in `project`."""
    return sdk.with_options(project=project.name)
