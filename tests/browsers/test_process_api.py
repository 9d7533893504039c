"""The processes API (/browsers/{id}/process/..., app/browsers/process_views.py) against a host's stand-in for the
session's agent (tests/browsers/agent_host.py): what each SDK call becomes on its way to the agent, what the app
refuses before anything runs, and that exec's trickled answer and the output stream are relayed as they come. The
agent itself is tested in tests/browserhost/agent/, the whole way in tests/browsers/live/test_processes.py."""
import base64
import json
import threading

import kernel
import pytest

from tests.browsers import agent_host
from tests.browsers.agent_host import event_stream

agent, sdk = agent_host.agent, agent_host.sdk  # its fixtures, under the names the tests take

RESULT = {"exit_code": 0, "stdout_b64": base64.b64encode(b"1000\n").decode(), "stderr_b64": "", "duration_ms": 4,
          "timed_out": False, "stdout_truncated": False, "stderr_truncated": False}


def test_the_openapi_document_has_the_sdks_seven_process_operations(anonymous):
    paths = anonymous.get("/openapi.json").get_json()["paths"]
    operations = {(method.upper(), path.split("/process/", 1)[1]) for path, ops in paths.items()
                  if "/process/" in path for method in ops if method != "parameters"}
    assert operations == {("POST", "exec"), ("POST", "spawn"), ("GET", "{process_id}/status"),
                          ("POST", "{process_id}/stdin"), ("GET", "{process_id}/stdout/stream"),
                          ("POST", "{process_id}/kill"), ("POST", "{process_id}/resize")}
    every = {path for path in paths if "/fs/" in path or "/process/" in path}
    assert sum(len([m for m in paths[path] if m != "parameters"]) for path in every) == 22


def test_exec_goes_to_the_agent_and_its_answer_comes_back_as_the_sdk_reads_it(agent, sdk):
    host, session_id = agent
    host.answers["process/exec"] = (200, RESULT)
    result = sdk.browsers.process.exec(session_id, command="id", args=["-u"], cwd="/home/kernel", env={"A": "b"},
                                       timeout_sec=30, as_root=False)
    assert (result.exit_code, base64.b64decode(result.stdout_b64), result.duration_ms) == (0, b"1000\n", 4)
    assert result.timed_out is False  # Lantern's field, kept by the SDK's model
    [forwarded] = host.calls
    assert (forwarded.method, forwarded.path) == ("POST", "process/exec")
    assert forwarded.json() == {"command": "id", "args": ["-u"], "cwd": "/home/kernel", "env": {"A": "b"},
                                "timeout_sec": 30, "as_root": False}


def test_execs_trickled_answer_is_relayed_as_it_comes(agent, client):
    """The agent sends a space every 10 s while the process runs: each reaches the client at once, so the SDK's
    read timeout never fires and it never sends again an exec that ran."""
    host, session_id = agent
    finish = threading.Event()

    def trickle(handler, forwarded):
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.end_headers()
        handler.wfile.write(b" ")
        handler.wfile.flush()
        finish.wait(10)
        handler.wfile.write(json.dumps(RESULT).encode())

    host.answers["process/exec"] = trickle
    response = client.post(f"/browsers/{session_id}/process/exec", json={"command": "sleep", "args": ["60"]},
                           buffered=False)
    body = iter(response.response)
    assert response.status_code == 200 and next(body) == b" "  # while the agent still waits
    finish.set()
    rest = b"".join(body)
    response.close()
    assert json.loads(b" " + rest) == RESULT


@pytest.mark.parametrize("url, body, field", [
    ("exec", {"command": ""}, "command"), ("exec", {"args": ["x"]}, "command"),
    ("exec", {"command": "ls", "args": [1]}, "args"), ("exec", {"command": "ls", "cwd": "tmp"}, "cwd"),
    ("exec", {"command": "ls", "cwd": "/" + "a" * 4096}, "cwd"), ("exec", {"command": "ls", "env": {"A": 1}}, "env"),
    ("exec", {"command": "ls", "env": {"A=B": "c"}}, "env"), ("exec", {"command": "ls", "timeout_sec": 0},
                                                              "timeout_sec"),
    ("exec", {"command": "ls", "timeout_sec": 86_401}, "timeout_sec"),
    ("exec", {"command": "ls", "timeout_sec": 1.5}, "timeout_sec"), ("exec", {"command": "ls", "shell": True},
                                                                     "shell"),
    ("spawn", {"command": "sh", "allocate_tty": True, "cols": 0}, "cols"),
    ("spawn", {"command": "sh", "allocate_tty": True, "rows": 4097}, "rows"),
    ("spawn", {"command": "sh", "cols": -1}, "cols"),
    ("p_1/stdin", {"data_b64": "not base64!"}, "data_b64"), ("p_1/stdin", {"data_b64": "YWJj="}, "data_b64"),
    ("p_1/stdin", {}, "data_b64"),
    ("p_1/kill", {"signal": "STOP"}, "signal"), ("p_1/kill", {"signal": "SIGKILL"}, "signal"), ("p_1/kill", {},
                                                                                               "signal"),
    ("p_1/resize", {"cols": 0, "rows": 10}, "cols"), ("p_1/resize", {"cols": 80, "rows": 5000}, "rows"),
    ("p_1/resize", {"cols": 80}, "rows"),
])
def test_bad_input_is_a_400_naming_its_field_and_nothing_runs(agent, client, url, body, field):
    host, session_id = agent
    response = client.post(f"/browsers/{session_id}/process/{url}", json=body)
    assert response.status_code == 400, response.get_json()
    assert field in {detail.get("field", "").split(".")[0] for detail in response.get_json()["details"]}
    assert host.calls == []


@pytest.mark.parametrize("url", ["exec", "spawn"])
def test_as_root_is_refused_with_its_own_code_and_nothing_runs(agent, sdk, url):
    host, session_id = agent
    call = sdk.browsers.process.exec if url == "exec" else sdk.browsers.process.spawn
    with pytest.raises(kernel.BadRequestError) as refused:
        call(session_id, command="id", as_root=True)
    assert refused.value.body["code"] == "as_root_not_supported"
    assert host.calls == []


def test_spawn_status_stdin_kill_and_resize_reach_the_agents_routes(agent, sdk):
    host, session_id = agent
    host.answers.update({
        "process/spawn": (200, {"process_id": "p_1", "pid": 42, "started_at": "2026-01-02T03:04:05Z"}),
        "process/p_1/status": (200, {"state": "running", "exit_code": None, "cpu_pct": 1.5, "mem_bytes": 4096}),
        "process/p_1/stdin": (200, {"written_bytes": 3}), "process/p_1/kill": (200, {"ok": True}),
        "process/p_1/resize": (200, {"ok": True})})
    process = sdk.browsers.process
    spawned = process.spawn(session_id, command="bash", allocate_tty=True, cols=100, rows=30)
    assert (spawned.process_id, spawned.pid, spawned.started_at.year) == ("p_1", 42, 2026)
    status = process.status("p_1", id_or_name=session_id)
    assert (status.state, status.cpu_pct, status.mem_bytes) == ("running", 1.5, 4096)
    assert process.stdin("p_1", id_or_name=session_id, data_b64="YWJj").written_bytes == 3
    assert process.kill("p_1", id_or_name=session_id, signal="HUP").ok is True
    assert process.resize("p_1", id_or_name=session_id, cols=120, rows=40).ok is True
    assert [(c.method, c.path, c.json() if c.body else None) for c in host.calls] == [
        ("POST", "process/spawn", {"command": "bash", "allocate_tty": True, "cols": 100, "rows": 30}),
        ("GET", "process/p_1/status", None), ("POST", "process/p_1/stdin", {"data_b64": "YWJj"}),
        ("POST", "process/p_1/kill", {"signal": "HUP"}), ("POST", "process/p_1/resize", {"cols": 120, "rows": 40})]


@pytest.mark.parametrize("path, status, refusal", [
    ("process/spawn", 400, {"code": "too_many_processes", "message": "a session runs at most 64 processes"}),
    ("process/exec", 400, {"code": "command_not_startable", "message": "nope: not found"}),
    ("process/p_9/status", 404, {"code": "not_found", "message": "no process p_9"}),
    ("process/p_1/stdin", 400, {"code": "process_exited", "message": "process p_1 has exited"}),
    ("process/p_1/resize", 400, {"code": "no_tty", "message": "process p_1 has no terminal"}),
    ("process/spawn", 501, {"code": "processes_not_confined", "message": "this host has no Landlock"}),
])
def test_the_agents_refusals_reach_the_client_in_its_words_and_are_not_sent_again(agent, client, path, status,
                                                                                  refusal):
    host, session_id = agent
    host.answers[path] = (status, refusal)
    url, body = {"process/spawn": ("spawn", {"command": "sh"}), "process/exec": ("exec", {"command": "nope"}),
                 "process/p_9/status": ("p_9/status", None), "process/p_1/stdin": ("p_1/stdin", {"data_b64": ""}),
                 "process/p_1/resize": ("p_1/resize", {"cols": 1, "rows": 1})}[path]
    response = client.open(f"/browsers/{session_id}/process/{url}", method="GET" if body is None else "POST",
                           json=body)
    assert response.status_code == status and response.get_json()["code"] == refusal["code"]
    assert response.get_json()["message"] == refusal["message"]
    assert len(host.calls) == 1


def test_an_exec_that_failed_on_its_way_is_a_502_the_sdks_do_not_send_again(agent, client):
    host, session_id = agent
    host.answers["process/exec"] = lambda handler, forwarded: setattr(handler, "close_connection", True)
    response = client.post(f"/browsers/{session_id}/process/exec", json={"command": "touch", "args": ["/tmp/x"]})
    assert response.status_code == 502 and response.headers["x-should-retry"] == "false"
    assert len(host.calls) == 1


def test_the_output_stream_is_relayed_with_last_event_id_passed_on(agent, sdk, client):
    host, session_id = agent
    frames = [(2, {"stream": "stdout", "data_b64": "", "dropped_bytes": 70}),  # what fell out of the ring
              (3, {"stream": "stdout", "data_b64": base64.b64encode(b"hi\n").decode()}),
              (4, {"event": "exit", "exit_code": 0})]
    host.answers["process/p_1/stdout/stream"] = event_stream(frames)
    events = list(sdk.browsers.process.stdout_stream("p_1", id_or_name=session_id))  # the SDK validates each
    assert [(e.stream, e.data_b64, e.event, e.exit_code) for e in events] == [
        ("stdout", "", None, None), ("stdout", "aGkK", None, None), (None, None, "exit", 0)]
    assert events[0].dropped_bytes == 70
    held = threading.Event()
    frames_sent = frames[:2]
    host.answers["process/p_1/stdout/stream"] = event_stream(frames_sent, keep_open=held)
    response = client.get(f"/browsers/{session_id}/process/p_1/stdout/stream", headers={"Last-Event-ID": "2"},
                          buffered=False)
    received = b""
    for chunk in response.response:  # relayed while the process still runs
        received += chunk
        if b"id: 3\n" in received and received.endswith(b"\n\n"):
            break
    held.set()
    response.close()
    assert host.calls[-1].headers["last-event-id"] == "2" and "last-event-id" not in host.calls[0].headers
    frames = [frame for frame in received.split(b"\n\n") if frame.startswith(b"id:")]
    assert frames == [b"id: 2\ndata: " + json.dumps(frames_sent[0][1]).encode(), b"id: 3\ndata: " +
                      json.dumps(frames_sent[1][1]).encode()]


def test_a_process_id_that_could_change_the_forwarded_path_is_404(agent, client):
    host, session_id = agent
    for process_id in ("..", "p.1", "p%3Fx"):
        assert client.get(f"/browsers/{session_id}/process/{process_id}/status").status_code == 404
    assert host.calls == []
