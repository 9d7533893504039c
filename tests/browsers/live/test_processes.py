"""Processes of a session (#37) through the official SDK on real Chromium: what `exec` runs as and sees, a timeout
that answers 200, a process killed for memory while the session goes on, `spawn` with two readers and a late one,
stdin, kill, a terminal that resizes, and every refusal of a bad process call.

One session serves the module."""
import base64
import re
import threading

import pytest
from playwright.sync_api import sync_playwright

from browserhost.sandbox_policy import SandboxPolicy
from tests.browsers.live.tenants import refusal, refused
from tests.live_server import cannot_sandbox
from tests.waiting import eventually

pytestmark = pytest.mark.skipif(bool(cannot_sandbox()), reason=f"this machine cannot sandbox: {cannot_sandbox()}")

# Lists every process of the session: "pid command line" a line.
PROCESSES = ("import os\nfor pid in filter(str.isdigit, os.listdir('/proc')):\n"
             "    try: print(pid, open(f'/proc/{pid}/cmdline', 'rb').read().replace(b'\\0', b' ').decode())\n"
             "    except OSError: pass")


def text(b64):
    return base64.b64decode(b64 or "").decode(errors="replace")


@pytest.fixture(scope="module")
def page(session):
    with sync_playwright() as playwright:
        browser = playwright.chromium.connect_over_cdp(session.cdp_ws_url)
        context = browser.contexts[0]
        yield context.pages[0] if context.pages else context.new_page()
        browser.close()


def run(client, session, command, *args, **options):
    return client.browsers.process.exec(session.session_id, command=command, args=list(args), **options)


class Follower(threading.Thread):
    """A process's stream read to its end in a thread of its own: `stdout` grows as its frames come."""

    def __init__(self, client, session, process_id):
        super().__init__(daemon=True)
        self.client, self.session, self.process_id = client, session, process_id
        self.stdout, self.ended = b"", None

    def run(self):
        for event in self.client.browsers.process.stdout_stream(self.process_id, id_or_name=self.session.session_id):
            if event.event == "exit":
                self.ended = event
            elif event.stream == "stdout":
                self.stdout += base64.b64decode(event.data_b64)

    def shown(self, data):
        """Whether the process wrote `data` within a few seconds."""
        return eventually(lambda: data in self.stdout)


def read_stream(client, session, process_id, **options):
    """(stdout, stderr, exit event) of a process's stream read to its end."""
    out = {"stdout": b"", "stderr": b""}
    ended = None
    for event in client.browsers.process.stdout_stream(process_id, id_or_name=session.session_id, **options):
        if event.event == "exit":
            ended = event
        else:
            out[event.stream] += base64.b64decode(event.data_b64)
    return out["stdout"], out["stderr"], ended


def test_exec_runs_as_the_sandbox_user_in_a_clean_environment_and_sees_chromium(client, session):
    uid = SandboxPolicy().ids()[0]
    assert uid != 0
    who = run(client, session, "id", "-u")
    assert (who.exit_code, text(who.stdout_b64)) == (0, f"{uid}\n")
    assert who.model_extra["timed_out"] is False and who.duration_ms >= 0

    env = run(client, session, "sh", "-c", "pwd; env", env={"GREETING": "hi"})
    lines = text(env.stdout_b64).splitlines()
    assert lines[0] == "/home/session"
    assert {line.split("=", 1)[0] for line in lines[1:]} <= {"PATH", "HOME", "TMPDIR", "LANG", "GREETING", "PWD",
                                                            "SHLVL", "_"}
    assert {"HOME=/home/session", "PATH=/usr/bin:/bin", "GREETING=hi"} <= set(lines)

    listed = run(client, session, "ls", "/proc")
    pids = [name for name in text(listed.stdout_b64).split() if name.isdigit()]
    assert listed.exit_code == 0 and len(pids) > 5
    processes = text(run(client, session, "python3", "-c", PROCESSES).stdout_b64)
    assert re.search(r"^\d+ \S*chromium\S* .*--remote-debugging", processes, re.MULTILINE), processes


def test_an_exec_past_its_timeout_answers_200_with_what_it_wrote_and_leaves_nothing_running(client, session):
    answer = run(client, session, "sh", "-c", "echo started; sleep 37 & wait", timeout_sec=1)
    assert answer.exit_code is None and answer.model_extra["timed_out"] is True
    assert text(answer.stdout_b64) == "started\n"
    assert 1000 <= answer.duration_ms < 10_000
    # Its child went with it.
    assert eventually(lambda: "sleep 37" not in text(run(client, session, "python3", "-c", PROCESSES).stdout_b64),
                      5, interval=0.2)


def test_a_process_past_its_memory_is_killed_and_the_session_goes_on(client, session, page):
    # Touches 2 GiB, twice a headless session's memory.
    answer = run(client, session, "python3", "-c", "data = b'x' * (2 << 30)")
    assert (answer.exit_code, answer.model_extra.get("signal")) == (137, "KILL")
    assert page.evaluate("1 + 1") == 2
    retrieved = client.browsers.retrieve(session.session_id)
    assert retrieved.deleted_at is None and retrieved.model_extra.get("end_reason") is None
    assert run(client, session, "true").exit_code == 0


def test_every_reader_of_a_spawned_process_sees_all_its_output_a_late_one_too(client, session):
    spawned = client.browsers.process.spawn(
        session.session_id, command="sh", args=["-c", "for n in 1 2 3; do echo line$n; sleep 0.3; done; "
                                                "echo oops >&2; exit 5"])
    assert spawned.pid > 0 and spawned.started_at is not None
    results = []
    readers = [threading.Thread(target=lambda: results.append(read_stream(client, session, spawned.process_id)))
               for _ in range(2)]
    for reader in readers:
        reader.start()
    for reader in readers:
        reader.join(timeout=30)
    status = client.browsers.process.status(spawned.process_id, id_or_name=session.session_id)
    assert (status.state, status.exit_code) == ("exited", 5)
    results.append(read_stream(client, session, spawned.process_id))  # after its exit
    assert len(results) == 3
    for stdout, stderr, ended in results:
        assert (stdout, stderr, ended.exit_code) == (b"line1\nline2\nline3\n", b"oops\n", 5)


def test_stdin_reaches_cat_and_kill_ends_it(client, session):
    process = client.browsers.process
    spawned = process.spawn(session.session_id, command="cat")
    follower = Follower(client, session, spawned.process_id)
    follower.start()
    written = process.stdin(spawned.process_id, id_or_name=session.session_id,
                            data_b64=base64.b64encode(b"hello cat\n").decode())
    assert written.written_bytes == 10
    assert follower.shown(b"hello cat\n"), follower.stdout  # cat echoed it before it is killed
    assert process.kill(spawned.process_id, id_or_name=session.session_id, signal="TERM").ok is True
    follower.join(timeout=30)
    assert follower.stdout == b"hello cat\n" and follower.ended.exit_code == 128 + 15
    assert follower.ended.model_extra.get("signal") == "TERM"


def test_status_measures_a_busy_process_until_kill_ends_it(client, session):
    process = client.browsers.process
    spawned = process.spawn(session.session_id, command="python3",
                            args=["-c", "data = b'x' * (64 << 20)\nwhile True: pass"])
    measured = eventually(lambda: (s := process.status(spawned.process_id, id_or_name=session.session_id))
                          .cpu_pct > 20 and s.mem_bytes > 64 << 20 and s, 10, interval=0.3)
    assert measured and measured.state == "running", measured
    process.kill(spawned.process_id, id_or_name=session.session_id, signal="KILL")
    ended = eventually(lambda: (s := process.status(spawned.process_id, id_or_name=session.session_id))
                       .state == "exited" and s, 10, interval=0.1)
    assert ended and ended.exit_code == 137


def test_a_terminal_is_one_and_takes_a_new_size(client, session):
    process = client.browsers.process
    spawned = process.spawn(session.session_id, command="sh", args=["-c", "tty; stty size; read go; stty size"],
                            allocate_tty=True, cols=100, rows=30)
    follower = Follower(client, session, spawned.process_id)
    follower.start()
    assert follower.shown(b"30 100"), follower.stdout  # its first size, told before it is changed
    assert process.resize(spawned.process_id, id_or_name=session.session_id, cols=120, rows=40).ok is True
    process.stdin(spawned.process_id, id_or_name=session.session_id, data_b64=base64.b64encode(b"\n").decode())
    follower.join(timeout=30)
    shown = follower.stdout.decode().replace("\r\n", "\n")
    assert re.match(r"/dev/pts/\d+\n30 100\n", shown), shown
    assert shown.endswith("40 120\n") and follower.ended.exit_code == 0


def test_bad_process_calls_are_refused_before_anything_runs(client, session):
    process, sid = client.browsers.process, session.session_id
    cat = process.spawn(sid, command="cat")
    done = process.spawn(sid, command="true")
    assert eventually(lambda: process.status(done.process_id, id_or_name=sid).state == "exited")
    calls = {
        "as root": lambda: process.exec(sid, command="touch", args=["/tmp/ran-as-root"], as_root=True),
        "as another user": lambda: process.exec(sid, command="touch", args=["/tmp/ran-as-nobody"], as_user="root"),
        "a relative cwd": lambda: process.exec(sid, command="true", cwd="tmp"),
        "a missing command": lambda: process.exec(sid, command="no-such-command"),
        "timeout 0": lambda: process.exec(sid, command="true", timeout_sec=0),
        "timeout past a day": lambda: process.exec(sid, command="true", timeout_sec=86401),
        "cols 0": lambda: process.spawn(sid, command="true", allocate_tty=True, cols=0, rows=24),
        "rows past 4096": lambda: process.spawn(sid, command="true", allocate_tty=True, cols=80, rows=5000),
        "resize negative": lambda: process.resize(cat.process_id, id_or_name=sid, cols=-1, rows=24),
        "resize without a terminal": lambda: process.resize(cat.process_id, id_or_name=sid, cols=80, rows=24),
        "an unknown signal": lambda: process.kill(cat.process_id, id_or_name=sid, signal="USR1"),
        "base64 that does not decode": lambda: process.stdin(cat.process_id, id_or_name=sid, data_b64="@@not b64"),
        "stdin to an exited one": lambda: process.stdin(done.process_id, id_or_name=sid, data_b64="aGk="),
    }
    outcomes = {name: refusal(call) for name, call in calls.items()}
    assert {name: status for name, (status, _) in outcomes.items()} == {name: 400 for name in calls}
    assert outcomes["as root"][1] == "as_root_not_supported"
    assert (outcomes["resize without a terminal"][1], outcomes["stdin to an exited one"][1]) == ("no_tty",
                                                                                                 "process_exited")
    assert refused(lambda: process.kill("no-such-process", id_or_name=sid, signal="KILL"), 404)
    assert refused(lambda: process.status("no-such-process", id_or_name=sid), 404)
    # Nothing ran, and the process the refusals named is as it was.
    ls = run(client, session, "ls", "/tmp")
    assert "ran-as" not in text(ls.stdout_b64)
    assert process.status(cat.process_id, id_or_name=sid).state == "running"
    process.kill(cat.process_id, id_or_name=sid, signal="KILL")
