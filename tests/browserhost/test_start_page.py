"""A session's start page (#34 item 5) is opened within the start's deadline: by the capture once it has set the
first tab up, else over a connection of the host's own (its log saying so); never dropped."""
import pytest

from browserhost.capture import Capture
from browserhost.cdp import CdpClient
from tests.browserhost.helpers import needs_chromium, unsandboxed_host
from tests.waiting import eventually


@pytest.fixture
def host(tmp_path, monkeypatch):
    """A host without sandboxes; what it notes in its sessions' logs is in `host.notes`."""
    server = unsandboxed_host(tmp_path, monkeypatch)
    server.notes = []
    monkeypatch.setattr(server.reports, "logs", lambda session_id, source, process, lines: server.notes.extend(
        line["message"] for line in lines))
    yield server
    for session_id in list(server.registry.hosted):
        server.registry.stop_browser(session_id, save=False, reason=None)


def pages(hosted):
    with CdpClient(hosted.browser.devtools) as cdp:
        return [info["url"] for info in cdp.call("Target.getTargets")["targetInfos"] if info["type"] == "page"]


@needs_chromium
def test_the_capture_waits_for_the_first_tab_within_the_starts_deadline(host, site, monkeypatch):
    waits = []
    load_start_page = Capture.load_start_page

    def timed(capture, url, timeout=10.0):
        waits.append(timeout)
        return load_start_page(capture, url, timeout)

    monkeypatch.setattr(Capture, "load_start_page", timed)
    url = f"{site.url}/start"
    status, answer = host.starts.start_browser({"session_id": "s1", "headless": True, "start_url": url,
                                         "start_seconds": 9.5})
    assert status == 201, answer
    assert len(waits) == 1 and 0 < waits[0] <= 9.5  # the time left of the start, not a wait of its own
    assert eventually(lambda: pages(host.registry.hosted["s1"]) == [url], 10, interval=0.1)


@needs_chromium
def test_a_start_page_the_capture_cannot_open_is_opened_all_the_same_and_the_sessions_log_says_so(
        host, site, monkeypatch):
    monkeypatch.setattr(Capture, "load_start_page", lambda capture, url, timeout=10.0: False)
    url = f"{site.url}/start"
    status, answer = host.starts.start_browser({"session_id": "s1", "headless": True, "start_url": url})
    assert status == 201, answer
    assert eventually(lambda: pages(host.registry.hosted["s1"]) == [url], 10, interval=0.1)
    assert [note for note in host.notes if "start page was opened without the telemetry capture" in note]
