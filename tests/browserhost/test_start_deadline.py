"""A start on a busy machine has a deadline (#34 item 14): the app gives its BROWSER_HOST_START_SECONDS, and a
Chromium that has not answered by then is ended with its whole start, the host answering 503 and why."""
import os

from browserhost import unsandboxed
from tests.browserhost.helpers import CHROMIUM, host_server, needs_chromium


@needs_chromium
def test_a_start_past_its_deadline_is_ended_and_answered_503_saying_why(tmp_path, monkeypatch):
    server = host_server(tmp_path, BROWSER_SANDBOX="off")
    server.starts.binary = CHROMIUM
    monkeypatch.setattr(server.registry, "watch", lambda hosted: None)
    workdir = tmp_path / "sessions" / "s1"
    status, answer = server.starts.start_browser({"session_id": "s1", "headless": True, "start_seconds": 0.001})
    assert (status, answer["code"]) == (503, "browser_host_busy")
    assert "within the start deadline (0.001 s)" in answer["message"] and "busy" in answer["message"]
    assert "s1" not in server.registry.hosted and not workdir.exists()
    assert not [pid for pid in os.listdir("/proc") if pid.isdigit() and str(workdir) in unsandboxed.cmdline(int(pid))]
