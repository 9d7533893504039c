"""Two app servers on one database behind Debian's nginx, configured by docs/operations.md's example itself: SSE
is not buffered, keepalives pass, a stream resumes with Last-Event-ID after one app server stopped, the CDP
WebSocket is relayed, no log holds a token, a request in flight on an app server that dies is answered by the
other (idempotent) or in the API's error body (what must not run twice), and the hosts' internal routes take a
recording's size."""
import json
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
import websocket

from tests.browserhost.helpers import CHROMIUM
from tests.live_server import (
    ROOT,
    browser_host,
    free_port,
    gunicorn,
    private_database,
    run_cli,
    server_env,
    stop,
)
from tests.waiting import eventually

NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
pytestmark = pytest.mark.skipif(NGINX is None, reason="no nginx (apt-get install nginx)")
DOCS_UPSTREAMS = "    server 10.0.0.5:8000;\n    server 10.0.0.6:8000;\n"
TOKEN = "tok3n-that-must-not-be-logged"


def nginx_config(workdir, port, upstreams):
    """docs/operations.md's example on 127.0.0.1:`port` without TLS, in front of `upstreams`, its logs in
    `workdir`/logs, inside the http block of Debian's nginx.conf (whose access log has the `combined` format)."""
    docs = (ROOT / "docs" / "operations.md").read_text()
    block = re.search(r"## nginx in front.*?```nginx\n(.*?)```", docs, flags=re.S).group(1)
    assert DOCS_UPSTREAMS in block and "listen 443 ssl;" in block
    # A failed server is tried again after 1 s, not nginx's 10: the tests kill and restart them one after another.
    block = block.replace(DOCS_UPSTREAMS, "".join(f"    server {u} fail_timeout=1s;\n" for u in upstreams))
    block = block.replace("listen 443 ssl;", f"listen 127.0.0.1:{port};")
    logs = workdir / "logs"
    block = block.replace("/var/log/nginx/", f"{logs}/")
    temp = workdir / "nginx-temp"
    logs.mkdir()
    temp.mkdir()
    return f"""daemon off;
user root;
worker_processes 1;
pid {workdir}/nginx.pid;
error_log {logs}/error.log;
events {{ worker_connections 256; }}
http {{
    access_log {logs}/access.log;
    client_body_temp_path {temp}/body;
    proxy_temp_path {temp}/proxy;
    fastcgi_temp_path {temp}/fastcgi;
    uwsgi_temp_path {temp}/uwsgi;
    scgi_temp_path {temp}/scgi;
{block}
}}
"""


class AppServers:
    """The app servers behind nginx, each on a port of its own for the module's life, so that one stopped, killed
    or started again is the same upstream to nginx."""

    def __init__(self, env, workdir, stack, count=2):
        self.env, self.workdir, self.stack = env, workdir, stack
        self.ports = [free_port() for _ in range(count)]
        self.starts = 0
        for index in range(count):
            self.start(index)

    def start(self, index):
        self.starts += 1
        self.stack.enter_context(gunicorn(self.env, self.workdir / f"app-{index}-{self.starts}.log",
                                          port=self.ports[index]))

    def pids(self, index):
        """The gunicorn master and worker serving `index` (the worker is a fork: the same command line)."""
        found = subprocess.run(["pgrep", "-f", "--", f"--bind 127.0.0.1:{self.ports[index]} "],
                               capture_output=True, text=True)
        return [int(pid) for pid in found.stdout.split()]

    def running(self, base_url, count=2):
        """Start app servers until `count` of them run (the last first: the host reports to it)."""
        stopped = [index for index in reversed(range(len(self.ports))) if not self.pids(index)]
        for index in stopped[:count - (len(self.ports) - len(stopped))]:
            self.start(index)
        if len(stopped) == len(self.ports):
            # nginx takes none of them for fail_timeout after all of them failed.
            assert eventually(lambda: httpx.get(f"{base_url}/openapi.json", timeout=5).status_code == 200, 20)

    def send(self, index, signum):
        for pid in self.pids(index):
            subprocess.run(["kill", f"-{signum.value}", str(pid)], check=False)

    def stop(self, index, signum=signal.SIGTERM):
        self.send(index, signum)
        assert eventually(lambda: not self.pids(index), 15, interval=0.05), "the app server did not stop"

    def has_unread_request(self, index):
        """Whether a connection to app server `index` holds bytes nothing read yet (it is stopped: a request)."""
        sockets = subprocess.run(["ss", "-Htn", "state", "established", f"( sport = :{self.ports[index]} )"],
                                 capture_output=True, text=True, check=True).stdout
        return any(int(line.split()[0]) > 0 for line in sockets.splitlines())


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("behind_nginx")
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    # Two stacks: the host and nginx stop before the app servers, however often a test started those again.
    with private_database(workdir) as database_url, ExitStack() as app_servers, ExitStack() as stack:
        env = server_env(database_url, workdir)
        # No PUBLIC_BASE_URL: the records' URLs come from the Host nginx passes on, on a port other than 80.
        env.update(LANTERN_SSE_HEARTBEAT_SECONDS="1", LANTERN_BROWSER_DRIVER="host" if CHROMIUM else "external",
                   LANTERN_BROWSER_HOST_DIR=str(workdir / "hosts"))
        run_cli(env, "db", "upgrade")
        key = run_cli(env, "orgs", "create", "--name", "nginx", "--owner-email", "n@x.test").split()[-1]
        servers = AppServers(env, workdir, app_servers)
        config = workdir / "nginx.conf"
        config.write_text(nginx_config(workdir, port, [f"127.0.0.1:{p}" for p in servers.ports]))
        with open(workdir / "nginx.out", "wb") as output:
            nginx = subprocess.Popen([NGINX, "-c", str(config), "-p", str(workdir)], stderr=output)
        stack.callback(stop, nginx)
        deadline = time.monotonic() + 10
        while True:
            try:
                httpx.get(f"{base_url}/openapi.json", timeout=2).raise_for_status()
                break
            except httpx.HTTPError:
                assert nginx.poll() is None and time.monotonic() < deadline, \
                    (workdir / "logs" / "error.log").read_text()
                time.sleep(0.1)
        if CHROMIUM:
            # The host reports to the app server no test pauses (in_flight_when_killed): its heart-beats through
            # nginx could be the request found waiting in the paused one.
            host_app_url = f"http://127.0.0.1:{servers.ports[1]}"
            stack.callback(stop, browser_host(env, workdir, "nginx", capacity=1, app_url=host_app_url)[0])
        yield {"base_url": base_url, "key": key, "servers": servers, "logs": workdir / "logs"}


@pytest.fixture
def client(deployment):
    with httpx.Client(base_url=deployment["base_url"], timeout=30,
                      headers={"Authorization": f"Bearer {deployment['key']}"}) as client:
        yield client


def post_event(client, session_id, text):
    answer = client.post(f"/browsers/{session_id}/telemetry/events", json={"events": [
        {"type": "console_log", "source": {"kind": "cdp"}, "data": {"text": text, "level": "log"}}]})
    assert answer.status_code == 201, answer.text
    return answer.json()["last_seq"]


def test_sse_passes_unbuffered_with_its_keepalives_and_resumes_after_an_app_server_stops(deployment, client):
    deployment["servers"].running(deployment["base_url"], 2)
    created = client.post("/browsers", json={"headless": True, "telemetry": {
        "enabled": True, "browser": {"console": {"enabled": True}}}})
    assert created.status_code == 201, created.text
    session_id = created.json()["session_id"]
    lines, frames = [], []
    got_frame, got_keepalive, opened = threading.Event(), threading.Event(), threading.Event()

    def read():
        with client.stream("GET", f"/browsers/{session_id}/telemetry/stream",
                           timeout=httpx.Timeout(10, read=30)) as response:
            opened.set()  # the stream's cursor is fixed before its headers are sent
            for line in response.iter_lines():
                lines.append(line)
                if line.startswith("data: "):
                    frames.append(json.loads(line[6:]))
                    got_frame.set()
                elif line == ": keepalive":
                    got_keepalive.set()
                if got_frame.is_set() and got_keepalive.is_set():
                    return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert opened.wait(10), lines
    first_seq = post_event(client, session_id, "through nginx")
    # Unbuffered: the frame comes while the stream is open, long before it would end.
    assert got_frame.wait(10), lines
    assert [frame["event"]["data"]["text"] for frame in frames] == ["through nginx"]
    assert got_keepalive.wait(10), lines  # LANTERN_SSE_HEARTBEAT_SECONDS=1
    reader.join(5)

    # One app server stops; nginx sends what follows to the other, and the stream resumes.
    deployment["servers"].stop(0)
    later = [post_event(client, session_id, text) for text in ("after", "the stop")]
    resumed = []
    with client.stream("GET", f"/browsers/{session_id}/telemetry/stream",
                       headers={"Last-Event-ID": str(first_seq)}, timeout=httpx.Timeout(10, read=30)) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data: "):
                resumed.append(json.loads(line[6:]))
                if len(resumed) == 2:
                    break
    assert [(frame["seq"], frame["event"]["data"]["text"]) for frame in resumed] == list(zip(
        later, ("after", "the stop"), strict=True))
    client.delete(f"/browsers/{session_id}")


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium")
def test_the_cdp_websocket_and_the_live_view_are_relayed_through_nginx_and_no_log_holds_their_token(
        deployment, client):
    deployment["servers"].running(deployment["base_url"], 1)
    created = client.post("/browsers", json={"headless": True})
    assert created.status_code == 201, created.text
    created = created.json()
    assert created["cdp_ws_url"].startswith(f"ws://127.0.0.1:{deployment['base_url'].rsplit(':', 1)[1]}/")
    token = re.search(r"[?&]token=([^&]+)", created["cdp_ws_url"]).group(1)
    live_view = created["cdp_ws_url"].replace("/cdp?", "/cdp/live_view?")  # the live view page's connection
    try:
        for url in (created["cdp_ws_url"], live_view):
            connection = websocket.create_connection(url, timeout=20, suppress_origin=True)
            try:
                connection.send(json.dumps({"id": 1, "method": "Browser.getVersion"}))
                answer = json.loads(connection.recv())
                assert answer["id"] == 1 and "Chrome" in answer["result"]["product"]
            finally:
                connection.close()
        http_url = "http" + created["cdp_ws_url"][2:]
        page = httpx.get(http_url.replace("/cdp?", "/live?"), timeout=10)
        assert page.status_code == 200 and "Page.startScreencast" in page.text
        assert httpx.get(http_url.replace("/cdp?", "/cdp/json/version?"), timeout=10).status_code == 200
    finally:
        client.delete(f"/browsers/{created['session_id']}")
    session_path = f"/browsers/{created['session_id']}"
    paths = [f"{session_path}/cdp", f"{session_path}/cdp/live_view", f"{session_path}/live",
             f"{session_path}/cdp/json/version"]
    # A WebSocket's line is written when it closes.
    logged = eventually(lambda: all(f"GET {path} " in access_log(deployment) for path in paths), 10)
    assert logged, access_log(deployment)
    assert_no_token_logged(deployment, token)


def test_a_body_past_the_proxys_limit_is_answered_in_the_apis_error_body(deployment, client):
    # nginx answers it alone.
    status, headers, body = raw_request(deployment, "POST", "/extensions", 101 * 1024 * 1024)
    assert status == 413 and headers["content-type"] == "application/json", (status, headers, body)
    assert json.loads(body)["code"] == "payload_too_large"


def test_the_hosts_internal_routes_take_a_recordings_size(deployment, client):
    deployment["servers"].running(deployment["base_url"], 1)
    # A body of 1 GiB (REPLAY_MAX_BYTES) is not refused by nginx: the app answers (here: no host credential).
    status, headers, body = raw_request(deployment, "PUT", "/internal/browser-hosts/replays/r1", 1024 ** 3)
    assert status == 401 and json.loads(body)["code"] == "unauthorized", (status, headers, body)
    status, headers, body = raw_request(deployment, "PUT", "/internal/browser-hosts/replays/r1", 1024 ** 3 + 1)
    assert status == 413 and json.loads(body)["code"] == "payload_too_large", (status, headers, body)


def test_an_idempotent_request_in_flight_on_an_app_server_that_dies_is_answered_by_the_other(deployment, client):
    servers = deployment["servers"]
    servers.running(deployment["base_url"], 2)
    # The live view's page, opened as a viewer's browser would (its token in the query, no key).
    path = "/browsers/no-such-session/live"
    answer, dead = in_flight_when_killed(servers, lambda: httpx.get(
        f"{deployment['base_url']}{path}", params={"token": TOKEN}, timeout=30))
    # The dead server never answered: this is the other's answer (the token is not that of a session).
    assert answer.status_code == 401 and answer.json()["code"] == "unauthorized", answer.text
    line = eventually(lambda: log_line(deployment, answer.headers["X-Request-Id"]), 10)
    assert f"127.0.0.1:{servers.ports[dead]}, 127.0.0.1:{servers.ports[1 - dead]} 502, 401" in line, line
    assert_no_token_logged(deployment, TOKEN)  # the error log has the failed attempt, without its query


def test_a_create_in_flight_on_an_app_server_that_dies_is_answered_in_the_apis_error_body_not_sent_again(
        deployment, client):
    servers = deployment["servers"]
    servers.running(deployment["base_url"], 2)
    answer, dead = in_flight_when_killed(servers, lambda: client.post("/browsers", json={"headless": True}))
    assert_error_body(answer, 502, "bad_gateway")
    assert answer.headers["x-should-retry"] == "false"  # it may have run: the SDKs must not send it again
    line = eventually(lambda: log_line(deployment, answer.headers["X-Request-Id"]), 10)
    assert 'POST /browsers HTTP/1.1" 502 ' in line and line.endswith(f" 127.0.0.1:{servers.ports[dead]} 502"), line


def test_what_no_app_server_takes_is_answered_in_the_apis_error_body(deployment, client):
    servers = deployment["servers"]
    for index in range(len(servers.ports)):
        servers.stop(index, signal.SIGKILL)
    try:
        for method in ("GET", "POST"):  # nothing was sent: the SDKs may retry either
            answer = client.request(method, "/browsers", json={} if method == "POST" else None)
            assert_error_body(answer, 502, "bad_gateway")
            assert "x-should-retry" not in answer.headers
    finally:
        servers.running(deployment["base_url"], 1)  # the host's: a stopping host tells its app so


def in_flight_when_killed(servers, send):
    """(answer, index): `send` a request through nginx until one waits in a stopped app server, then kill that
    server; the answer nginx gives that request, and which server died."""
    dead = 0
    servers.send(dead, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 30  # nginx skips a server that failed for 10 s (fail_timeout)
        while True:
            request = Request(send)
            eventually(lambda r=request: servers.has_unread_request(dead) or r.answered.is_set(), 10)
            if servers.has_unread_request(dead) and not request.answered.is_set():
                break
            request.answered.wait(10)  # the other server answered it: send another
            assert time.monotonic() < deadline, "no request reached the stopped app server"
    finally:
        servers.stop(dead, signal.SIGKILL)
    assert request.answered.wait(30), "no answer"
    return request.answer, dead


class Request(threading.Thread):
    def __init__(self, send):
        super().__init__(daemon=True)
        self.send, self.answer, self.answered = send, None, threading.Event()
        self.start()

    def run(self):
        try:
            self.answer = self.send()
        finally:
            self.answered.set()


def raw_request(deployment, method, path, length):
    """(status, headers, body) of a request whose headers say `length` bytes of body, of which none are sent."""
    port = int(deployment["base_url"].rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: video/mp4\r\n"
                           f"Content-Length: {length}\r\n\r\n".encode())
        data = b""
        while b"\r\n\r\n" not in data or len(data.partition(b"\r\n\r\n")[2]) < content_length(data):
            chunk = connection.recv(65536)
            assert chunk, data
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode().split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (h.partition(":") for h in header_lines)}
    return int(status_line.split()[1]), headers, body.decode()


def content_length(data):
    found = re.search(rb"\r\ncontent-length: *(\d+)", data.partition(b"\r\n\r\n")[0], flags=re.I)
    return int(found.group(1)) if found else 1


def assert_error_body(answer, status, code):
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "application/json", answer.headers
    body = answer.json()
    assert body["code"] == code and body["message"] and body["details"] == [], body
    assert re.fullmatch(r"[0-9a-f]{32}", answer.headers["X-Request-Id"])


def access_log(deployment):
    return "".join(path.read_text() for path in deployment["logs"].glob("*access.log"))


def log_line(deployment, request_id):
    return next((line for line in access_log(deployment).splitlines() if f" {request_id} " in line), None)


def assert_no_token_logged(deployment, token):
    for path in deployment["logs"].iterdir():
        text = path.read_text()
        assert token not in text and "token=" not in text, (path.name, text[-2000:])
