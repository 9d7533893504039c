"""Two app servers on one database behind Debian's nginx, configured as docs/operations.md says: SSE is not
buffered, keepalives pass, a stream resumes with Last-Event-ID after one app server stopped, and the CDP
WebSocket is relayed."""
import json
import re
import shutil
import subprocess
import threading
import time
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


def nginx_config(workdir, port, upstreams):
    """docs/operations.md's server block, on 127.0.0.1:`port` without TLS, in front of `upstreams`."""
    docs = (ROOT / "docs" / "operations.md").read_text()
    block = re.search(r"## nginx in front.*?```nginx\n(.*?)```", docs, flags=re.S).group(1)
    block = block.replace("    server 127.0.0.1:8000;\n", "".join(f"    server {u};\n" for u in upstreams))
    block = block.replace("listen 443 ssl;", f"listen 127.0.0.1:{port};")
    temp = workdir / "nginx-temp"
    temp.mkdir()
    return f"""daemon off;
user root;
worker_processes 1;
pid {workdir}/nginx.pid;
error_log {workdir}/nginx-error.log;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {temp}/body;
    proxy_temp_path {temp}/proxy;
    fastcgi_temp_path {temp}/fastcgi;
    uwsgi_temp_path {temp}/uwsgi;
    scgi_temp_path {temp}/scgi;
{block}
}}
"""


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("behind_nginx")
    port = free_port()
    with private_database(workdir) as database_url:
        env = server_env(database_url, workdir)
        # No PUBLIC_BASE_URL: the records' URLs come from the Host nginx passes on, on a port other than 80.
        env.update(LANTERN_SSE_HEARTBEAT_SECONDS="1", LANTERN_BROWSER_DRIVER="host" if CHROMIUM else "external",
                   LANTERN_BROWSER_HOST_DIR=str(workdir / "hosts"))
        run_cli(env, "db", "upgrade")
        key = run_cli(env, "orgs", "create", "--name", "nginx", "--owner-email", "n@x.test").split()[-1]
        with gunicorn(env, workdir / "a.log") as first, gunicorn(env, workdir / "b.log") as second:
            # The host reports to one app server, as a host on another machine would to its app's address.
            host = browser_host(env, workdir, "nginx", capacity=1, app_url=first)[0] if CHROMIUM else None
            try:
                config = workdir / "nginx.conf"
                config.write_text(nginx_config(workdir, port, [first.removeprefix("http://"),
                                                               second.removeprefix("http://")]))
                with open(workdir / "nginx.out", "wb") as output:
                    nginx = subprocess.Popen([NGINX, "-c", str(config), "-p", str(workdir)], stderr=output)
                try:
                    base_url = f"http://127.0.0.1:{port}"
                    deadline = time.monotonic() + 10
                    while True:
                        try:
                            httpx.get(f"{base_url}/openapi.json", timeout=2).raise_for_status()
                            break
                        except httpx.HTTPError:
                            assert nginx.poll() is None and time.monotonic() < deadline, \
                                (workdir / "nginx-error.log").read_text()
                            time.sleep(0.1)
                    yield {"base_url": base_url, "key": key, "gunicorns": (first, second), "workdir": workdir}
                finally:
                    stop(nginx)
            finally:
                if host is not None:
                    stop(host)


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
    stop_one_app_server(deployment)
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
def test_the_cdp_websocket_and_the_live_view_are_relayed_through_nginx(deployment, client):
    created = client.post("/browsers", json={"headless": True}).json()
    assert created["cdp_ws_url"].startswith(f"ws://127.0.0.1:{deployment['base_url'].rsplit(':', 1)[1]}/")
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
        page = httpx.get("http" + live_view[2:].replace("/cdp/live_view?", "/live?"), timeout=10)
        assert page.status_code == 200 and "Page.startScreencast" in page.text
    finally:
        client.delete(f"/browsers/{created['session_id']}")


def stop_one_app_server(deployment):
    """Stop the first gunicorn (its port then refuses connections; nginx tries the other)."""
    port = deployment["gunicorns"][0].rsplit(":", 1)[1]
    found = subprocess.run(["pgrep", "-f", "--", f"--bind 127.0.0.1:{port} "], capture_output=True, text=True)
    assert found.stdout.split(), "no app server on that port"
    for pid in found.stdout.split():
        subprocess.run(["kill", "-TERM", pid], check=False)
    gone = eventually(lambda: subprocess.run(["pgrep", "-f", "--", f"--bind 127.0.0.1:{port} "],
                                             capture_output=True).returncode != 0, 15, interval=0.1)
    assert gone, "the app server did not stop"
