"""A session's agent in a real sandbox bounds the user namespaces of what it runs (browserhost/agent/confine.py):
they are counted per uid across the machine and every sandbox is one uid, so a tenant looping `unshare -U` could
otherwise leave none for the next sandbox. Chromium's, outside the agent's namespace, are not bound by it; the
agent's processes still run, and its files are still owned, as the session's user."""
import base64
import http.client
import json
import subprocess

import pytest

from browserhost import agents, sandbox_policy
from browserhost.agent.confine import MAX_USER_NAMESPACES
from tests.live_server import cannot_sandbox

pytestmark = pytest.mark.skipif(bool(cannot_sandbox()), reason=f"this machine cannot sandbox: {cannot_sandbox()}")
TRIES = MAX_USER_NAMESPACES + 14
# TRIES sleepers of their own user namespace at once, then how many live.
# (Their pids kept as they start: `$(jobs -p)` runs in a subshell, where sh has no jobs, and the wait took 20 s.)
SLEEPERS = f"pids=; for i in $(seq {TRIES}); do unshare -U sleep 20 2>/dev/null & pids=\"$pids $!\"; done; " \
           "sleep 1; ps -o comm= --ppid $$ | grep -c sleep; kill $pids 2>/dev/null; wait"


def ask(agent, box, method, path, body=b""):
    """(status, body) of the agent's answer, on a new connection."""
    with agent.connect(box) as upstream:
        upstream.sendall(f"{method} {path} HTTP/1.1\r\nHost: agent\r\nContent-Length: {len(body)}\r\n"
                         "Connection: close\r\n\r\n".encode() + body)
        answer = http.client.HTTPResponse(upstream)
        answer.begin()
        return answer.status, answer.read()


def shell(agent, box, script):
    status, body = ask(agent, box, "POST", "/process/exec",
                       json.dumps({"command": "/bin/sh", "args": ["-c", script]}).encode())
    assert status == 200, body
    return base64.b64decode(json.loads(body)["stdout_b64"]).decode().split()


def test_the_agents_processes_make_at_most_max_user_namespaces_and_the_sessions_own_are_not_bound(box):
    agent = agents.SessionAgent()
    uid, gid = sandbox_policy.SandboxPolicy().ids()
    assert shell(agent, box, "id -u; id -g") == [str(uid), str(gid)]
    assert shell(agent, box, SLEEPERS) == [str(MAX_USER_NAMESPACES)]

    # A process of the session outside the agent's namespace (as Chromium is) still makes as many as it asks for.
    chromium_like = box.popen(["/bin/sh", "-c", SLEEPERS], stdout=subprocess.PIPE, text=True)
    assert chromium_like.communicate(timeout=60)[0].split() == [str(TRIES)]

    status, _ = ask(agent, box, "PUT", "/fs/write_file?path=/home/kernel/owned.txt", b"abc")
    assert status == 201
    owned = (box.home / "owned.txt").stat()
    assert (owned.st_uid, owned.st_gid) == (uid, gid)
