"""The host's forwarding of files and processes calls to a session's agent (browserhost/agent_forward.py, control.py's
ANY /sessions/{id}/agent/...), against a stand-in agent (fake_agent.py) started as the host starts the real one:
lazily, on its listening socket as stdin. Bodies and answers of any size stream through without being held; the
agent gets the headers that matter and the session's room; what is not forwarded gets a clear refusal."""
import hashlib
import http.client
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from browserhost import agent_forward, agents, sandbox_policy
from browserhost.registry import Hosted
from browserhost.server import ControlServer
from browserhost.unsandboxed import HostBox
from lantern_wire import control
from tests.browserhost.fake_agent import PATTERN
from tests.browserhost.helpers import host_server
from tests.waiting import eventually

FAKE_AGENT = Path(__file__).with_name("fake_agent.py")
MIB = 1024 * 1024


class FakeBox:
    """A sandbox as agents.py uses one: a listener in a folder of its own, a popen that starts the stand-in agent
    (or `program`) on it, and a room."""

    sandboxed = True
    name = "fake-box"

    def __init__(self, folder, program=None, room=5 * MIB):
        self.folder, self.program, self.room_bytes = folder, program, room
        self.memory_bytes = 256 * MIB
        self.started = []  # (argv, binds, tenant) of each start
        self.processes = []

    def listener(self, name):
        path = self.folder / name
        path.unlink(missing_ok=True)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(path))
        listener.listen(128)  # as the sandbox's
        return listener

    def popen(self, argv, *, binds, tenant, **options):
        self.started.append((argv, binds, tenant))
        process = subprocess.Popen(self.program or [sys.executable, str(FAKE_AGENT)], **options)
        self.processes.append(process)
        return process

    def room(self):
        return self.room_bytes

    def memory_left(self):
        return self.memory_bytes

    def readable_copy(self, folder):
        return folder

    def stop(self):
        for process in self.processes:
            process.kill()
            process.wait()


@pytest.fixture
def host(tmp_path):
    """A host serving its control API on 127.0.0.1, hosting session s1 in a FakeBox (host.box)."""
    server = host_server(tmp_path, BROWSER_SANDBOX="off")
    httpd = ControlServer(("127.0.0.1", 0), server.handler_class())
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    server.port = httpd.server_address[1]
    server.box = FakeBox(tmp_path)
    server.registry.hosted["s1"] = Hosted("s1", tmp_path / "s1", box=server.box, starting=False)
    yield server
    httpd.shutdown()
    httpd.server_close()
    server.box.stop()


def call(host, method, rest, body=None, headers=None, session="s1"):
    """(status, headers, body) of a call to the host's agent route."""
    connection = http.client.HTTPConnection("127.0.0.1", host.port, timeout=30)
    headers = {"Authorization": f"Bearer {host.control_key}", **(headers or {})}
    connection.request(method, control.SESSION_AGENT.format(session_id=session, path=rest), body=body,
                       headers=headers)
    try:
        answer = connection.getresponse()
        return answer.status, answer.headers, answer.read()
    finally:
        connection.close()


def rss_bytes():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


class RssPeak:
    """The most this process's RSS grew above where it was when the block began, sampled every 5 ms."""

    def __enter__(self):
        self.base, self.peak, self.done = rss_bytes(), 0, threading.Event()
        self.thread = threading.Thread(target=self.sample)
        self.thread.start()
        return self

    def sample(self):
        while not self.done.wait(0.005):
            self.peak = max(self.peak, rss_bytes() - self.base)

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join()


def test_the_agent_gets_the_call_as_it_came_with_the_headers_that_matter_and_the_room(host):
    status, headers, body = call(host, "GET", "fs/echo?path=%2Fhome%2Fkernel%2Fa%20b&x=1",
                                 headers={"Accept": "application/json", "Last-Event-ID": "7", "Cookie": "c=1"})
    assert status == 200 and headers["Connection"] == "close"
    echoed = json.loads(body)
    assert echoed["line"] == "GET /fs/echo?path=%2Fhome%2Fkernel%2Fa%20b&x=1 HTTP/1.1"
    forwarded = dict(echoed["headers"])
    assert forwarded[control.ROOM_HEADER] == str(5 * MIB)
    assert forwarded["Accept"] == "application/json" and forwarded["Last-Event-ID"] == "7"
    assert forwarded["Connection"] == "close"
    # The host's key and whatever else the app sent are not the agent's.
    assert "Authorization" not in forwarded and "Cookie" not in forwarded
    [(argv, binds, tenant)] = host.box.started
    assert argv == list(agents.ARGV) and argv[:3] == ["/usr/bin/python3", "-I", "-S"]
    assert binds == [(agents.AGENT_PACKAGE, "/opt/lantern/agent")] and tenant is True

    host.box.room_bytes = 0  # read anew for each call
    _, _, body = call(host, "GET", "fs/echo")
    assert dict(json.loads(body)["headers"])[control.ROOM_HEADER] == "0"
    assert len(host.box.started) == 1  # the agent started once, on the first call


def test_a_large_body_and_a_large_answer_stream_through_without_being_held(host):
    size = 64 * MIB

    def chunks():
        for _ in range(size // len(PATTERN)):
            yield PATTERN

    call(host, "GET", "fs/echo")  # the agent runs: its start is not measured
    with RssPeak() as upload:
        status, _, body = call(host, "PUT", "fs/sink", body=chunks(), headers={"Content-Length": str(size)})
    expected = hashlib.sha256(PATTERN * (size // len(PATTERN))).hexdigest()
    assert status == 201 and json.loads(body) == {"size": size, "sha256": expected}

    connection = http.client.HTTPConnection("127.0.0.1", host.port, timeout=30)
    with RssPeak() as download:
        connection.request("GET", control.SESSION_AGENT.format(session_id="s1", path=f"fs/source?size={size}"),
                           headers={"Authorization": f"Bearer {host.control_key}"})
        answer = connection.getresponse()
        digest, received = hashlib.sha256(), 0
        while chunk := answer.read(256 * 1024):
            digest.update(chunk)
            received += len(chunk)
    connection.close()
    assert answer.status == 200 and received == size and digest.hexdigest() == expected
    assert upload.peak < 4 * MIB and download.peak < 4 * MIB, (upload.peak, download.peak)


def test_an_answer_the_agent_gives_before_reading_the_body_reaches_the_app(host):
    status, _, body = call(host, "PUT", "fs/refuse", body=b"x" * (8 * MIB))
    assert status == 413 and json.loads(body)["code"] == "insufficient_room"


def test_a_refusal_before_the_body_reaches_the_app_even_when_the_agent_closes_at_once(host):
    for _ in range(3):
        status, _, body = call(host, "PUT", "fs/slam", body=b"x" * (16 * MIB))
        assert status == 413 and json.loads(body)["code"] == "insufficient_room"


@pytest.mark.parametrize("chunked", [False, True])
def test_what_the_agent_writes_past_its_answer_never_reaches_the_app(host, chunked):
    """The agent is the tenant's: an answer without Connection: close and a second one after it must not reach the
    app's connection, where a pool would read the second as the answer to another organisation's next call."""
    with socket.create_connection(("127.0.0.1", host.port), timeout=30) as raw:
        raw.sendall(f"GET /sessions/s1/agent/fs/forge?chunked={int(chunked)} HTTP/1.1\r\nHost: h\r\n"
                    f"Authorization: Bearer {host.control_key}\r\n\r\n".encode())
        received = b""
        while data := raw.recv(65536):  # to the host's close
            received += data
    head, _, body = received.partition(b"\r\n\r\n")
    assert received.count(b"HTTP/1.1 ") == 1 and b"forged" not in received
    assert b"Connection: close" in head and b"keep-alive" not in head and b"Set-Cookie" not in head
    assert b"Content-Type: application/json" in head
    if chunked:
        assert b"Transfer-Encoding: chunked" in head and body == b'f\r\n{"first": true}\r\n0\r\n\r\n'
    else:
        assert b"Content-Length: 15" in head and body == b'{"first": true}'


def test_an_answer_that_is_no_http_is_a_502(host, monkeypatch):
    host.box.program = [sys.executable, "-c", "import socket, time\nlistener = socket.socket(fileno=0)\n"
                        "while True:\n    connection, _ = listener.accept()\n    connection.sendall(b'garbage\\r\\n')\n"
                        "    connection.close()"]
    monkeypatch.setattr(agents, "READY_SECONDS", 5.0)
    status, _, body = call(host, "GET", "fs/echo")
    assert status == 502 and json.loads(body)["code"] == "agent_no_answer"


def test_a_chunked_body_is_refused_with_411(host):
    status, _, body = call(host, "PUT", "fs/sink", body=iter([b"abc"]), headers={"Transfer-Encoding": "chunked"})
    assert status == 411 and json.loads(body)["code"] == "length_required"
    assert not host.box.started  # nothing was started for it


@pytest.mark.parametrize("rest", ["etc/passwd", "fsx/read_file", "processes/x", "agent.log"])
def test_only_fs_and_process_calls_are_forwarded(host, rest):
    status, _, body = call(host, "GET", rest)
    assert status == 404 and json.loads(body)["code"] == "not_found"
    assert not host.box.started


def test_an_unknown_session_is_404_and_an_unsandboxed_one_501(host, tmp_path):
    assert call(host, "GET", "fs/echo", session="nope")[0] == 404
    host.registry.hosted["s2"] = Hosted("s2", tmp_path / "s2", box=HostBox(tmp_path / "s2"), starting=False)
    status, _, body = call(host, "PUT", "fs/write_file?path=/tmp/a", body=b"abc", session="s2")
    assert status == 501 and json.loads(body)["code"] == "files_not_served"


def test_a_session_starting_is_409_and_one_stopping_404(host):
    hosted = host.registry.hosted["s1"]
    hosted.starting = True
    status, _, body = call(host, "GET", "fs/echo")
    assert status == 409 and json.loads(body)["code"] == "browser_restarting"
    hosted.starting, hosted.stopping = False, True
    assert call(host, "GET", "fs/echo")[0] == 404
    assert not host.box.started


def test_an_agent_that_does_not_start_is_503_and_the_next_call_starts_one(host, monkeypatch):
    monkeypatch.setattr(agents, "READY_SECONDS", 2.0)
    host.box.program = [sys.executable, "-c", "import sys; sys.exit(3)"]
    status, _, body = call(host, "PUT", "fs/sink", body=b"abc")
    assert status == 503 and json.loads(body)["code"] == "agent_unavailable"
    assert "exited as it started" in json.loads(body)["message"]

    host.box.program = [sys.executable, "-c", "import time; time.sleep(60)"]  # never accepts
    started = time.monotonic()
    status, _, body = call(host, "PUT", "fs/sink", body=b"abc")
    assert status == 503 and "did not start within 2 s" in json.loads(body)["message"]
    assert 1.5 < time.monotonic() - started < 10
    assert host.box.processes[-1].poll() is not None  # killed, not left behind

    host.box.program = None
    status, _, body = call(host, "PUT", "fs/sink", body=b"abc")
    assert status == 201 and json.loads(body)["size"] == 3


def test_a_tenant_too_full_for_the_agent_to_start_is_413_session_memory_full(host):
    """A retry cannot help (a 503 would have the SDKs send it again and again): a 413 says what is wrong."""
    host.box.memory_bytes = agents.AGENT_START_BYTES - 1
    status, _, body = call(host, "GET", "fs/echo")
    refusal = json.loads(body)
    assert status == 413 and refusal["code"] == "session_memory_full" and refusal["room_bytes"] == 0
    assert not host.box.started
    host.box.memory_bytes = agents.AGENT_START_BYTES
    assert call(host, "GET", "fs/echo")[0] == 200


def test_calls_at_once_start_one_agent_and_a_dead_agent_is_started_again(host):
    answers = []
    threads = [threading.Thread(target=lambda: answers.append(call(host, "GET", "fs/echo")[0])) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [200] * 6 and len(host.box.started) == 1

    status, _, body = call(host, "GET", "fs/die")
    assert status == 502 and json.loads(body)["code"] == "agent_no_answer"
    host.box.processes[0].wait(10)
    assert call(host, "GET", "fs/echo")[0] == 200 and len(host.box.started) == 2


def test_the_request_head_escapes_nothing_and_a_line_break_in_a_header_is_refused(host):
    head = agent_forward.request_head("PUT", "fs/write_file", "path=%2Ftmp%2Fa",
                                      {"Content-Length": "9", "Accept": "*/*"}, 3, 12)
    assert head == (b"PUT /fs/write_file?path=%2Ftmp%2Fa HTTP/1.1\r\nHost: agent\r\nAccept: */*\r\n"
                    b"Content-Length: 3\r\nX-Lantern-Room: 12\r\nConnection: close\r\n\r\n")
    with socket.create_connection(("127.0.0.1", host.port)) as raw:
        raw.sendall(b"GET /sessions/s1/agent/fs/echo HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer "
                    + host.control_key.encode() + b"\r\nAccept: a\r\n b\r\nContent-Length: 0\r\n\r\n")
        assert raw.recv(4096).startswith(b"HTTP/1.1 400 ")


def test_without_the_system_python_calls_answer_501_and_the_probe_warns(host, monkeypatch):
    monkeypatch.setattr(agents.os, "access", lambda path, mode: path != agents.PYTHON)
    status, _, body = call(host, "GET", "fs/echo")
    assert status == 501 and json.loads(body)["code"] == "agent_not_installed" and not host.box.started

    monkeypatch.setattr(sandbox_policy, "landlock_abi", lambda: 0)
    [python, landlock] = sandbox_policy.agent_warnings()
    assert "no /usr/bin/python3" in python and "no Landlock" in landlock
    monkeypatch.undo()
    monkeypatch.setattr(sandbox_policy, "landlock_abi", lambda: 5)
    assert ["signalling" in warning for warning in sandbox_policy.agent_warnings()] == [True]
    monkeypatch.setattr(sandbox_policy, "landlock_abi", lambda: 7)
    assert sandbox_policy.agent_warnings() == []


# -- what one session can hold of the host ------------------------------------------------------------------------

def send_and_keep(host, rest, session="s1"):
    """A call to the agent route on a raw connection, left open (the caller waits for its answer)."""
    raw = socket.create_connection(("127.0.0.1", host.port), timeout=30)
    raw.sendall(f"GET /sessions/{session}/agent/{rest} HTTP/1.1\r\nHost: h\r\n"
                f"Authorization: Bearer {host.control_key}\r\n\r\n".encode())
    return raw


def leave(raw, reset=False):
    if reset:  # as a killed client does
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    raw.close()


def test_calls_in_flight_to_one_session_are_capped_503_agent_busy_and_a_caller_leaving_gives_its_slot_back(host):
    """A tenant whose agent never answers cannot tie up more than CALLS_PER_SESSION of the host's threads; past
    them a 503 (nothing ran: a retry is safe) with Retry-After; each caller that leaves frees its slot at once."""
    assert call(host, "GET", "fs/echo")[0] == 200  # the agent runs
    slots = host.registry.hosted["s1"].agent.calls
    waiting = [send_and_keep(host, "fs/hang") for _ in range(agents.CALLS_PER_SESSION)]
    try:
        # Every one in flight before asking more (a call asked meanwhile would take a slot one of them needs).
        assert eventually(lambda: slots.taken == agents.CALLS_PER_SESSION, 10, interval=0.05), slots.taken
        assert call(host, "GET", "fs/echo")[0] == 503
        status, headers, body = call(host, "PUT", "fs/sink", body=b"abc")
        assert status == 503 and json.loads(body)["code"] == "agent_busy"
        assert int(headers["Retry-After"]) >= 1 and headers["Connection"] == "close"
    finally:
        for raw in waiting:
            leave(raw)
    # The waiting callers left: their slots (and threads) are back without waiting for the agent.
    assert eventually(lambda: call(host, "GET", "fs/echo")[0] == 200, 5, interval=0.05)


def test_a_stopped_agent_and_callers_that_leave_leave_no_threads_behind(host):
    """The attack: the tenant stops its own agent (kill -STOP) and fires calls it does not wait for. The host's
    threads stay bounded while they come, and are back to what they were within moments of the callers leaving."""
    assert call(host, "GET", "fs/echo")[0] == 200
    agent = host.box.processes[0]
    os.kill(agent.pid, signal.SIGSTOP)
    try:
        before = threading.active_count()
        most = before
        for index in range(300):
            leave(send_and_keep(host, "fs/echo"), reset=index % 2 == 1)
            most = max(most, threading.active_count())
        assert most <= before + agents.CALLS_PER_SESSION + 16, (before, most)
        assert eventually(lambda: threading.active_count() <= before + 2, 5, interval=0.05), \
            (before, threading.active_count())
    finally:
        os.kill(agent.pid, signal.SIGCONT)


def test_an_agent_that_never_answers_a_call_is_502_after_the_head_deadline(host, monkeypatch):
    monkeypatch.setattr(agent_forward, "HEAD_SECONDS", 1.0)
    started = time.monotonic()
    status, _, body = call(host, "GET", "fs/hang")
    assert status == 502 and json.loads(body)["code"] == "agent_no_answer"
    assert time.monotonic() - started < 5


def test_forwards_over_all_sessions_are_bounded_too(host, tmp_path):
    host.forwards = agents.Slots(2)
    (tmp_path / "s2-box").mkdir()
    other = FakeBox(tmp_path / "s2-box")
    host.registry.hosted["s2"] = Hosted("s2", tmp_path / "s2", box=other, starting=False)
    try:
        waiting = [send_and_keep(host, "fs/hang") for _ in range(2)]
        try:
            assert eventually(lambda: host.forwards.taken == 2, 10, interval=0.05), host.forwards.taken
            status, headers, body = call(host, "GET", "fs/echo", session="s2")
            assert status == 503 and json.loads(body)["code"] == "agent_busy" and "Retry-After" in headers
        finally:
            for raw in waiting:
                leave(raw)
        assert eventually(lambda: call(host, "GET", "fs/echo", session="s2")[0] == 200, 5, interval=0.05)
    finally:
        other.stop()


def test_the_control_server_queues_128_connections_not_5(host):
    server = ControlServer(("127.0.0.1", 0), host.handler_class())
    try:
        port = server.server_address[1]
        listed = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True, check=True)
        assert int(listed.stdout.split()[2]) == 128, listed.stdout  # Send-Q of a listener: its backlog
    finally:
        server.server_close()
