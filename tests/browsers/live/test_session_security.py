"""What a session's processes cannot do (#37): read the server's files, reach its ports, run as anyone but the
sandbox's user, trace or signal the session's Chromium (Landlock), outlive the session; and the files and
processes of another organization's session, or of a deleted one, are not found.

What happens is checked from the host as well: processes by pid (the session's pid namespace mapped to the host's
through NSpid) and cgroup."""
import base64
import json
import re
import secrets
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from browserhost import network
from browserhost.sandbox_policy import SandboxPolicy
from tests.browsers.live.conftest import sandbox_of
from tests.browsers.live.tenants import refusal, tenant
from tests.live_server import ROOT, cannot_sandbox
from tests.waiting import eventually

pytestmark = pytest.mark.skipif(bool(cannot_sandbox()), reason=f"this machine cannot sandbox: {cannot_sandbox()}")

CONNECT = """import socket, sys
for address in sys.argv[1:]:
    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=3).close()
        print(address, "open")
    except OSError:
        print(address, "closed")"""
# What a process may do to Chromium's browser process and to a process of its own (a sibling): errno or 0 each.
TOUCH = """import ctypes, json, os, signal, sys
def chromium():
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")
        except OSError:
            continue
        if b"chromium" in argv[0] and any(arg.startswith(b"--remote-debugging") for arg in argv):
            return int(pid)
def attempt(action):
    try:
        action()
        return 0
    except OSError as error:
        return error.errno
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
def attach(pid):
    if libc.ptrace(16, pid, None, None) != 0:  # PTRACE_ATTACH
        raise OSError(ctypes.get_errno(), "ptrace")
    libc.ptrace(17, pid, None, None)  # PTRACE_DETACH
browser, sibling = chromium(), int(sys.argv[1])
print(json.dumps({"chromium": browser,
    "mem": attempt(lambda: open(f"/proc/{browser}/mem", "rb").close()),
    "ptrace": attempt(lambda: attach(browser)),
    "signal": attempt(lambda: os.kill(browser, signal.SIGCONT)),
    "sibling mem": attempt(lambda: open(f"/proc/{sibling}/mem", "rb").close()),
    "sibling signal": attempt(lambda: os.kill(sibling, signal.SIGCONT))}))"""


def output(answer):
    return base64.b64decode(answer.stdout_b64 or "").decode()


def run(client, session_id, command, *args):
    return client.browsers.process.exec(session_id, command=command, args=list(args))


def session_pids(lantern, session_id):
    """Host pids of every process of the session's cgroup and of the cgroups below it."""
    pids = set()
    for folder in sandbox_of(lantern, session_id).cgroup.folders():
        for procs in folder.rglob("cgroup.procs"):
            try:
                pids.update(int(pid) for pid in procs.read_text().split())
            except OSError:
                pass
    return pids


def status_of(pid):
    """/proc/<pid>/status as {field: value}; {} once the process is gone."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return {}
    return dict(line.split(":\t", 1) for line in lines if ":\t" in line)


def host_pid(lantern, session_id, inner_pid):
    """The host pid of the session's process `inner_pid` (a pid of the session's own namespace, as spawn gives)."""
    for pid in session_pids(lantern, session_id):
        namespaced = status_of(pid).get("NSpid", "").split()
        if namespaced and int(namespaced[-1]) == inner_pid:
            return pid
    return None


def test_a_process_reads_no_file_of_the_server_and_reaches_none_of_its_ports(lantern, client, session, site):
    secret = secrets.token_hex(8)
    sentinel = ROOT / "instance" / f"sentinel-{secret}.txt"
    sentinel.parent.mkdir(exist_ok=True)
    sentinel.write_text(secret)
    try:
        shown = run(client, session.session_id, "sh", "-c", f"cat {sentinel}; ls {ROOT} {lantern.workdir}")
        assert shown.exit_code != 0 and secret not in output(shown)
        assert refusal(lambda: client.browsers.fs.read_file(session.session_id, path=str(sentinel)))[0] == 404
        assert refusal(lambda: client.browsers.fs.list_files(session.session_id, path=str(ROOT)))[0] == 404
    finally:
        sentinel.unlink()

    api = urlsplit(lantern.base_url).netloc
    targets = [api, f"127.0.0.1:{lantern.hosts[0].port}", urlsplit(site.url).netloc]
    own = [str(address) for address in network.host_addresses() if not address.is_loopback and address.version == 4]
    targets += [f"{address}:{urlsplit(lantern.base_url).port}" for address in own[:1]]
    tried = run(client, session.session_id, "python3", "-c", CONNECT, *targets)
    reached = dict(line.split() for line in output(tried).splitlines())
    # The test site's port is one the hosts open (LOOPBACK_PORTS): the process does reach what is allowed.
    assert reached == {**{target: "closed" for target in targets}, urlsplit(site.url).netloc: "open"}


def test_a_process_runs_as_the_sandbox_user_and_can_neither_trace_nor_signal_chromium(lantern, client, session):
    uid = SandboxPolicy().ids()[0]
    sibling = client.browsers.process.spawn(session.session_id, command="sleep", args=["600"])
    try:
        outside = host_pid(lantern, session.session_id, sibling.pid)
        assert outside is not None
        assert status_of(outside)["Uid"].split() == [str(uid)] * 4 and uid != 0
        assert status_of(outside)["CapEff"] == "0000000000000000"

        touched = json.loads(output(run(client, session.session_id, "python3", "-c", TOUCH, str(sibling.pid))))
        assert touched.pop("chromium") is not None
        # Refused by Landlock's scope (EPERM or EACCES), where a process of its own is not.
        assert {name: value in (1, 13) for name, value in touched.items()} == {
            "mem": True, "ptrace": True, "signal": True, "sibling mem": False, "sibling signal": False}
        assert touched["sibling mem"] == touched["sibling signal"] == 0
    finally:
        client.browsers.process.kill(sibling.process_id, id_or_name=session.session_id, signal="KILL")


def start_time(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except OSError:
        return None


def test_a_deleted_session_ends_every_process_it_ran_and_its_calls_are_not_found(lantern, client):
    created = client.browsers.create(headless=True, timeout_seconds=600)
    sid = created.session_id
    spawned = client.browsers.process.spawn(sid, command="sh", args=["-c", "sleep 1001 & sleep 1002 & wait"])
    outside = host_pid(lantern, sid, spawned.pid)

    def family():
        found = {}
        for pid in session_pids(lantern, sid):
            try:
                line = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if re.search(rb"^sleep\x00100[12]\x00|^(/usr/bin/)?sh\x00-c\x00sleep 1001", line):
                found[pid] = start_time(pid)
        return found

    running = eventually(lambda: len(family()) == 3 and family(), 5, interval=0.1)
    assert running and outside in running, running
    folders = sandbox_of(lantern, sid).cgroup.folders()

    client.browsers.delete_by_id(sid)
    # Gone, each pid (or taken by another process since), and the session's cgroup with them.
    assert eventually(lambda: all(start_time(pid) != began for pid, began in running.items()), 10, interval=0.1)
    assert not any(folder.exists() for folder in folders)

    calls = {
        "list_files": lambda: client.browsers.fs.list_files(sid, path="/tmp"),
        "write_file": lambda: client.browsers.fs.write_file(sid, b"late", path="/tmp/late.txt"),
        "exec": lambda: client.browsers.process.exec(sid, command="true"),
        "status": lambda: client.browsers.process.status(spawned.process_id, id_or_name=sid),
        "watch": lambda: client.browsers.fs.watch.start(sid, path="/tmp"),
    }
    outcomes = {name: refusal(call)[0] for name, call in calls.items()}
    assert set(outcomes.values()) <= {404, 410} and len(set(outcomes.values())) == 1, outcomes


def test_another_organizations_session_is_not_found(lantern, client, session):
    sid = session.session_id
    spawned = client.browsers.process.spawn(sid, command="sleep", args=["60"])
    with tenant(lantern, "intruders") as other:
        calls = {
            "read_file": lambda: other.browsers.fs.read_file(sid, path="/etc/passwd"),
            "write_file": lambda: other.browsers.fs.write_file(sid, b"theirs", path="/tmp/intruder.txt"),
            "upload_zip": lambda: other.browsers.fs.upload_zip(sid, dest_path="/tmp/in", zip_file=("a.zip", b"PK")),
            "watch": lambda: other.browsers.fs.watch.start(sid, path="/tmp"),
            "exec": lambda: other.browsers.process.exec(sid, command="touch", args=["/tmp/intruder-ran"]),
            "status": lambda: other.browsers.process.status(spawned.process_id, id_or_name=sid),
            "kill": lambda: other.browsers.process.kill(spawned.process_id, id_or_name=sid, signal="KILL"),
        }
        outcomes = {name: refusal(call)[0] for name, call in calls.items()}
    assert outcomes == {name: 404 for name in calls}
    names = {info.name for info in client.browsers.fs.list_files(sid, path="/tmp")}
    assert not names & {"intruder.txt", "intruder-ran", "in"}
    assert client.browsers.process.status(spawned.process_id, id_or_name=sid).state == "running"
    client.browsers.process.kill(spawned.process_id, id_or_name=sid, signal="KILL")
