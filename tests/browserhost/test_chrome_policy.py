"""A session's Chrome policies on its browser host (#35 item 1): the managed policy file its sandbox's Chromium
reads, and the host that has no sandbox to put one in. Chromium under the policies:
tests/browsers/live/test_chrome_policy.py."""
import json
import os
import subprocess
from pathlib import Path

from browserhost import machine, sandbox, sandbox_policy
from browserhost.cdp import CdpClient
from browserhost.launch import Browser
from browserhost.launch_options import LaunchOptions
from tests.browserhost.helpers import CHROMIUM, Site, evaluate, host_server, needs_chromium, open_page
from tests.browserhost.test_sandbox import can_sandbox
from tests.waiting import eventually

POLICY = {"URLBlocklist": ["*"], "URLAllowlist": ["example.test"], "DefaultPopupsSetting": 1, "HomepageLocation":
          "https://example.test/\U0001f600"}


@can_sandbox
def test_the_sandboxs_chromium_reads_the_policies_as_a_file_it_cannot_change_whatever_the_hosts_umask(tmp_path):
    box = sandbox.Sandbox(tmp_path / "sessions" / "s1", sandbox_policy.SandboxPolicy(), memory_mb=64).create()
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
    # In UTF-8, as the app counts it against the cap: escaped to ASCII, 4 MiB of emoji took 12.6 MB.
    assert policies.encode() == json.dumps(POLICY, separators=(",", ":"), ensure_ascii=False).encode()


def test_no_policies_no_file():
    box = sandbox.Sandbox("/nonexistent/sessions/s1", sandbox_policy.SandboxPolicy(), memory_mb=64)
    assert box.chrome_policy_binds(None) == [] and box.chrome_policy_binds({}) == []


def test_a_host_without_a_sandbox_refuses_policies_and_says_why(tmp_path):
    server = host_server(tmp_path, BROWSER_SANDBOX="off")
    server.starts.binary = "/usr/lib/chromium/chromium"  # never run: refused before
    status, answer = server.starts.start_browser({"session_id": "s1", "headless": True, "chrome_policy": POLICY})
    assert status == 400 and "BROWSER_SANDBOX=off" in answer["message"] and "s1" not in server.registry.hosted


APPLICATIONS = "/home/session/.local/share/applications"
# What a page downloads into the folder that names programs: the mimeapps.list that has evil.desktop open text
# files, evil.desktop running ran.sh, and a text file.
DOWNLOADS = {
    "mimeapps.list": b"[Default Applications]\ntext/plain=evil.desktop\nx-scheme-handler/evil=evil.desktop\n",
    "evil.desktop": f"[Desktop Entry]\nType=Application\nName=evil\nExec=/bin/sh {APPLICATIONS}/ran.sh %u\n"
                    "MimeType=text/plain;\n".encode(),
    "ran.sh": f"echo \"$*\" > {machine.INSIDE_RUN}/ran\n".encode(),
    "a.txt": b"hello\n",
}
# The app refuses these (AutoOpen*, app/browsers/chrome_policy.py); the host is given them here to show that even
# so nothing runs: Chromium opens a.txt, with xdg-open, as soon as it is downloaded.
OPENING = {"DownloadDirectory": APPLICATIONS, "AutoOpenFileTypes": ["txt"], "AutoOpenAllowedForURLs": ["*"],
           "DefaultAutomaticDownloadsSetting": 1}


class Downloads(Site):
    def get(self, handler):
        name = handler.path.strip("/")
        if name not in DOWNLOADS:
            return super().get(handler)
        handler.send_response(200)
        handler.send_header("Content-Type", "application/octet-stream")
        handler.send_header("Content-Disposition", f"attachment; filename={name}")
        handler.send_header("Content-Length", str(len(DOWNLOADS[name])))
        handler.end_headers()
        handler.wfile.write(DOWNLOADS[name])
        return None


@can_sandbox
@needs_chromium
def test_a_download_chromium_opens_runs_no_program_the_session_named(tmp_path):
    """#35 review: a headful session's Chromium opened a.txt with xdg-open, which ran the program that the
    downloaded mimeapps.list and evil.desktop named, as the sandbox's user beside the browser's DevTools. Inside,
    xdg-open is /usr/bin/false: nothing runs, and the browser goes on."""
    site = Downloads().start()
    policy = sandbox_policy.SandboxPolicy(loopback_ports=((site.port, site.port),))
    box = sandbox.Sandbox(tmp_path / "sessions" / "s1", policy, memory_mb=1024).create()
    browser = None
    try:
        browser = Browser.start(CHROMIUM, tmp_path / "sessions" / "s1", LaunchOptions(
            headless=False, viewport=(800, 600), chrome_policy=OPENING), box=box, timeout=60)
        folder = Path(f"/proc/{browser.pid}/root{APPLICATIONS}")
        # The downloads are left to Chromium: Browser.setDownloadBehavior, even "default", keeps it from opening them.
        with CdpClient(browser.devtools) as cdp:
            page = open_page(cdp, f"{site.url}/")
            for name in DOWNLOADS:  # Chromium writes each under a temporary name first
                evaluate(cdp, page, f"(() => {{ const link = document.createElement('a'); link.href = '/{name}'; "
                                    "document.body.append(link); link.click() })()")
                assert eventually(lambda name=name: (folder / name).exists(), 20, interval=0.05), name
            ran = eventually(lambda: (box.run / "ran").exists(), 5, interval=0.1)
            downloaded = sorted(os.listdir(folder))
            answers = evaluate(cdp, page, "document.body.textContent.trim()")
    finally:
        if browser is not None:
            browser.stop(grace=0)
        box.destroy()
        site.stop()
    assert downloaded == sorted(DOWNLOADS) and not ran
    assert answers == "hello"
