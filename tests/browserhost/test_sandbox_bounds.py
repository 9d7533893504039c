"""What a session's processes can do to the host (#36's review of the one machine): every process of a session runs
as one user in one user and pid namespace, so any of them (a compromised Chromium, a tenant's) can trace the others
and take their descriptors (pidfd_getfd). The host's own helpers are outside the machine, what the host reads of
any process is bounded, and no process is handed a file of the host's."""
import json
import os
import subprocess
import threading
import time
from types import SimpleNamespace

import pytest

from browserhost import display, launch, recordings, sandbox, sandbox_policy
from browserhost.display import Display
from browserhost.launch import Browser
from browserhost.launch_options import LaunchOptions
from browserhost.network import SandboxError
from browserhost.unsandboxed import HostBox
from lantern_wire.devtools import MAX_JSON_BYTES, DevTools
from tests.browserhost.helpers import CHROMIUM, needs_chromium
from tests.browserhost.test_sandbox import can_sandbox
from tests.fakes import LocalServer
from tests.waiting import eventually

# A process of the session that looks for processes whose command line is argv[1:] (NUL-joined) until its stdin
# ends, takes fd 1 of each it finds (pidfd_getfd), and reports them.
WATCH = r"""
import ctypes, json, os, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
targets = [arg.encode().replace(b" ", b"\0") + b"\0" for arg in sys.argv[1:]]
found, done = {}, threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
print("watching", flush=True)
while not done.is_set():
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read()
        except OSError:
            continue
        if cmd in targets and cmd not in found:
            fd = libc.syscall(438, libc.syscall(434, int(pid), 0), 1, 0)  # pidfd_getfd(pidfd_open(pid), 1)
            found[cmd] = fd >= 0
print(json.dumps({cmd.decode().replace("\0", " ").strip(): taken for cmd, taken in found.items()}), flush=True)
"""


@can_sandbox
def test_a_process_of_the_session_sees_none_of_the_hosts_helpers(tmp_path):
    """xdotool, xmodmap and a screenshot's ffmpeg (Display.run) and a recording's ffmpeg run outside the machine: a
    process of the session finds no pid of theirs to take their pipes from, as it finds one of its own machine."""
    box = sandbox.Sandbox(tmp_path / "sessions" / "s1", sandbox_policy.SandboxPolicy(), memory_mb=128).create()
    try:
        watcher = box.popen(["/usr/bin/python3", "-c", WATCH, "/usr/bin/sleep 2.1", "/usr/bin/sleep 2.2",
                             "/usr/bin/sleep 2.3"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert watcher.stdout.readline() == "watching\n"
        ran = threading.Thread(target=Display(box.display, box).run, args=(["/usr/bin/sleep", "2.1"],))
        ran.start()
        recording = recordings._spawner(SimpleNamespace(box=box), {})(["/usr/bin/sleep", "2.2"], subprocess.DEVNULL)
        of_the_machine = box.popen(["/usr/bin/sleep", "2.3"], stdout=subprocess.PIPE)  # the watcher's control
        ran.join(30)
        assert recording.wait(30) == 0 and of_the_machine.wait(30) == 0
        recording.stdin.close()
        recording.stdout.close()
        of_the_machine.stdout.close()
        found = json.loads(watcher.communicate("", timeout=30)[0])
    finally:
        box.destroy()
    assert found == {"/usr/bin/sleep 2.3": True}


@can_sandbox
def test_a_process_of_the_session_holds_no_namespace_of_the_hosts(tmp_path):
    """bubblewrap keeps the descriptors of the namespaces it joins open: the launcher closes them."""
    box = sandbox.Sandbox(tmp_path / "sessions" / "s1", sandbox_policy.SandboxPolicy(), memory_mb=64).create()
    try:
        listed = box.popen(["/bin/sh", "-c", "for fd in /proc/self/fd/*; do readlink $fd; done"],
                           stdout=subprocess.PIPE, text=True).communicate(timeout=30)[0]
    finally:
        box.destroy()
    assert listed.count("\n") >= 3 and not any(kind in listed for kind in ("user:[", "pid:["))


class Leftover:
    """A child of the command that keeps its stdout open long after the command ended (as a process of the session
    holding a helper's pipe did), written `megabytes` to it first; killed at the end."""

    def __init__(self, tmp_path, megabytes):
        self.pid_file = tmp_path / "leftover.pid"
        self.argv = ["/bin/sh", "-c", f"sh -c 'echo $$ > {self.pid_file}; head -c {megabytes * 1024 * 1024} "
                                      "/dev/zero; exec sleep 120' & exit 0"]

    def kill(self):
        if self.pid_file.exists():
            try:
                os.kill(int(self.pid_file.read_text()), 9)
            except ProcessLookupError:
                pass


def peak_rss_growth(call):
    """How far this process's peak RSS rose during `call()` (which runs on a thread: it may not return), and
    whether it returned within 15 s."""
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # the peak (VmHWM) starts again from now
    before = _status("VmHWM")
    outcome = {}

    def run():
        try:
            outcome["returned"] = call()
        except Exception as error:  # noqa: BLE001 - what it raised is the outcome
            outcome["raised"] = error

    thread = threading.Thread(target=run, daemon=True)
    started = time.monotonic()
    thread.start()
    thread.join(15)
    return _status("VmHWM") - before, not thread.is_alive(), outcome, time.monotonic() - started


def _status(name):
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith(f"{name}:"))


def run_on_a_display(tmp_path, *, megabytes, timeout):
    """Display.run of a command whose child writes `megabytes` and keeps its output open: peak_rss_growth's
    (growth, returned, outcome, seconds)."""
    leftover = Leftover(tmp_path, megabytes=megabytes)
    try:
        return peak_rss_growth(lambda: Display(":99", HostBox()).run(leftover.argv, timeout=timeout))
    finally:
        leftover.kill()


def test_a_command_on_the_display_that_writes_without_end_is_cut_at_its_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(display, "OUTPUT_BYTES", 8 * 1024 * 1024)
    growth, returned, outcome, _ = run_on_a_display(tmp_path, megabytes=300, timeout=10)
    assert returned and isinstance(outcome.get("raised"), subprocess.SubprocessError), outcome
    assert "wrote more than 8388608 bytes" in str(outcome["raised"])
    assert growth < 48 * 1024 * 1024  # measured: some 16 MiB; held whole, 300 MiB


def test_a_command_on_the_display_whose_output_stays_open_ends_at_its_deadline(tmp_path):
    _, returned, outcome, seconds = run_on_a_display(tmp_path, megabytes=0, timeout=2)
    assert returned and isinstance(outcome.get("raised"), subprocess.TimeoutExpired), outcome
    assert seconds < 2 + 6  # its deadline, and the reap of a killed process at most


class Huge(LocalServer):
    def get(self, handler):
        body = json.dumps([{"id": str(number), "type": "page", "url": "x" * 1000} for number in range(1500)]).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)


def test_devtools_json_past_its_bound_is_refused():
    server = Huge().start(("127.0.0.1", 0))
    try:
        with pytest.raises(ValueError, match="passed"):
            DevTools("/devtools/browser/x", port=int(server.url.rsplit(":", 1)[1])).get_json("/json/list")
    finally:
        server.stop()
    assert len(json.dumps([{"id": "1499", "type": "page", "url": "x" * 1000}])) * 1500 > MAX_JSON_BYTES


# A process of the session that takes the browser's fd 1 and writes argv[1] MiB into it.
FLOOD = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
    except OSError:
        continue
    if cmd[0].endswith(b"/chromium") and not any(a.startswith(b"--type=") for a in cmd):
        fd = libc.syscall(438, libc.syscall(434, int(pid), 0), 1, 0)
        block = b"x" * (1 << 20)
        for _ in range(int(sys.argv[1])):
            os.write(fd, block)
        print("wrote", flush=True)
"""


@can_sandbox
@needs_chromium
def test_the_browsers_output_is_a_pipe_the_host_copies_into_its_log_up_to_a_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(launch, "LOG_BYTES", 2 * 1024 * 1024)
    workdir = tmp_path / "sessions" / "s1"
    box = sandbox.Sandbox(workdir, sandbox_policy.SandboxPolicy(), memory_mb=512).create()
    browser = None
    try:
        browser = Browser.start(CHROMIUM, workdir, LaunchOptions(headless=True), box=box, timeout=60)
        outputs = [os.readlink(f"/proc/{browser.pid}/fd/{fd}") for fd in (1, 2)]
        flood = box.popen(["/usr/bin/python3", "-c", FLOOD, "20"], stdout=subprocess.PIPE, text=True)
        assert flood.communicate(timeout=60)[0] == "wrote\n"
        log = workdir / "chromium.log"
        assert eventually(lambda: log.stat().st_size == 2 * 1024 * 1024, 20), log.stat().st_size
    finally:
        if browser is not None:
            browser.stop(grace=0)
        box.destroy()
    assert outputs[0] == outputs[1] and outputs[0].startswith("pipe:")
    assert log.stat().st_size == 2 * 1024 * 1024  # the rest was read and dropped


@can_sandbox
def test_a_killed_holder_ends_the_machine_and_nothing_joins_it_again(tmp_path):
    """A process of the session can kill the holder (one user): every process of the machine, the browser too, dies
    with its pid namespace (and the browser's exit ends the session), and a start in it is refused in words."""
    box = sandbox.Sandbox(tmp_path / "sessions" / "s1", sandbox_policy.SandboxPolicy(), memory_mb=64).create()
    try:
        standing = box.popen(["/usr/bin/sleep", "300"])
        killer = box.popen(["/bin/sh", "-c", "kill -9 $(pgrep -x sleep | head -1); sleep 30"])
        assert standing.wait(timeout=30) is not None and killer.wait(timeout=30) is not None
        assert eventually(lambda: box.machine.ended, 10)
        with pytest.raises(SandboxError, match="machine has ended"):
            box.popen(["/bin/true"])
    finally:
        box.destroy()
    assert not box.cgroup.exists()
