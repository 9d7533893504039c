"""Fixtures of the agent's tests: the real agent, run as the sandbox will run it (the system's Python with -I -S,
the package imported as `agent`, its listening socket as stdin), but unsandboxed in a tmp folder, and a client
that speaks HTTP to it over its Unix socket."""
import http.client
import json
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

SESSION_USER = "lantern-browser"  # the sandbox's user, installed on this machine
AGENT_PACKAGE = Path(__file__).resolve().parents[3] / "browserhost" / "agent"
SYSTEM_PYTHON = "/usr/bin/python3"


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, socket_path: str, timeout: float):
        super().__init__("agent", timeout=timeout)
        self.socket_path = socket_path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.socket_path)


class Reply:
    def __init__(self, status: int, headers: http.client.HTTPMessage, body: bytes):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self):
        return json.loads(self.body)


class RunningAgent:
    """A running agent and a client of it. Paths in requests are the test's absolute tmp paths."""

    def __init__(self, folder: Path, user: str | None = None):
        self.folder = folder
        self.socket_path = str(folder / "agent.sock")
        (folder / "lib").mkdir()
        (folder / "lib" / "agent").symlink_to(AGENT_PACKAGE)
        self.log_path = folder / "agent.log"
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.socket_path)
        listener.listen(64)
        code = f"import sys; sys.path.insert(0, {str(folder / 'lib')!r}); from agent.__main__ import main; main()"
        identity = {"user": user, "group": user, "extra_groups": []} if user else {}
        with listener, open(self.log_path, "wb") as log:
            self.process = subprocess.Popen([SYSTEM_PYTHON, "-I", "-S", "-c", code], stdin=listener,
                                            stdout=log, stderr=log, cwd=folder, **identity)
        self.pid = self.process.pid

    def open(self, method: str, path: str, body=None, headers: dict | None = None, json_body=None,
             room: int | None = None, timeout: float = 30) -> http.client.HTTPResponse:
        """Send a request; the answer is read by the caller (streams, SSE). `body` may be bytes or an iterable
        of bytes (sent chunked unless headers give a Content-Length)."""
        headers = dict(headers or {})
        if json_body is not None:
            body = json.dumps(json_body).encode()
            headers.setdefault("Content-Type", "application/json")
        if room is not None:
            headers["X-Lantern-Room"] = str(room)
        connection = UnixConnection(self.socket_path, timeout)
        encode_chunked = body is not None and not isinstance(body, bytes) and "Content-Length" not in headers
        connection.request(method, path, body=body, headers=headers, encode_chunked=encode_chunked)
        return connection.getresponse()

    def call(self, method: str, path: str, **options) -> Reply:
        answer = self.open(method, path, **options)
        with answer:
            return Reply(answer.status, answer.headers, answer.read())

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def wait_until_serving(agent: RunningAgent, deadline: float = 10.0):
    """The listening socket accepts at once (the kernel queues), so wait for a first answer."""
    end = time.monotonic() + deadline
    while True:
        try:
            agent.call("GET", "/ready-probe", timeout=2)
            return
        except OSError:
            if time.monotonic() > end or agent.process.poll() is not None:
                raise AssertionError(f"the agent did not start:\n{agent.log()}") from None
            time.sleep(0.05)


@pytest.fixture
def agent(tmp_path_factory):
    """A running agent; its socket, log and package link are in a folder of their own, not in tmp_path."""
    running = RunningAgent(tmp_path_factory.mktemp("agent"))
    try:
        wait_until_serving(running)
        yield running
    finally:
        running.stop()


@pytest.fixture
def user_agent():
    """A running agent as the sandbox's user, as in a session, and a folder of that user's for its files (the
    pytest tmp folders are root's alone). Yields (agent, folder)."""
    try:
        user = pwd.getpwnam(SESSION_USER)
    except KeyError:
        pytest.skip(f"no user {SESSION_USER}")
    top = Path(tempfile.mkdtemp(prefix="lantern-agent-"))
    try:
        top.chmod(0o755)
        work = top / "work"
        work.mkdir()
        os.chown(work, user.pw_uid, user.pw_gid)
        (top / "run").mkdir()
        running = RunningAgent(top / "run", user=SESSION_USER)
        try:
            wait_until_serving(running)
            yield running, work
        finally:
            running.stop()
    finally:
        shutil.rmtree(top)
