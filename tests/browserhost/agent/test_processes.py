"""The agent's process routes on the real agent (unsandboxed, run by tests/browserhost/agent/conftest.py): real
processes, pipes, a real PTY, timeouts that kill what a process started, the output ring's readers."""
import base64
import io
import json
import os
import threading
import time
from pathlib import Path

import pytest
from kernel.types.browsers.process_stdout_stream_response import ProcessStdoutStreamResponse

from browserhost.agent import execs, lifecycle, processes, running
from browserhost.agent.http import AgentError, Headers, Request
from tests.browserhost.agent.sse import frames, read_all


def run(agent, **body):
    answer = agent.call("POST", "/process/exec", json_body=body)
    assert answer.status == 200, answer.body
    return answer.json()


def out(result, stream="stdout") -> str:
    return base64.b64decode(result[f"{stream}_b64"]).decode()


def spawn(agent, **body) -> dict:
    answer = agent.call("POST", "/process/spawn", json_body=body)
    assert answer.status == 200, answer.body
    return answer.json()


def refused(agent, path, body, status=400):
    answer = agent.call("POST", path, json_body=body)
    assert answer.status == status, answer.body
    return answer.json()["code"]


def stream(agent, process_id, last_event_id=None):
    headers = {"Last-Event-ID": str(last_event_id)} if last_event_id is not None else {}
    return agent.open("GET", f"/process/{process_id}/stdout/stream", headers=headers)


def output_of(frame_list) -> bytes:
    return b"".join(base64.b64decode(frame.data["data_b64"]) for frame in frame_list if "data_b64" in frame.data)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != b"Z"


def wait_for(condition, seconds=10.0):
    end = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < end, "timed out waiting"
        time.sleep(0.05)


def test_exec_answers_output_exit_code_and_a_clean_environment(agent):
    result = run(agent, command="sh", args=["-c", "echo out; echo err >&2; sleep 0.3; exit 3"])
    assert (result["exit_code"], out(result), out(result, "stderr")) == (3, "out\n", "err\n")
    assert result["timed_out"] is False and result["stdout_truncated"] is False and "signal" not in result
    assert 300 <= result["duration_ms"] < 5000

    environment = out(run(agent, command="env", env={"GREETING": "hello"})).splitlines()
    assert sorted(environment) == sorted(["PATH=/usr/bin:/bin", f"HOME={os.environ['HOME']}", "TMPDIR=/tmp",
                                          "LANG=C.UTF-8", "GREETING=hello"])


def test_exec_runs_as_the_agents_user_in_its_own_session_first_for_the_oom_killer(agent, tmp_path):
    result = run(agent, command="sh", args=["-c", "id -u; cat /proc/self/oom_score_adj; ps -o sid= -p $$; echo $$;"
                                            " pwd"], cwd=str(tmp_path))
    uid, oom, session, pid, cwd = out(result).split()
    assert (int(uid), oom, session, cwd) == (os.getuid(), "1000", pid, str(tmp_path))
    assert out(run(agent, command="pwd")).strip() == os.environ["HOME"]


def test_exec_finds_commands_by_path_and_relative_to_cwd(agent, tmp_path):
    tool = tmp_path / "tool.sh"
    tool.write_text("#!/bin/sh\necho tool $1\n")
    tool.chmod(0o755)
    assert out(run(agent, command="./tool.sh", args=["one"], cwd=str(tmp_path))) == "tool one\n"
    assert out(run(agent, command="tool.sh", args=["two"], env={"PATH": str(tmp_path)})) == "tool two\n"
    assert out(run(agent, command="/bin/echo", args=["three"])) == "three\n"


@pytest.mark.parametrize(("body", "code"), [
    ({"command": "true", "as_root": True}, "as_root_not_supported"),
    ({"command": "true", "as_user": "nobody"}, "as_user_not_supported"),
    ({"command": "true", "as_user": 123456}, "as_user_not_supported"),
    ({"command": "true", "as_user": ["session"]}, "as_user_not_supported"),
    ({"command": "no-such-command-here"}, "command_not_startable"),
    ({"command": "/etc/passwd"}, "command_not_startable"),
    ({"command": ""}, "invalid_command"),
    ({"command": "tr\0ue"}, "invalid_command"),
    ({"command": 5}, "invalid_command"),
    ({"command": "true", "cwd": "relative"}, "invalid_path"),
    ({"command": "true", "cwd": "/no/such/folder"}, "invalid_cwd"),
    ({"command": "true", "cwd": "/etc/passwd"}, "invalid_cwd"),
    ({"command": "true", "cwd": "/run/lantern/x"}, "path_not_allowed"),
    ({"command": "true", "timeout_sec": 0}, "invalid_timeout_sec"),
    ({"command": "true", "timeout_sec": 86401}, "invalid_timeout_sec"),
    ({"command": "true", "timeout_sec": "5"}, "invalid_timeout_sec"),
    ({"command": "true", "timeout_sec": True}, "invalid_timeout_sec"),
    ({"command": "true", "args": "-x"}, "invalid_args"),
    ({"command": "true", "args": ["a\0b"]}, "invalid_args"),
    ({"command": "true", "env": {"A=B": "c"}}, "invalid_env"),
    ({"command": "true", "env": {"A": 1}}, "invalid_env"),
    ({"command": "true", "env": ["A"]}, "invalid_env"),
])
def test_bad_launches_are_refused_before_anything_runs(agent, body, code):
    assert refused(agent, "/process/exec", body) == code
    assert refused(agent, "/process/spawn", body) == code


@pytest.mark.parametrize(("body", "code", "field"), [
    ({"command": "echo", "args": ["\ud800"]}, "invalid_args", "args"),
    ({"command": "true", "env": {"A": "\udfff"}}, "invalid_env", "env"),
    ({"command": "true", "env": {"\ud800": "x"}}, "invalid_env", "env"),
    ({"command": "tr\ud800ue"}, "invalid_command", "command"),
    ({"command": "true", "cwd": "/tmp/\ud800"}, "invalid_path", "cwd"),
])
def test_lone_surrogates_are_refused_naming_the_field(agent, body, code, field):
    # json.dumps writes them as "\ud800": JSON allows it, but such a string stands for no bytes.
    for route in ("/process/exec", "/process/spawn"):
        answer = agent.call("POST", route, json_body=body)
        assert (answer.status, answer.json()["code"]) == (400, code), answer.body
        assert answer.json()["message"].startswith(field)


def test_bytes_that_are_not_utf8_pass_as_a_path_does(agent):
    # A name's undecodable byte comes as U+DC80..U+DCFF (surrogateescape), as in the files calls' paths.
    assert base64.b64decode(run(agent, command="printf", args=["%s", "\udcff"])["stdout_b64"]) == b"\xff"


def test_the_session_user_may_be_named(agent):
    for name in ("session", "kernel", str(os.getuid()), f"{os.getuid()}:{os.getgid()}", os.getuid()):
        assert run(agent, command="true", as_user=name, as_root=False)["exit_code"] == 0


def test_a_signal_ending_the_process_is_told(agent):
    result = run(agent, command="sh", args=["-c", "kill -TERM $$"])
    assert (result["exit_code"], result["signal"], result["timed_out"]) == (143, "TERM", False)


def test_a_real_time_signal_ending_the_process_is_named(agent):
    # Python's signal.Signals names only SIGRTMIN (34) and SIGRTMAX (64): 40 used to cut exec's answer.
    result = run(agent, command="sh", args=["-c", "kill -s 40 $$"])
    assert (result["exit_code"], result["signal"]) == (168, "RTMIN+6")
    spawned = spawn(agent, command="sh", args=["-c", "kill -s 40 $$"])
    assert read_all(stream(agent, spawned["process_id"]))[-1].data == \
        {"event": "exit", "exit_code": 168, "signal": "RTMIN+6"}
    assert running.signal_name(64) == "RTMAX" and running.signal_name(33) == "33"


def test_a_timeout_kills_the_process_and_what_it_started_even_in_another_session(agent):
    started = time.monotonic()
    result = run(agent, command="sh", args=["-c", "setsid sleep 300 & echo $!; sh -c 'sleep 301 & wait' & wait"],
                 timeout_sec=1)
    assert time.monotonic() - started < 5
    assert result["timed_out"] is True and result["exit_code"] is None and result["signal"] == "KILL"
    assert 1000 <= result["duration_ms"] < 5000
    escaped = int(out(result))
    assert not alive(escaped)
    assert not [pid for pid in os.listdir("/proc") if pid.isdigit() and alive(int(pid))
                and Path(f"/proc/{pid}/cmdline").read_bytes() in (b"sleep\x00300\x00", b"sleep\x00301\x00")]


def test_exec_output_is_capped_per_stream(agent):
    result = run(agent, command="sh", args=["-c", "head -c 9000000 /dev/zero; echo tail >&2"])
    stdout = base64.b64decode(result["stdout_b64"])
    assert len(stdout) == execs.EXEC_OUTPUT_BYTES and set(stdout) == {0}
    assert result["stdout_truncated"] is True and result["stderr_truncated"] is False
    assert out(result, "stderr") == "tail\n" and result["exit_code"] == 0


def test_a_long_exec_trickles_spaces_before_its_json(agent):
    answer = agent.open("POST", "/process/exec", json_body={"command": "sleep", "args": ["13"]}, timeout=30)
    started = time.monotonic()
    assert answer.status == 200
    first = answer.read(1)
    waited = time.monotonic() - started
    assert first == b" " and 5 < waited < 12  # the first space at 10 s, well before the end at 13 s
    rest = answer.read()
    assert rest.lstrip().startswith(b"{") and b'"exit_code": 0' in rest


def test_two_readers_and_a_late_one_see_every_chunk(agent):
    process = spawn(agent, command="sh", args=["-c", "for i in 1 2 3 4; do echo line$i; echo err$i >&2; "
                                               "sleep 0.2; done"])
    first, second = stream(agent, process["process_id"]), stream(agent, process["process_id"])
    seen = [read_all(first), read_all(second)]
    seen.append(read_all(stream(agent, process["process_id"])))
    for frame_list in seen:
        assert frame_list == seen[0]
        assert frame_list[-1].data == {"event": "exit", "exit_code": 0}
        stdout = b"".join(base64.b64decode(frame.data["data_b64"]) for frame in frame_list
                          if frame.data.get("stream") == "stdout")
        stderr = b"".join(base64.b64decode(frame.data["data_b64"]) for frame in frame_list
                          if frame.data.get("stream") == "stderr")
        assert (stdout, stderr) == (b"line1\nline2\nline3\nline4\n", b"err1\nerr2\nerr3\nerr4\n")
    ids = [frame.id for frame in seen[0]]
    assert ids == sorted(set(ids))


def test_a_reader_resumes_after_its_last_event_id(agent):
    process = spawn(agent, command="sh", args=["-c", "echo one; sleep 0.2; echo two; sleep 0.2; echo three"])
    everything = read_all(stream(agent, process["process_id"]))
    resumed = read_all(stream(agent, process["process_id"], everything[0].id))
    assert resumed == everything[1:]
    assert read_all(stream(agent, process["process_id"], everything[-1].id)) == []
    for bad in ("x", "-1", str(everything[-1].id + 1)):
        answer = agent.call("GET", f"/process/{process['process_id']}/stdout/stream",
                            headers={"Last-Event-ID": bad})
        assert (answer.status, answer.json()["code"]) == (400, "invalid_last_event_id")


def test_output_past_the_ring_is_dropped_oldest_first_and_said_so(agent):
    total = 3 * processes.RING_BYTES
    process = spawn(agent, command="sh", args=["-c", f"head -c {total} /dev/zero"])
    process_id = process["process_id"]
    wait_for(lambda: agent.call("GET", f"/process/{process_id}/status").json()["state"] == "exited")
    late = read_all(stream(agent, process_id))
    notice, chunks, ending = late[0], late[1:-1], late[-1]
    kept = len(output_of(chunks))
    assert notice.data == {"stream": "stdout", "data_b64": "", "dropped_bytes": total - kept}
    assert notice.id == total - kept
    # Every frame, the notice too, is one the SDK's own model takes under strict validation.
    for frame in late:
        ProcessStdoutStreamResponse.model_validate(frame.data, strict=True)
    assert 0 < kept <= processes.RING_BYTES and ending.data == {"event": "exit", "exit_code": 0}
    # Resuming from a point the ring no longer holds says how much was lost since that point.
    resumed = read_all(stream(agent, process_id, 1000))
    assert resumed[0].data["dropped_bytes"] == total - kept - 1000 and resumed[1:] == late[1:]
    # Resuming from the notice's id misses nothing more.
    assert read_all(stream(agent, process_id, notice.id)) == late[1:]


def test_a_process_nobody_reads_never_blocks(agent):
    process = spawn(agent, command="sh", args=["-c", "head -c 20000000 /dev/zero; echo done >&2"])
    wait_for(lambda: agent.call("GET", f"/process/{process['process_id']}/status").json()["state"] == "exited")
    assert agent.call("GET", f"/process/{process['process_id']}/status").json()["exit_code"] == 0


def test_stdin_reaches_cat_and_kill_ends_it(agent):
    process = spawn(agent, command="cat")
    process_id = process["process_id"]
    reader = stream(agent, process_id)
    answer = agent.call("POST", f"/process/{process_id}/stdin",
                        json_body={"data_b64": base64.b64encode(b"hello\n").decode()})
    assert answer.json() == {"written_bytes": 6}
    received = frames(reader)
    first = next(received)
    assert base64.b64decode(first.data["data_b64"]) == b"hello\n" and first.data["stream"] == "stdout"
    assert agent.call("POST", f"/process/{process_id}/kill", json_body={"signal": "TERM"}).json() == {"ok": True}
    assert next(received).data == {"event": "exit", "exit_code": 143, "signal": "TERM"}
    reader.close()
    assert not alive(process["pid"])
    status = agent.call("GET", f"/process/{process_id}/status").json()
    assert status == {"state": "exited", "exit_code": 143, "cpu_pct": 0.0, "mem_bytes": 0}
    assert refused(agent, f"/process/{process_id}/stdin", {"data_b64": "eA=="}) == "process_exited"
    assert refused(agent, f"/process/{process_id}/kill", {"signal": "KILL"}) == "process_exited"


def test_stdin_and_kill_refuse_bad_input(agent):
    process_id = spawn(agent, command="cat")["process_id"]
    try:
        assert refused(agent, f"/process/{process_id}/stdin", {"data_b64": "not base64!"}) == "invalid_data_b64"
        assert refused(agent, f"/process/{process_id}/stdin", {}) == "invalid_data_b64"
        for bad in ("STOP", "SIGTERM", 9, None):
            assert refused(agent, f"/process/{process_id}/kill", {"signal": bad}) == "invalid_signal"
        assert refused(agent, f"/process/{process_id}/resize", {"cols": 80, "rows": 24}) == "no_tty"
    finally:
        agent.call("POST", f"/process/{process_id}/kill", json_body={"signal": "KILL"})


@pytest.mark.parametrize(("method", "suffix", "body"), [
    ("GET", "status", None), ("POST", "stdin", {"data_b64": ""}), ("GET", "stdout/stream", None),
    ("POST", "kill", {"signal": "TERM"}), ("POST", "resize", {"cols": 80, "rows": 24}),
])
def test_an_unknown_process_is_404(agent, method, suffix, body):
    answer = agent.call(method, f"/process/no-such-id/{suffix}", json_body=body)
    assert (answer.status, answer.json()["code"]) == (404, "process_not_found")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_status_measures_cpu_and_memory(agent):
    spawned_at = time.monotonic()
    busy = spawn(agent, command="sh", args=["-c", "while :; do :; done"])
    idle = spawn(agent, command="sh", args=["-c", "sleep 300 & wait"])["process_id"]
    try:
        time.sleep(0.5)
        # Since its start: what it used, as /proc says, over the time since the spawn was asked for (a little
        # longer than since its start, so this is a lower bound; the machine may be busy).
        status = agent.call("GET", f"/process/{busy['process_id']}/status").json()
        used = 100 * cpu_seconds(busy["pid"]) / (time.monotonic() - spawned_at)
        assert status["state"] == "running" and status["exit_code"] is None and status["mem_bytes"] > 100_000
        assert used - 20 < status["cpu_pct"] < used + 20 and status["cpu_pct"] > 0
        assert agent.call("GET", f"/process/{idle}/status").json()["cpu_pct"] < 5
        # Since the previous call: what the process used meanwhile, as /proc says (the machine may be busy).
        before, started = cpu_seconds(busy["pid"]), time.monotonic()
        time.sleep(1.0)
        used = 100 * (cpu_seconds(busy["pid"]) - before) / (time.monotonic() - started)
        assert abs(agent.call("GET", f"/process/{busy['process_id']}/status").json()["cpu_pct"] - used) < 20
        # sh and its sleep: two processes' resident memory, more than sh alone.
        alone = spawn(agent, command="sh", args=["-c", "read x"])["process_id"]
        time.sleep(0.3)
        idle_bytes = agent.call("GET", f"/process/{idle}/status").json()["mem_bytes"]
        assert idle_bytes > agent.call("GET", f"/process/{alone}/status").json()["mem_bytes"] > 0
        agent.call("POST", f"/process/{alone}/kill", json_body={"signal": "KILL"})
    finally:
        for process_id in (busy["process_id"], idle):
            agent.call("POST", f"/process/{process_id}/kill", json_body={"signal": "KILL"})


def test_a_pty_is_a_real_terminal_and_resizes(agent):
    process = spawn(agent, command="sh", args=["-c", "tty; stty size; read line; stty size"], allocate_tty=True,
                    cols=100, rows=30)
    process_id = process["process_id"]
    received = frames(stream(agent, process_id))
    text = b""
    while b"30 100" not in text:
        text += base64.b64decode(next(received).data["data_b64"])
    assert text.startswith(b"/dev/pts/")
    assert agent.call("POST", f"/process/{process_id}/resize", json_body={"cols": 120, "rows": 40}).json() == \
        {"ok": True}
    agent.call("POST", f"/process/{process_id}/stdin", json_body={"data_b64": base64.b64encode(b"\n").decode()})
    ending = None
    for frame in received:
        if "data_b64" in frame.data:
            text += base64.b64decode(frame.data["data_b64"])
        else:
            ending = frame.data
    assert b"40 120" in text and ending == {"event": "exit", "exit_code": 0}


BAD_SIZES = [({"cols": 0, "rows": 24}, "invalid_cols"), ({"cols": 80, "rows": 4097}, "invalid_rows"),
             ({"cols": "80", "rows": 24}, "invalid_cols"), ({"cols": 80, "rows": -1}, "invalid_rows"),
             ({"cols": 80.5, "rows": 24}, "invalid_cols")]


@pytest.mark.parametrize(("body", "code"), BAD_SIZES)
def test_bad_terminal_sizes_are_refused(agent, body, code):
    assert refused(agent, "/process/spawn", {"command": "true", "allocate_tty": True, **body}) == code
    assert refused(agent, "/process/spawn", {"command": "true", **body}) == code
    process_id = spawn(agent, command="cat", allocate_tty=True)["process_id"]
    try:
        assert refused(agent, f"/process/{process_id}/resize", body) == code
        assert refused(agent, f"/process/{process_id}/resize", {"cols": 80}) == "invalid_rows"
    finally:
        agent.call("POST", f"/process/{process_id}/kill", json_body={"signal": "KILL"})


def test_at_most_64_processes_live_at_once(agent):
    ids = [spawn(agent, command="sleep", args=["300"])["process_id"] for _ in range(lifecycle.MAX_LIVE)]
    try:
        assert refused(agent, "/process/spawn", {"command": "true"}) == "too_many_processes"
        assert refused(agent, "/process/exec", {"command": "true"}) == "too_many_processes"
        agent.call("POST", f"/process/{ids[0]}/kill", json_body={"signal": "KILL"})
        wait_for(lambda: agent.call("GET", f"/process/{ids[0]}/status").json()["state"] == "exited")
        assert run(agent, command="true")["exit_code"] == 0
    finally:
        for process_id in ids:
            agent.call("POST", f"/process/{process_id}/kill", json_body={"signal": "KILL"})


def test_nothing_it_ran_outlives_the_agent(agent):
    pids = [spawn(agent, command="sleep", args=["300"])["pid"],
            spawn(agent, command="sh", args=["-c", "read x"], allocate_tty=True)["pid"]]
    assert all(alive(pid) for pid in pids)
    agent.process.kill()  # not even a chance to clean up
    agent.process.wait()
    wait_for(lambda: not any(alive(pid) for pid in pids), 5)


class Ended:
    """What the table reads of a spawned process: its id and when it exited."""

    def __init__(self, process_id, exited_at):
        self.id, self.exited_at = process_id, exited_at


def test_an_exited_process_is_kept_300_seconds_then_forgotten():
    table = processes.Table()
    now = time.monotonic()
    for process_id, exited_at in (("running", None), ("recent", now - 299), ("old", now - 301)):
        table.add(Ended(process_id, exited_at))
    assert table.get("running").id == "running" and table.get("recent").id == "recent"
    with pytest.raises(AgentError) as refusal:
        table.get("old")
    assert refusal.value.status == 404


def test_only_the_newest_exited_processes_are_kept(monkeypatch):
    monkeypatch.setattr(processes, "MAX_KEPT_EXITED", 2)
    table = processes.Table()
    now = time.monotonic()
    for process_id, exited_at in (("first", now - 3), ("running", None), ("second", now - 2), ("third", now - 1)):
        table.add(Ended(process_id, exited_at))
    assert sorted(table.processes) == ["running", "second", "third"]


def request(body: bytes) -> Request:
    return Request("POST", "/process/spawn", {}, Headers([("Content-Length", str(len(body)))]), io.BytesIO(body))


def test_without_landlock_processes_are_refused_with_501(monkeypatch):
    monkeypatch.setattr(lifecycle, "confined", lambda: False)
    for handler in (processes.exec_process, processes.spawn_process):
        with pytest.raises(AgentError) as refusal:
            handler(request(b'{"command": "true"}'))
        assert (refusal.value.status, refusal.value.code) == (501, "processes_not_confined")


def test_every_stream_frame_validates_with_the_sdks_model(agent):
    process = spawn(agent, command="sh", args=["-c", "echo out; echo err >&2; exit 2"])
    found = read_all(stream(agent, process["process_id"]))
    for frame in found:
        ProcessStdoutStreamResponse.model_validate(frame.data, strict=True)
    assert found[-1].data == {"event": "exit", "exit_code": 2}


@pytest.fixture
def in_process(monkeypatch):
    """Route handlers called in this process, as if confined (the agent's own tests run it as a program)."""
    monkeypatch.setattr(lifecycle, "confined", lambda: True)
    running.LAUNCHER.call(lambda: None)  # its thread started before a test makes threads fail
    assert lifecycle.SLOTS.used == 0 and execs.CAPTURE_BUDGET.used == 0


def sleepers(seconds: str) -> list[int]:
    return [int(pid) for pid in os.listdir("/proc") if pid.isdigit() and alive(int(pid))
            and Path(f"/proc/{pid}/cmdline").read_bytes() == b"sleep\x00" + seconds.encode() + b"\x00"]


def test_an_exec_whose_answer_never_starts_is_still_followed_to_its_end(in_process):
    # What the server does when writing the headers fails: it closes the answer's chunks, never iterating them.
    answer = processes.exec_process(request(json.dumps({"command": "sh", "args": [
        "-c", "head -c 100000 /dev/zero; sleep 0.3"]}).encode()))
    answer.chunks.close()
    wait_for(lambda: lifecycle.SLOTS.used == 0 and execs.CAPTURE_BUDGET.used == 0, 5)


def test_an_exec_answer_gives_its_output_budget_back_once_sent(in_process):
    answer = processes.exec_process(request(json.dumps({"command": "head", "args": [
        "-c", "300000", "/dev/zero"]}).encode()))
    body = json.loads(b"".join(answer.chunks))
    assert len(base64.b64decode(body["stdout_b64"])) == 300000 and execs.CAPTURE_BUDGET.used == 300000
    answer.chunks.close()
    assert execs.CAPTURE_BUDGET.used == 0 and lifecycle.SLOTS.used == 0


def test_exec_output_is_capped_for_all_execs_together(monkeypatch):
    monkeypatch.setattr(execs, "CAPTURE_BUDGET", lifecycle.Counter(10))
    first, second = execs.Capture(), execs.Capture()
    first.add(b"123456")
    second.add(b"abcdef")
    assert (bytes(first.data), first.truncated, bytes(second.data), second.truncated) == \
        (b"123456", False, b"abcd", True)
    second.add(b"more")
    assert bytes(second.data) == b"abcd" and execs.CAPTURE_BUDGET.used == 10


def test_a_failure_after_execs_headers_still_ends_in_a_whole_json_body(in_process, monkeypatch):
    def broken(run, sink, deadline):
        raise RuntimeError("broken follower")

    monkeypatch.setattr(running, "follow", broken)
    answer = processes.exec_process(request(b'{"command": "sleep", "args": ["298.5"]}'))
    body = json.loads(b"".join(answer.chunks))
    answer.chunks.close()
    assert body["code"] == "internal_error" and "failed" in body["message"]
    assert body["exit_code"] is None and body["stdout_b64"] == "" and body["timed_out"] is False
    assert lifecycle.SLOTS.used == 0 and not sleepers("298.5")  # killed and reaped all the same


def test_a_spawn_whose_follower_cannot_start_is_undone_with_a_400(in_process, monkeypatch):
    original = threading.Thread.start

    def start(thread):
        if thread.name.startswith(("process ", "exec ")):
            raise RuntimeError("can't start new thread")
        original(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    for handler in (processes.spawn_process, processes.exec_process):
        with pytest.raises(AgentError) as refusal:
            handler(request(b'{"command": "sleep", "args": ["299.5"]}'))
        assert (refusal.value.status, refusal.value.code) == (400, "too_many_processes")
        assert lifecycle.SLOTS.used == 0 and not sleepers("299.5")
