"""A session's Chrome policies on its browser host (#35 item 1): the managed policy file its sandbox's Chromium
reads, and the host that has no sandbox to put one in. Chromium under the policies:
tests/browsers/live/test_chrome_policy.py."""
import json
import os
import subprocess

from browserhost import sandbox
from tests.browserhost.helpers import host_server
from tests.browserhost.test_sandbox import can_sandbox

POLICY = {"URLBlocklist": ["*"], "URLAllowlist": ["example.test"], "DefaultPopupsSetting": 1}


@can_sandbox
def test_the_sandboxs_chromium_reads_the_policies_as_a_file_it_cannot_change_whatever_the_hosts_umask(tmp_path):
    box = sandbox.Sandbox(tmp_path / "sessions" / "s1", sandbox.SandboxPolicy(), memory_mb=64).create()
    umask = os.umask(0o077)  # a hardened host's: the folder made 0700 left the file unreadable, so unapplied
    try:
        binds = box.chrome_policy_binds(POLICY)
    finally:
        os.umask(umask)
    try:
        inside = f"{sandbox.INSIDE_MANAGED_POLICIES}/lantern.json"
        reader = box.popen(["/bin/sh", "-c", f"cat {inside}; echo; echo x > {inside} || echo read-only"],
                           binds=binds, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        written, _ = reader.communicate(timeout=30)
    finally:
        box.destroy()
    policies, refusal = written.splitlines()
    assert json.loads(policies) == POLICY and refusal == "read-only"


def test_no_policies_no_file():
    box = sandbox.Sandbox("/nonexistent/sessions/s1", sandbox.SandboxPolicy(), memory_mb=64)
    assert box.chrome_policy_binds(None) == [] and box.chrome_policy_binds({}) == []


def test_a_host_without_a_sandbox_refuses_policies_and_says_why(tmp_path):
    server = host_server(tmp_path, BROWSER_SANDBOX="off")
    server.binary = "/usr/lib/chromium/chromium"  # never run: refused before
    status, answer = server.start_browser({"session_id": "s1", "headless": True, "chrome_policy": POLICY})
    assert status == 400 and "BROWSER_SANDBOX=off" in answer["message"] and "s1" not in server.hosted
