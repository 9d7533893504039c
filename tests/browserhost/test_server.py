"""The browser host's bookkeeping, without Chromium: a stop that arrives while a browser starts."""
import json
import logging
import socket
import threading
import time
import tracemalloc
from types import SimpleNamespace

import pytest

from browserhost import launch, launch_options, network, sandbox
from lantern_wire import control
from lantern_wire.control import Categories
from tests.browserhost.helpers import FakeApp, host_server
from tests.browsers.live.conftest import host_words


class FakeBrowser:
    pid, browser_path, alive = 1, "/devtools/browser/x", True

    def __init__(self):
        self.stopped = False

    def stop(self):
        self.stopped = True


def test_a_stop_while_the_browser_starts_ends_it_once_started(tmp_path, monkeypatch):
    server = host_server(tmp_path)
    server.starts.binary = "/usr/lib/chromium/chromium"  # never run: the launch is replaced
    launching, proceed, browser = threading.Event(), threading.Event(), FakeBrowser()

    def slow_launch(hosted, body):
        launching.set()
        assert proceed.wait(10)
        hosted.browser = browser

    monkeypatch.setattr(server.starts, "_launch", slow_launch)
    answers = []
    starter = threading.Thread(target=lambda: answers.append(server.starts.start_browser({"session_id": "s1",
                                                                                    "headless": True})))
    starter.start()
    assert launching.wait(10)
    assert server.registry.stop_browser("s1", save=False, reason=None) is None  # the worker gave up waiting
    proceed.set()
    starter.join(10)
    assert answers[0][0] == 503 and browser.stopped and "s1" not in server.registry.hosted


def test_an_answer_to_a_caller_that_left_is_dropped_without_a_traceback():
    """#26.7: a worker that gave up waiting (its socket closed) must not make the host print a traceback."""
    from browserhost.control import ControlHandler

    class Gone:
        def write(self, data):
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            pass

    handler = ControlHandler.__new__(ControlHandler)
    handler.wfile, handler.request_version, handler.requestline = Gone(), "HTTP/1.1", "POST /sessions HTTP/1.1"
    handler.client_address, handler.command, handler.close_connection = ("127.0.0.1", 1), "POST", False
    handler.answer(201, {"pid": 1})  # raises nothing
    assert handler.close_connection


def test_a_session_is_reported_on_while_it_is_on_the_host_and_forgotten_when_it_leaves(tmp_path, monkeypatch):
    """A note after the session left (a recording saved, a client gone) stays in the host's log: the app keeps no
    line of an ended session, and reporting it would number the forgotten session's batches again."""
    server = host_server(tmp_path)
    server.starts.binary = "/usr/lib/chromium/chromium"  # never run: the launch is replaced
    monkeypatch.setattr(server.starts, "_launch", lambda hosted, body: setattr(hosted, "browser", FakeBrowser()))
    monkeypatch.setattr(server.registry, "watch", lambda hosted: None)  # (it waits for the browser's process to exit)
    reported, forgotten = [], []
    monkeypatch.setattr(server.reports, "logs", lambda session_id, *args: reported.append(session_id))
    monkeypatch.setattr(server.reports, "forget", forgotten.append)
    assert server.starts.start_browser({"session_id": "s1", "headless": True})[0] == 201
    hosted = server.registry.hosted["s1"]
    server.registry.note(hosted, "while it runs")
    server.registry.stop_browser("s1", save=False, reason=None)
    server.registry.note(hosted, "after its end")
    assert reported == ["s1"] and forgotten == ["s1"]


def test_a_heartbeat_answer_read_before_a_categories_put_does_not_undo_it(tmp_path, monkeypatch):
    """The app PUTs new categories once committed; a beat it answered before that can arrive after the PUT: the
    host keeps the newest revision, whichever way it came."""
    app = FakeApp()
    server = host_server(tmp_path, app)
    server.starts.binary = "/usr/lib/chromium/chromium"  # never run: the launch is replaced
    monkeypatch.setattr(server.starts, "_launch", lambda hosted, body: setattr(hosted, "browser", FakeBrowser()))
    monkeypatch.setattr(server.registry, "watch", lambda hosted: None)
    assert server.starts.start_browser({"session_id": "s1", "headless": True, "categories": {"revision": 1,
                                                                                       "names": ["console"]}})[0] == 201
    hosted = server.registry.hosted["s1"]
    stale = {"stop": [], "categories": {"s1": {"revision": 1, "names": ["console"]}}}

    def answered_before_the_put(path, body):
        server.registry.set_categories(hosted, Categories(revision=2))  # the PUT arrives while the beat is out
        return stale

    monkeypatch.setattr(app, "post", answered_before_the_put)
    server.heartbeats.beat()
    assert (hosted.categories, hosted.categories_revision) == (frozenset(), 2)
    newer = {"stop": [], "categories": {"s1": {"revision": 3, "names": ["console", "page"]}}}
    monkeypatch.setattr(app, "post", lambda path, body: newer)  # a change whose PUT did not reach the host
    server.heartbeats.beat()
    assert (hosted.categories, hosted.categories_revision) == (frozenset({"console", "page"}), 3)


def test_the_host_keeps_the_newest_revision_of_a_sessions_categories(tmp_path, monkeypatch):
    server = host_server(tmp_path)
    server.starts.binary = "/usr/lib/chromium/chromium"  # never run: the launch is replaced
    monkeypatch.setattr(server.starts, "_launch", lambda hosted, body: setattr(hosted, "browser", FakeBrowser()))
    monkeypatch.setattr(server.registry, "watch", lambda hosted: None)
    assert server.starts.start_browser({"session_id": "s1", "categories": {"revision": 3, "names": ["page"]}})[0] == 201
    hosted = server.registry.hosted["s1"]
    server.registry.set_categories(hosted, Categories(revision=2, names={"console"}))  # older than the start's
    assert (hosted.categories, hosted.categories_revision) == ({"page"}, 3)
    server.registry.set_categories(hosted, Categories(revision=4, names={"console", "network"}))
    assert (hosted.categories, hosted.categories_revision) == ({"console", "network"}, 4)


class FailingSandbox:
    def __init__(self, workdir, *args, **kwargs):
        self.workdir = workdir

    def create(self):
        raise network.SandboxError(f"setting up the sandbox failed: [Errno 13] Permission denied: "
                                   f"'/var/lib/lantern/sandboxes/{self.workdir.name}/run'")

    def destroy(self):
        pass


@pytest.mark.parametrize("failure, told", [
    ("sandbox", "The browser's sandbox could not be set up."),
    ("Chromium exited with 127 before its DevTools endpoint answered; chromium.log ends:\n{workdir}/chromium.log: "
     "/usr/lib/chromium/chromium: error while loading shared libraries", "Chromium exited with code 127 before it "
                                                                        "answered."),
    ("cannot tell the version of /usr/lib/chromium/chromium: /usr/lib/chromium/chromium: not found",
     "The browser host could not start the browser (its log says why)."),
    ("Xvfb :99 did not start in time: (EE) cannot open /tmp/.X11-unix/X99", "The browser host could not start the "
                                                                             "browser (its log says why)."),
])
def test_a_failed_start_tells_the_tenant_what_failed_without_the_hosts_paths_which_its_log_keeps(
        tmp_path, monkeypatch, caplog, failure, told):
    """#34 item 8: the app passes a failed start's message on to the tenant."""
    server = host_server(tmp_path, BROWSER_SANDBOX="on" if failure == "sandbox" else "off")
    server.starts.binary = "/usr/lib/chromium/chromium"  # never run: the sandbox or the launch fails first
    monkeypatch.setattr(sandbox, "Sandbox", FailingSandbox)
    detail = failure.format(workdir=tmp_path / "sessions" / "s1")

    def failing_start(*args, **kwargs):
        raise launch_options.LaunchError(detail)

    monkeypatch.setattr(launch.Browser, "start", failing_start)
    with caplog.at_level(logging.ERROR, logger="browserhost.starts"):
        status, answer = server.starts.start_browser({"session_id": "s1", "headless": True})
    assert (status, answer) == (500, {"code": "browser_start_failed", "message": told})
    assert not host_words(SimpleNamespace(workdir=tmp_path)).search(answer["message"])
    assert "/var/lib/lantern/sandboxes/s1/run" in caplog.text if failure == "sandbox" else detail in caplog.text
    assert "s1" not in server.registry.hosted and not (tmp_path / "sessions" / "s1").exists()


@pytest.fixture
def control_api(tmp_path, monkeypatch):
    """The host's control API on a port of 127.0.0.1 (browsers never launched): call(method, path, body, key)."""
    import http.client
    from http.server import ThreadingHTTPServer

    server = host_server(tmp_path)
    server.starts.binary = "/usr/lib/chromium/chromium"  # never run: the launch is replaced
    monkeypatch.setattr(server.starts, "_launch", lambda hosted, body: setattr(hosted, "browser", FakeBrowser()))
    monkeypatch.setattr(server.registry, "watch", lambda hosted: None)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), server.handler_class())
    threading.Thread(target=httpd.serve_forever, daemon=True).start()

    def call(method, path, body=None, key=server.control_key):
        connection = http.client.HTTPConnection(*httpd.server_address, timeout=10)
        try:
            connection.request(method, path, body=None if body is None else json.dumps(body),
                               headers={"Authorization": f"Bearer {key}"})
            response = connection.getresponse()
            return response.status, json.loads(response.read())
        finally:
            connection.close()

    call.server = server
    call.address = httpd.server_address
    yield call
    httpd.shutdown()
    httpd.server_close()


def test_the_route_table_refuses_a_malformed_body_naming_the_field(control_api):
    status, answer = control_api("POST", "/sessions", {"session_id": "s1", "viewport": {"width": "x", "height": 1}})
    assert status == 400 and answer["code"] == "bad_request" and answer["message"].startswith("viewport.width: ")
    assert control_api("POST", "/sessions", {"session_id": "s1", "gpu": True})[1]["message"].startswith("gpu: ")
    assert control_api("POST", "/sessions", {"session_id": "s1"})[0] == 201
    status, answer = control_api("POST", "/sessions/s1/computer", {"actions": "click"})
    assert status == 400 and answer["message"].startswith("actions: ")
    status, answer = control_api("PUT", "/sessions/s1/categories", {"revision": 5, "names": ["page"]})
    assert (status, answer) == (200, {"categories": ["page"]})
    assert control_api.server.registry.hosted["s1"].categories_revision == 5


def test_the_route_table_answers_404_for_what_it_does_not_route_and_401_without_the_key(control_api):
    assert control_api("GET", "/health", key="wrong") == (401, {"code": "unauthorized",
                                                                "message": "Wrong or missing key for this host."})
    assert control_api("GET", "/health")[1]["sessions"] == []
    assert control_api("GET", "/nowhere") == (404, {"code": "not_found", "message": "/nowhere"})
    assert control_api("GET", "/sessions") == (404, {"code": "not_found", "message": "/sessions"})  # no such method
    for method, path in (("DELETE", "/sessions/s9"), ("PUT", "/sessions/s9/viewport"),
                         ("GET", "/sessions/s9/json/version")):
        assert control_api(method, path, {"width": 1, "height": 1} if method == "PUT" else None)[0] == 404
    assert control_api("POST", "/sessions", {"session_id": "s1"})[0] == 201
    assert control_api("DELETE", "/sessions/s1?save_state=0") == (200, {"profile_state": None})


def test_a_browser_answering_its_json_past_the_bound_or_not_at_all_is_a_502_not_a_dropped_connection(control_api):
    assert control_api("POST", "/sessions", {"session_id": "s1"})[0] == 201
    browser = control_api.server.registry.hosted["s1"].browser
    for error in (ValueError("GET /json/list: the answer passed 1048576 bytes"), ConnectionRefusedError()):
        browser.devtools = SimpleNamespace(get_json=lambda path, error=error: (_ for _ in ()).throw(error))
        assert control_api("GET", "/sessions/s1/json/list") == (
            502, {"code": "browser_unreachable", "message": "The browser does not answer."})


def raw_request(address, head, body=b"", then=b""):
    """`head` (a request's line and headers, without the blank line) and `body` sent over one connection, then
    `then` (a next request); the answers' bytes until the host closes the connection or 5 s pass."""
    with socket.create_connection(address, timeout=5) as connection:
        try:
            for part in (head.encode() + b"\r\n\r\n", body, then):  # not joined: `body` is not copied
                connection.sendall(part)
        except (BrokenPipeError, ConnectionResetError):  # the host answered and closed without reading it all
            pass
        received = b""
        try:
            while chunk := connection.recv(65536):
                received += chunk
        except (TimeoutError, ConnectionResetError):
            pass
        return received


def test_a_json_body_past_the_limit_is_refused_413_unread_and_the_connection_closed(control_api):
    key = control_api.server.control_key
    assert control_api("POST", "/sessions", {"session_id": "s1"})[0] == 201
    started = time.monotonic()
    # Only the headers are sent: had the host waited for the 64 MiB it would not answer within the 5 s.
    received = raw_request(control_api.address, f"POST /sessions/s1/profile HTTP/1.1\r\nHost: h\r\n"
                           f"Authorization: Bearer {key}\r\nContent-Length: {control.MAX_JSON_BYTES + 1}")
    assert time.monotonic() - started < 4
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413 ") and b"Connection: close" in head
    assert json.loads(body)["code"] == "payload_too_large"
    # Within it a body is read (and here refused for its content, not its size).
    status, answer = control_api("POST", "/sessions/s1/profile", {"cookies": "x" * 100_000})
    assert (status, answer["code"]) == (400, "bad_request") and answer["message"].startswith("cookies: ")
    # A chunked body, whose length is not known ahead, is not read either.
    started = time.monotonic()
    received = raw_request(control_api.address, f"POST /sessions/s1/profile HTTP/1.1\r\nHost: h\r\n"
                           f"Authorization: Bearer {key}\r\nTransfer-Encoding: chunked")
    assert received.startswith(b"HTTP/1.1 411 ") and b"Connection: close" in received
    assert time.monotonic() - started < 4  # and the connection ended with the answer


def test_a_body_no_route_reads_is_dropped_a_chunk_at_a_time_and_the_connection_kept(control_api):
    key = control_api.server.control_key
    health = f"GET /health HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer {key}"
    body = b"x" * (8 * 1024 * 1024)
    tracemalloc.start()
    try:
        received = raw_request(control_api.address, f"{health}\r\nContent-Length: {len(body)}", body,
                               then=f"{health}\r\nConnection: close\r\n\r\n".encode())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert received.count(b"HTTP/1.1 200 ") == 2  # the next request on the connection was read as one
    assert peak < 2 * 1024 * 1024  # the 8 MiB were never held
    # Past the limit it is not read at all: answered, and the connection ends.
    received = raw_request(control_api.address, f"DELETE /sessions/s9 HTTP/1.1\r\nHost: h\r\n"
                           f"Authorization: Bearer {key}\r\nContent-Length: {control.MAX_JSON_BYTES + 1}")
    assert received.startswith(b"HTTP/1.1 404 ") and b"Connection: close" in received
    # Without the key nothing is read either, and the connection ends with the 401.
    started = time.monotonic()
    received = raw_request(control_api.address, "POST /sessions HTTP/1.1\r\nHost: h\r\nContent-Length: 100")
    assert received.startswith(b"HTTP/1.1 401 ") and b"Connection: close" in received
    assert time.monotonic() - started < 4


class RecordingBox:
    """A session's box that records its destroy; its create fails as `failure` says (None: it does not)."""

    sandboxed, memory_mb = True, 64

    def __init__(self, failure=None, destroy_failure=None):
        self.failure, self.destroy_failure, self.destroyed = failure, destroy_failure, 0

    def __call__(self, workdir, *args, **kwargs):  # as sandbox.Sandbox is called
        self.workdir = workdir
        return self

    def create(self):
        if self.failure is not None:
            raise self.failure
        return self

    def destroy(self):
        self.destroyed += 1
        if self.destroy_failure is not None:
            raise self.destroy_failure


def test_a_start_cut_off_while_its_box_is_made_still_has_the_box_destroyed(tmp_path, monkeypatch):
    """#36 review: the box was the session's only once create() returned: an error create() did not clean up after
    left the namespace, cgroup and mounts, with no box for the teardown to destroy."""
    server = host_server(tmp_path, BROWSER_SANDBOX="on")
    server.starts.binary = "/usr/lib/chromium/chromium"  # never run: the box fails first
    box = RecordingBox(failure=RuntimeError("cut off"))
    monkeypatch.setattr(sandbox, "Sandbox", box)
    status, answer = server.starts.start_browser({"session_id": "s1", "headless": True})
    assert status == 500 and box.destroyed == 1
    assert "s1" not in server.registry.hosted and not (tmp_path / "sessions" / "s1").exists()


def test_a_box_that_could_not_be_removed_keeps_the_folder_the_next_start_sweeps_it_by(tmp_path, monkeypatch):
    """#36 review: the folder was removed all the same, so launch.kill_leftovers never found the sandbox again. A
    start of the same session on this host removes what is left first."""
    server = host_server(tmp_path, BROWSER_SANDBOX="on")
    server.starts.binary = "/usr/lib/chromium/chromium"
    box = RecordingBox(failure=network.SandboxError("no"), destroy_failure=OSError("ip netns delete timed out"))
    monkeypatch.setattr(sandbox, "Sandbox", box)
    assert server.starts.start_browser({"session_id": "s1", "headless": True})[0] == 500
    assert "s1" not in server.registry.hosted and (tmp_path / "sessions" / "s1").is_dir()
    assert [workdir.name for workdir in (tmp_path / "sessions").iterdir()] == ["s1"]  # what kill_leftovers walks

    box.destroy_failure, box.destroyed = None, 0
    assert server.starts.start_browser({"session_id": "s1", "headless": True})[0] == 500
    assert box.destroyed == 2  # what was left, then the failed start's own
    assert not (tmp_path / "sessions" / "s1").exists()


@pytest.mark.parametrize("restart", [False, True], ids=["starting", "restarting"])
def test_an_end_reason_given_while_the_browser_starts_is_told_once_its_start_ends_it(tmp_path, monkeypatch, restart):
    """#36 review (from before): an OOM kill's or the host's stop's reason given while the session started (again)
    was lost: its start tore it down and the app was told nothing."""
    server = host_server(tmp_path)
    server.starts.binary = "/usr/lib/chromium/chromium"
    ended = []
    monkeypatch.setattr(server.reports, "ended", lambda session_id, reason: ended.append((session_id, reason)))
    hosted, _ = server.registry.admit("s1", start_deadline=time.monotonic() + 30)
    hosted.starting, hosted.restarting = not restart, restart
    hosted.start_deadline = time.monotonic() - 11  # a restart's stop waits for it no longer
    assert server.registry.stop_browser("s1", save=False, reason="oom") is None
    assert ended == [] and "s1" in server.registry.hosted
    server.registry.end(hosted)  # what the start or restart does once it sees the stop
    assert ended == [("s1", "oom")] and "s1" not in server.registry.hosted


def test_computer_actions_during_a_restart_are_answered_409_browser_restarting(tmp_path):
    """#36 review (from before): computer() checked only for no browser or a stop, so actions ran on a browser being
    started again."""
    server = host_server(tmp_path)
    hosted, _ = server.registry.admit("s1", start_deadline=time.monotonic() + 30)
    hosted.starting, hosted.restarting, hosted.browser = False, True, FakeBrowser()
    request = control.ComputerRequest.model_validate({"actions": [{"type": "get_mouse_position"}]})
    status, answer = server.running.computer(hosted, request)
    assert status == 409 and answer["code"] == "browser_restarting"
    hosted.stopping = True
    assert server.running.computer(hosted, request)[0] == 404


def test_a_stopping_host_waits_for_a_start_under_way_to_tear_down(tmp_path, monkeypatch):
    """#36 review: shutdown() only marked starting sessions and stopped serving: the process exited before their
    starts removed their sandboxes."""
    server = host_server(tmp_path)
    server.starts.binary = "/usr/lib/chromium/chromium"
    launching, torn_down, browser = threading.Event(), [], FakeBrowser()

    def slow_launch(hosted, body):
        launching.set()
        time.sleep(1.0)
        hosted.browser = browser

    monkeypatch.setattr(server.starts, "_launch", slow_launch)
    monkeypatch.setattr(server.registry, "teardown", lambda hosted, save, real=server.registry.teardown: (
        real(hosted, save), torn_down.append(hosted.session_id)))
    ended = []
    monkeypatch.setattr(server.reports, "ended", lambda session_id, reason: ended.append((session_id, reason)))
    server.httpd = SimpleNamespace(shutdown=lambda: None)
    starter = threading.Thread(target=server.starts.start_browser, args=({"session_id": "s1", "headless": True},))
    starter.start()
    assert launching.wait(10)
    server.shutdown()
    assert torn_down == ["s1"] and browser.stopped and server.stopped.is_set()
    assert ended == [("s1", "host_stopped")]
    starter.join(10)
