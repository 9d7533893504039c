"""A session's agent in a real sandbox (browserhost/agents.py, sandbox.py, cgroups.py): it runs as the sandbox's user
in the session's tenant cgroup, outlives a browser's restart, and goes with the session's sandbox, leaving no cgroup;
a tenant's process killed for memory is the tenant's, not the browser's, and the room follows what the tenant
stores."""
import base64
import http.client
import json
import subprocess
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from browserhost import agents, sandbox, sandbox_policy
from browserhost.unsandboxed import xvfb_available
from tests.browserhost.helpers import CHROMIUM, host_server, needs_chromium
from tests.live_server import cannot_sandbox
from tests.waiting import eventually

pytestmark = pytest.mark.skipif(bool(cannot_sandbox()), reason=f"this machine cannot sandbox: {cannot_sandbox()}")
MIB = 1024 * 1024


def agent_python(box):
    """The host pid of the agent's Python, in the tenant cgroup."""
    return next(pid for pid in box.cgroup.tenant_pids()
                if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"/usr/bin/python3\0-I\0-S\0"))


def ask(agent, box, request):
    """The agent's whole answer to `request` (bytes), on a new connection."""
    with agent.connect(box) as upstream:
        upstream.sendall(request)
        answer = b""
        while chunk := upstream.recv(65536):
            answer += chunk
    return answer


def running(pid):
    """Whether `pid` is a live process (not gone, not a zombie: one orphaned to the machine's init may stay one a
    moment)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def status_field(pid, name):
    line = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith(name + ":"))
    return line.split()[1]


def test_the_agent_runs_as_the_sandbox_user_in_the_tenant_cgroup_survives_a_restart_and_goes_with_the_sandbox(box):
    browser = box.popen(["/bin/sh", "-c", "sleep 60"], stdout=subprocess.DEVNULL)
    agent = agents.SessionAgent()
    answer = ask(agent, box, b"GET /fs/no-such-route HTTP/1.1\r\nHost: agent\r\nConnection: close\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 404 ") and b"Server: lantern-agent" in answer
    python = agent_python(box)
    assert int(status_field(python, "Uid")) == sandbox_policy.SandboxPolicy().ids()[0]
    assert python not in box.cgroup.pids() and python in box.cgroup.pids(everything=True)
    assert (Path(box.devtools_folder) / sandbox.AGENT_SOCKET).stat().st_mode & 0o777 == 0o600

    box.stop_browser(browser, grace=1)  # as a restart for a new viewport does
    assert browser.poll() is not None and running(python)
    again = ask(agent, box, b"GET /fs/no-such-route HTTP/1.1\r\nHost: agent\r\nConnection: close\r\n\r\n")
    assert again.startswith(b"HTTP/1.1 404 ") and agent_python(box) == python  # the same agent

    box.destroy()
    assert not running(python) and agent.process.poll() is not None
    assert not box.cgroup.exists() and not any(folder.exists() for folder in box.cgroup.tenant_folders())
    assert not box.root.exists()


def test_a_tenants_process_killed_for_memory_is_not_the_browsers_and_the_room_follows_what_it_stores(box):
    browser = box.popen(["/bin/sh", "-c", "sleep 60"], stdout=subprocess.DEVNULL)
    tenant_cap = box.cgroup.tenant_limits()[0]
    assert tenant_cap == 192 * MIB
    room = box.room()
    assert 100 * MIB < room <= tenant_cap
    stored = box.popen(["/bin/sh", "-c", "head -c 50000000 /dev/zero > /home/kernel/big; readlink /home/kernel"],
                       tenant=True, stdout=subprocess.PIPE, text=True)
    assert stored.communicate(timeout=30)[0].strip() == "/home/session" and stored.returncode == 0
    assert room - box.room() >= 45 * MIB  # the file is memory of the tenant, which it can no longer use

    hog = box.popen(["/usr/bin/python3", "-c", "x = bytearray(300 * 1024 * 1024)"], tenant=True,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    hog.wait(timeout=30)
    assert eventually(lambda: box.cgroup.oom_kills(tenant=True) >= 1, 5, interval=0.1)
    assert box.oom_kills() == 0 and browser.poll() is None  # the session goes on
    browser.kill()
    browser.wait()


@pytest.mark.skipif(not xvfb_available(), reason="Xvfb is not installed (apt-get install xvfb)")
@needs_chromium
def test_through_the_host_the_agent_outlives_chromiums_restart_and_ends_with_the_session(tmp_path, monkeypatch):
    server = host_server(tmp_path)
    server.starts.binary = CHROMIUM
    monkeypatch.setattr(server.registry, "watch", lambda hosted: None)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), server.handler_class())
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        status, answer = server.starts.start_browser({"session_id": "s1", "headless": False,
                                                      "viewport": {"width": 800, "height": 600}})
        assert status == 201, answer
        hosted = server.registry.hosted["s1"]
        box = hosted.box

        def call(method="GET", rest="fs/no-such-route", body=None):
            connection = http.client.HTTPConnection("127.0.0.1", httpd.server_address[1], timeout=30)
            try:
                connection.request(method, f"/sessions/s1/agent/{rest}", body=body,
                                   headers={"Authorization": f"Bearer {server.control_key}"})
                answer = connection.getresponse()
                return answer.status, answer.headers, answer.read()
            finally:
                connection.close()

        status, headers, body = call()
        # The agent's words (the host's refusals say "No such route") under the host's own head.
        assert status == 404 and json.loads(body)["message"] == "no route /fs/no-such-route"
        assert headers["Connection"] == "close" and not headers["Server"].startswith("lantern-agent")
        data = bytes(range(256)) * 32 * 1024  # 8 MiB
        assert call("PUT", "fs/write_file?path=/home/kernel/Downloads/a.bin", data)[0] == 201
        assert call("GET", "fs/read_file?path=/home/session/Downloads/a.bin")[2] == data
        status, _, body = call("POST", "process/exec", json.dumps({"command": "id", "args": ["-u"]}).encode())
        assert status == 200 and base64.b64decode(json.loads(body)["stdout_b64"]) == \
            f"{sandbox_policy.SandboxPolicy().ids()[0]}\n".encode()
        status, _, body = call("POST", "process/spawn", json.dumps({"command": "sleep", "args": ["61"]}).encode())
        assert status == 200, body
        def commands():
            return [Path(f"/proc/{pid}/cmdline").read_bytes() for pid in box.cgroup.tenant_pids()]

        # What the agent runs is in the tenant's cgroup.
        assert eventually(lambda: any(c.endswith(b"sleep\x0061\x00") for c in commands()), 5, interval=0.05), \
            commands()
        python, chromium = agent_python(box), hosted.browser.pid
        assert server.running.resize(hosted, {"width": 1600, "height": 1000, "restart": True}) == \
            (200, {"restarted": True})
        assert hosted.browser.pid != chromium and running(python) and agent_python(box) == python
        assert call()[0] == 404 and agent_python(box) == python  # the same agent answers

        server.registry.stop_browser("s1", save=False, reason=None)
        assert not running(python) and not box.cgroup.exists() and not box.root.exists()
    finally:
        for session_id in list(server.registry.hosted):
            server.registry.stop_browser(session_id, save=False, reason=None)
        httpd.shutdown()
        httpd.server_close()
