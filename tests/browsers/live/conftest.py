"""Real browsers through Lantern: gunicorn with the host driver, and browser host processes.

One server and one host (capacity 3) serve the whole module set; tests that need more
hosts start them (`start_host`). Everything runs on 127.0.0.1 and stops with the tests.
"""
import re
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

import httpx
import kernel
import pytest

from browserhost import launch, sandbox, sandbox_policy
from browserhost.settings import HostSettings
from lantern_wire.hosts import control_key
from tests.browserhost.helpers import CHROMIUM, Site
from tests.browsers.live.tenants import tenant
from tests.live_server import browser_host, gunicorn, private_database, run_cli, server_env

CAPACITY = 3
# Short, so that a lost host is noticed within seconds (ten missed beats: a busy test machine can stall a beat
# for a few seconds), and a session may idle out after 2 s (the contract's shortest timeout is 10 s: a test of
# one would wait that long).
HOST_SETTINGS = {"LANTERN_BROWSER_DRIVER": "host", "LANTERN_BROWSER_HOST_HEARTBEAT_SECONDS": "0.5",
                 "LANTERN_BROWSER_HOST_TIMEOUT_SECONDS": "5", "LANTERN_BROWSER_MIN_TIMEOUT_SECONDS": "2"}


@dataclass
class Host:
    name: str
    port: int
    process: subprocess.Popen
    workdir: Path
    credential: str

    def stop(self, signum=signal.SIGTERM):
        if self.process.poll() is None:
            self.process.send_signal(signum)
            self.process.wait(timeout=20)

    def health(self):
        return httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=5,
                         headers={"Authorization": f"Bearer {control_key(self.credential)}"}).json()


@dataclass
class Lantern:
    base_url: str
    api_key: str
    env: dict
    workdir: Path
    hosts: list

    def client(self, api_key=None, **options):
        return kernel.Kernel(api_key=api_key or self.api_key, base_url=self.base_url, max_retries=0,
                             _strict_response_validation=True, timeout=60, **options)

    def new_org(self, name):
        return run_cli(self.env, "orgs", "create", "--name", name, "--owner-email", f"{name}@x.test").split()[-1]

    def start_host(self, name, capacity, port=None, advertise="127.0.0.1"):
        """A browser host process registered with this Lantern (tests.live_server.browser_host);
        stopped at the end of the session."""
        process, port = browser_host(self.env, self.workdir, name, capacity, app_url=self.base_url, port=port,
                                     advertise=advertise)
        host = Host(name, port, process, self.workdir / "hosts" / name, process.credential)
        self.hosts.append(host)
        return host


def sandbox_of(lantern, session_id, host="first"):
    """The sandbox of a session on one of the test hosts (its cgroup, its folders), as its host named it."""
    workdir = lantern.workdir / "hosts" / host / "sessions" / session_id
    return sandbox.Sandbox(workdir, sandbox_policy.SandboxPolicy(), memory_mb=0)


def browser_pid(sdk, session_id):
    """The host pid of the session's Chromium, from the host's first log line about it."""
    # Closed when left early: an unclosed stream, collected later inside httpx's connection pool, closes its
    # response under the pool's lock, which that thread already holds (a CI run hung on it).
    with sdk.browsers.logs.stream(session_id, source="supervisor", supervisor_process="browser-host",
                                  follow=False) as lines:
        for line in lines:
            found = re.match(r"Chromium started on browser host \S+: pid (\d+),", line.message)
            if found:
                return int(found.group(1))
    raise AssertionError(f"the host said nothing of session {session_id}'s Chromium")


@pytest.fixture(scope="session")
def lantern(tmp_path_factory):
    if CHROMIUM is None:
        pytest.skip("no Chromium at /usr/lib/chromium/chromium (`apt-get install chromium` on Debian)")
    workdir = tmp_path_factory.mktemp("browsers_live")
    with private_database(workdir) as database_url:
        env = server_env(database_url, workdir)
        env.update(HOST_SETTINGS, LANTERN_BROWSER_HOST_DIR=str(workdir / "hosts"))
        run_cli(env, "db", "upgrade")
        api_key = run_cli(env, "orgs", "create", "--name", "browsers", "--owner-email", "b@x.test").split()[-1]
        run_cli(env, "orgs", "set-limit", "--max-concurrent-sessions", "50")
        with gunicorn(env, workdir / "gunicorn.log", workers=2) as base_url:
            server = Lantern(base_url=base_url, api_key=api_key, env=env, workdir=workdir, hosts=[])
            try:
                server.start_host("first", CAPACITY)
                yield server
            finally:
                for host in server.hosts:
                    host.stop()
                # A host a test killed (kill -9) and did not restart, after a failure, left its browsers.
                for host_dir in (workdir / "hosts").glob("*"):
                    launch.kill_leftovers(host_dir / "sessions", Path(HostSettings().browser_sandbox_dir))


def host_words(lantern):
    """What of its host no error body may show a tenant (#34 item 8): its folders, sockets, helper processes and
    addresses (its log keeps them)."""
    folders = [str(lantern.workdir), HostSettings().browser_sandbox_dir, "/var/lib/lantern", "/tmp/", "/run/", "/proc/"]
    return re.compile("|".join([*map(re.escape, folders), r"\.sock\b", r"127\.0\.0\.1", r"\bpid\b", "Xvfb",
                                "xdotool", "xmodmap", "ffmpeg", "bwrap", "dnsmasq", "slirp4netns", r"Errno",
                                r"\bws://"]), re.IGNORECASE)


@pytest.fixture
def sdk(lantern):
    """The SDK; every error body it gets in a test is checked for its host's words once the test is done."""
    bodies = []

    def keep(response):
        if response.status_code >= 400:
            response.read()
            bodies.append(response.text)

    client = lantern.client(http_client=httpx.Client(event_hooks={"response": [keep]}))
    yield client
    for browser in client.browsers.list():
        client.browsers.delete_by_id(browser.session_id)
    client.close()
    words = host_words(lantern)
    assert [body for body in bodies if words.search(body)] == []


@pytest.fixture(scope="session")
def site():
    server = Site().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def client(lantern, request):
    """The SDK as an organization of the test module's own (tenants.tenant), for the modules that share one session
    (test_files.py, test_processes.py, test_session_security.py)."""
    with tenant(lantern, request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")) as sdk:
        yield sdk


@pytest.fixture(scope="module")
def session(client):
    """The module's one session (headless, ten minutes of idle time)."""
    created = client.browsers.create(headless=True, timeout_seconds=600)
    yield created
    client.browsers.delete_by_id(created.session_id)
