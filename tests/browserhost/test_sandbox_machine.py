"""A session is one machine (browserhost/machine.py, #36): a process the host starts for a session sees what the
session's Chromium downloaded and Chromium itself, in the session's cgroup and behind its firewall, and is gone
when the session ends; another session's processes see none of it."""
import json
import os
import socket
import subprocess

from browserhost import machine, sandbox, sandbox_policy
from browserhost.cdp import CdpClient
from browserhost.launch import Browser
from browserhost.launch_options import LaunchOptions
from tests.browserhost.helpers import CHROMIUM, Site, evaluate, needs_chromium, open_page
from tests.browserhost.test_sandbox import can_sandbox
from tests.waiting import eventually

REPORT = b"quarterly numbers\n"
# What a process of the session reports: its user, a downloaded file, the processes it sees, whether it reaches
# the host's loopback port the session may (argv[1]) and one it may not (argv[2]), and its host pid's cgroup.
LOOK = r"""
import json, os, socket, sys
def reaches(port):
    try:
        socket.create_connection(("127.0.0.1", int(port)), timeout=3).close()
        return True
    except OSError:
        return False
downloads = os.path.expanduser("~/Downloads")
processes = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        processes.append(open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode())
    except OSError:
        pass
print(json.dumps({"uid": os.getuid(), "downloads": {name: open(os.path.join(downloads, name)).read()
                  for name in os.listdir(downloads)} if os.path.isdir(downloads) else {},
                  "processes": processes, "allowed": reaches(sys.argv[1]), "closed": reaches(sys.argv[2])}),
      flush=True)
sys.stdin.read()  # until the test lets it go, or the session ends
"""


class Report(Site):
    def get(self, handler):
        if handler.path != "/report.txt":
            return super().get(handler)
        handler.send_response(200)
        handler.send_header("Content-Type", "application/octet-stream")
        handler.send_header("Content-Disposition", "attachment; filename=report.txt")
        handler.send_header("Content-Length", str(len(REPORT)))
        handler.end_headers()
        handler.wfile.write(REPORT)
        return None


def look(box, allowed_port, closed_port):
    """A process started in `box`'s session, and what it reported."""
    process = box.popen(["/usr/bin/python3", "-c", LOOK, str(allowed_port), str(closed_port)],
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    return process, json.loads(process.stdout.readline())


@can_sandbox
@needs_chromium
def test_a_process_of_the_session_sees_its_browser_and_downloads_in_its_cgroup_and_behind_its_firewall(tmp_path):
    site = Report().start()
    closed = socket.create_server(("127.0.0.1", 0))  # a port of the host's that the session is not given
    policy = sandbox_policy.SandboxPolicy(loopback_ports=((site.port, site.port),))
    box = sandbox.Sandbox(tmp_path / "sessions" / "s1", policy, memory_mb=1024).create()
    browser = process = None
    try:
        browser = Browser.start(CHROMIUM, tmp_path / "sessions" / "s1", LaunchOptions(headless=True), box=box,
                                timeout=60)
        with CdpClient(browser.devtools) as cdp:
            cdp.call("Browser.setDownloadBehavior", {"behavior": "allow",
                                                     "downloadPath": f"{machine.INSIDE_HOME}/Downloads"})
            page = open_page(cdp, f"{site.url}/")
            evaluate(cdp, page, "(() => { const link = document.createElement('a'); link.href = '/report.txt'; "
                                "document.body.append(link); link.click() })()")
            assert eventually(lambda: (box.home / "Downloads" / "report.txt").exists(), 20, interval=0.05)
        process, seen = look(box, site.port, closed.getsockname()[1])
        assert seen["uid"] == policy.ids()[0]
        assert seen["downloads"] == {"report.txt": REPORT.decode()}
        chromium = [line for line in seen["processes"] if f"--user-data-dir={machine.INSIDE_HOME}/" in line]
        assert chromium and any("--type=renderer" in line for line in chromium)  # the browser and its renderers
        assert process.pid in box.cgroup.pids()
        assert seen["allowed"] and not seen["closed"]
    finally:
        if browser is not None:
            browser.stop(grace=0)
        box.destroy()
        site.stop()
        closed.close()
    assert process.wait(timeout=10) is not None  # the session ended: its processes with it
    assert not os.path.exists(f"/proc/{process.pid}")
    process.stdin.close()
    process.stdout.close()


@can_sandbox
def test_two_sessions_processes_see_neither_each_others_files_nor_processes(tmp_path):
    boxes, started = [], []
    try:
        for name in ("s1", "s2"):  # each made inside the try: a second that fails leaves no first behind
            boxes.append(sandbox.Sandbox(tmp_path / "sessions" / name, sandbox_policy.SandboxPolicy(),
                                         memory_mb=64).create())
        for number, box in enumerate(boxes):
            started.append(box.popen(["/bin/sh", "-c", f"mkdir ~/Downloads; echo {number} > ~/Downloads/mine; "
                                      f"echo {number} > /tmp/mine; echo ready; exec sleep 300{number}"],
                                     stdout=subprocess.PIPE, text=True))
        assert [process.stdout.readline() for process in started] == ["ready\n", "ready\n"]
        seen = []
        for box in boxes:
            reader = box.popen(["/bin/sh", "-c", "cat ~/Downloads/* /tmp/mine; ps -eo args"], stdout=subprocess.PIPE,
                               text=True)
            seen.append(reader.communicate(timeout=30)[0])
    finally:
        for box in boxes:
            box.destroy()
        for process in started:
            process.wait(timeout=10)
            process.stdout.close()
    first, second = (text.splitlines() for text in seen)
    assert first[:2] == ["0", "0"] and "sleep 3000" in first and "sleep 3001" not in first
    assert second[:2] == ["1", "1"] and "sleep 3001" in second and "sleep 3000" not in second


@can_sandbox
@needs_chromium
def test_a_browser_started_again_in_the_machine_starts_on_a_new_profile_and_display_with_the_files_kept(tmp_path):
    """The machine outlives its browser (a restart for a new viewport): what the first left in the shared /tmp and
    home (its display's lock and socket, its profile's lock naming a pid of the shared namespace) stops no second
    one, and the session's files stay."""
    workdir = tmp_path / "sessions" / "s1"
    box = sandbox.Sandbox(workdir, sandbox_policy.SandboxPolicy(), memory_mb=1024).create()
    try:
        for number in range(2):
            browser = Browser.start(CHROMIUM, workdir, LaunchOptions(headless=False, viewport=(800, 600)), box=box,
                                    timeout=60)
            try:
                with CdpClient(browser.devtools) as cdp:
                    page = open_page(cdp, "about:blank")
                    assert evaluate(cdp, page, "innerWidth") == 800
                assert (box.machine.tmp / ".X11-unix" / "X99").exists()
                (box.home / f"kept{number}").write_text("x")
            finally:
                browser.stop(grace=0)
            assert box.machine.holder.poll() is None  # the machine stays
            assert set(box.cgroup.pids()) >= box.cgroup.kept
        assert sorted(path.name for path in box.home.glob("kept*")) == ["kept0", "kept1"]
    finally:
        box.destroy()


@can_sandbox
def test_a_process_joining_the_machine_has_no_capabilities_and_no_new_privileges(tmp_path):
    """Joined with bubblewrap's --userns/--pidns, a process keeps what bubblewrap gave each process before: no
    capability, an empty bounding set (a nested user namespace's process would keep a full one), no_new_privs."""
    box = sandbox.Sandbox(tmp_path / "sessions" / "s1", sandbox_policy.SandboxPolicy(), memory_mb=64).create()
    try:
        reader = box.popen(["/bin/sh", "-c", "cat /proc/self/status; readlink /proc/self/ns/user /proc/self/ns/pid"],
                           stdout=subprocess.PIPE, text=True)
        lines = reader.communicate(timeout=30)[0].splitlines()
        inside = next(pid for pid in box.cgroup.kept  # the holder's init or its sleep, not its outer bubblewrap
                      if os.readlink(f"/proc/{pid}/ns/pid") != os.readlink("/proc/self/ns/pid"))
        namespaces = [os.readlink(f"/proc/{inside}/ns/user"), os.readlink(f"/proc/{inside}/ns/pid")]
    finally:
        box.destroy()
    status = dict(line.split(":\t", 1) for line in lines if ":\t" in line)
    assert {name: status[name] for name in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")} == dict.fromkeys(
        ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"), "0000000000000000")
    assert status["NoNewPrivs"] == "1" and status["Uid"].split()[0] == str(sandbox_policy.SandboxPolicy().ids()[0])
    assert lines[-2:] == namespaces  # the machine's user and pid namespaces
