"""Landlock confinement (confine.py) on the running kernel: a confined process can no longer ptrace, read the
memory of or (ABI >= 6) signal a process outside its domain, yet can do all of that to its own child; the same
script unconfined can, so the tests can fail."""
import base64
import json
import pwd
import signal
import subprocess
from pathlib import Path

import pytest

from browserhost.agent.confine import MAX_USER_NAMESPACES, landlock_abi
from tests.browserhost.agent.conftest import AGENT_PACKAGE, SESSION_USER, SYSTEM_PYTHON
from tests.waiting import eventually

PROBE = r"""
import ctypes, json, os, subprocess, sys
sys.path.insert(0, sys.argv[1])
from agent import confine as confinement
outside = int(sys.argv[2])
abi = confinement.confine() if sys.argv[3] == "confine" else 0
assert confinement.CONFINED_ABI == abi
libc = ctypes.CDLL(None, use_errno=True)
PTRACE_ATTACH, PTRACE_DETACH = 16, 17

def attach(pid):
    if libc.ptrace(PTRACE_ATTACH, pid, None, None) != 0:
        return os.strerror(ctypes.get_errno())
    os.waitpid(pid, getattr(os, "__WALL", 0x40000000))
    libc.ptrace(PTRACE_DETACH, pid, None, None)
    return "attached"

def read_memory(pid):
    try:
        with open(f"/proc/{pid}/mem", "rb"):
            return "opened"
    except OSError as error:
        return error.strerror

def signal_it(pid):
    try:
        os.kill(pid, 0)
        return "signalled"
    except OSError as error:
        return error.strerror

child = subprocess.Popen(["sleep", "30"])
result = {"abi": abi, "outside": {"ptrace": attach(outside), "mem": read_memory(outside),
                                  "signal": signal_it(outside)},
          "child": {"ptrace": attach(child.pid), "mem": read_memory(child.pid), "signal": signal_it(child.pid)}}
child.kill()
child.wait()
print(json.dumps(result))
"""


def probe(tmp_path, mode: str) -> dict:
    (tmp_path / "lib").mkdir(exist_ok=True)
    if not (tmp_path / "lib" / "agent").exists():
        (tmp_path / "lib" / "agent").symlink_to(AGENT_PACKAGE)
    outside = subprocess.Popen(["sleep", "30"])
    try:
        done = subprocess.run([SYSTEM_PYTHON, "-I", "-S", "-c", PROBE, str(tmp_path / "lib"), str(outside.pid), mode],
                              capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        assert outside.poll() is None  # alive: nothing the probe did ended it
        return json.loads(done.stdout)
    finally:
        outside.send_signal(signal.SIGKILL)
        outside.wait()


needs_landlock = pytest.mark.skipif(landlock_abi() < 1, reason="this kernel has no Landlock")


@needs_landlock
def test_unconfined_the_probe_reaches_the_outside_process(tmp_path):
    result = probe(tmp_path, "free")
    assert result["outside"] == {"ptrace": "attached", "mem": "opened", "signal": "signalled"}


@needs_landlock
def test_confined_the_probe_cannot_reach_outside_but_can_its_child(tmp_path):
    result = probe(tmp_path, "confine")
    assert result["abi"] == landlock_abi() >= 1
    assert result["outside"]["ptrace"] == "Operation not permitted"
    assert result["outside"]["mem"] in ("Permission denied", "Operation not permitted")
    if result["abi"] >= 6:
        assert result["outside"]["signal"] == "Operation not permitted"
    assert result["child"] == {"ptrace": "attached", "mem": "opened", "signal": "signalled"}


def test_the_agent_confines_itself_at_start(agent):
    expected = f"confined by Landlock ABI {landlock_abi()}" if landlock_abi() >= 1 else "no Landlock"
    assert expected in agent.log()


def test_the_agent_as_the_session_user_confines_itself(user_agent):
    """Unprivileged, Landlock needs no_new_privs first: confine() sets it."""
    agent, _ = user_agent
    if landlock_abi() >= 1:
        assert f"confined by Landlock ABI {landlock_abi()}" in agent.log()
        status = Path(f"/proc/{agent.pid}/status").read_text()
        assert "NoNewPrivs:\t1" in status


PEEK = """
import sys
for name in ("maps", "mem", "environ"):
    try:
        with open(f"/proc/{sys.argv[1]}/{name}", "rb") as file:
            file.read(1)
        print(name, "read")
    except OSError as error:
        print(name, error.strerror)
"""


def test_what_the_agent_runs_cannot_read_the_agents_memory(user_agent):
    """Its processes run as its user, in its own Landlock domain: only the agent's not being dumpable keeps them
    from its memory (and so from its sockets and what it holds of other calls)."""
    agent, work = user_agent
    reply = agent.call("POST", "/process/exec", json_body={"command": SYSTEM_PYTHON, "cwd": str(work),
                                                           "args": ["-I", "-S", "-c", PEEK, str(agent.pid)]})
    assert reply.status == 200, reply.body
    output = base64.b64decode(reply.json()["stdout_b64"]).decode()
    assert output.split("\n")[:3] == ["maps Permission denied", "mem Permission denied", "environ Permission denied"]


# Starts `unshare -U sleep` processes at once (each holds a user namespace while it sleeps) and prints how many
# live, the uid and gid maps of the process, its effective and bounding capabilities, and `id -u`.
NAMESPACES = r"""
import subprocess, sys, time
tries = int(sys.argv[1])
sleepers = [subprocess.Popen(["unshare", "-U", "sleep", "20"], stderr=subprocess.DEVNULL) for _ in range(tries)]
time.sleep(1)
print(sum(sleeper.poll() is None for sleeper in sleepers))
for sleeper in sleepers:
    sleeper.kill()
    sleeper.wait()
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines())
print(" ".join(open("/proc/self/uid_map").read().split()), "|", " ".join(open("/proc/self/gid_map").read().split()))
print(status["CapEff"].strip(), status["CapBnd"].strip())
print(subprocess.run(["id", "-u"], capture_output=True, text=True).stdout.strip())
"""


def run_in(agent, cwd, script, *args):
    reply = agent.call("POST", "/process/exec", json_body={"command": SYSTEM_PYTHON, "cwd": str(cwd),
                                                           "args": ["-I", "-S", "-c", script, *map(str, args)]})
    assert reply.status == 200, reply.body
    return base64.b64decode(reply.json()["stdout_b64"]).decode().splitlines()


def test_what_the_agent_runs_makes_at_most_max_user_namespaces_and_has_no_capabilities(user_agent):
    """User namespaces are counted per uid across the machine (every sandbox is one uid): the agent's own namespace
    bounds what its processes make, and they still run as the session's user, without capabilities."""
    agent, work = user_agent
    alive, maps, capabilities, uid = run_in(agent, work, NAMESPACES, MAX_USER_NAMESPACES + 14)
    user = pwd.getpwnam(SESSION_USER)
    assert int(alive) == MAX_USER_NAMESPACES
    assert maps == f"{user.pw_uid} {user.pw_uid} 1 | {user.pw_gid} {user.pw_gid} 1"
    assert capabilities == "0000000000000000 0000000000000000" and uid == str(user.pw_uid)
    assert "in a user namespace of its own: at most 16 more" in agent.log()
    # Once they are gone (the kernel frees a namespace a moment after its last process), more can be made again:
    # the bound counts what lives.
    assert eventually(lambda: int(run_in(agent, work, NAMESPACES, 4)[0]) == 4, 15)


def test_the_agents_files_are_the_session_users_on_the_host(user_agent):
    agent, work = user_agent
    assert agent.call("PUT", f"/fs/write_file?path={work}/owned.txt", body=b"abc",
                      headers={"Content-Length": "3"}).status == 201
    assert agent.call("PUT", "/fs/create_directory", json_body={"path": f"{work}/folder"}).status == 201
    user = pwd.getpwnam(SESSION_USER)
    for name in ("owned.txt", "folder"):
        assert ((work / name).stat().st_uid, (work / name).stat().st_gid) == (user.pw_uid, user.pw_gid)
