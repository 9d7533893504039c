"""Telemetry captured from a real Chromium (browserhost/capture/): what a page does becomes the SDK's
events, each accepted by the ingest's validation, only for the enabled categories; and the log tail."""
import signal
import threading

import pytest
from playwright.sync_api import sync_playwright

from browserhost.capture import MAX_BODY, Capture, LogTail
from browserhost.cdp import CdpError
from browserhost.launch import Browser
from browserhost.launch_options import LaunchOptions
from lantern_wire.telemetry import validate_event
from tests.browserhost.helpers import CHROMIUM, Site, evaluate, navigate, needs_chromium
from tests.waiting import eventually

pytestmark = needs_chromium

WAIT = 10  # seconds to wait for what must happen
APP = b"""<!doctype html><title>app</title><button id="go">Go</button>
<script>
console.log("hello", 42, {a: 1});
(async () => {
  await (await fetch("/ok.json")).text();
  await (await fetch("/missing")).text();
  console.warn("fetched");
  setTimeout(() => { throw new Error("boom"); }, 0);
})();
</script>"""


class App(Site):
    """The small site, plus a page that logs, fetches and throws, a JSON answer, a 404 and a redirect."""

    def get(self, handler):
        routes = {"/app": (200, APP, "text/html"), "/ok.json": (200, b'{"ok": true}', "application/json"),
                  "/missing": (404, b'{"error": "missing"}', "application/json"),
                  "/big.txt": (200, b"x" * (MAX_BODY + 10), "text/plain")}
        if handler.path in routes:
            return handler.answer(*routes[handler.path])
        if handler.path == "/hop":
            handler.send_response(302)
            handler.send_header("Location", "/ok.json")
            handler.send_header("Content-Length", "0")
            return handler.end_headers()
        super().get(handler)


@pytest.fixture(scope="module")
def site():
    site = App().start()
    yield site
    site.stop()


class Sink:
    """Collects the batches a Capture hands over; each event must pass the ingest's validation unchanged."""

    def __init__(self, max_batch=500):
        self.events = []
        self.errors = []  # the capture swallows a sink's exceptions (it counts the batch dropped)
        self.max_batch = max_batch
        self._changed = threading.Condition()

    def __call__(self, batch):
        try:
            assert 0 < len(batch) <= self.max_batch
            for event in batch:
                assert validate_event(event, now_us=1) == event, event
        except AssertionError as error:
            self.errors.append(error)
            raise
        with self._changed:
            self.events.extend(batch)
            self._changed.notify_all()

    def wait_for(self, match):
        """The first event matching, once there (AssertionError after WAIT seconds)."""
        with self._changed:
            self._changed.wait_for(lambda: self.find(match) is not None or self.errors, WAIT)
            found = self.find(match)
        assert not self.errors, self.errors
        assert found is not None, [(event["type"], event.get("data", {}).get("url")) for event in self.events]
        return found

    def find(self, match):
        return next((event for event in self.events if match(event)), None)

    def index(self, match):
        return self.events.index(self.wait_for(match))


class Switch:
    """A session's categories as the host would read them; `set` returns once the capture has read the change."""

    def __init__(self, *names):
        self.names = set(names)
        self.reads = 0
        self._read = threading.Condition()

    def __call__(self):
        with self._read:
            self.reads += 1
            self._read.notify_all()
            return set(self.names)

    def set(self, *names):
        with self._read:
            self.names = set(names)
            # Two reads: the second starts after the first's result is in force.
            enough = self.reads + 2
            assert self._read.wait_for(lambda: self.reads >= enough, WAIT)


def of(event_type, **fields):
    """A matcher: events of `event_type` whose data has `fields` (a callable value is a predicate)."""
    def match(event):
        data = event.get("data") or {}
        return event["type"] == event_type and all(
            value(data.get(name)) if callable(value) else data.get(name) == value for name, value in fields.items())
    return match


def ends(suffix):
    return lambda value: isinstance(value, str) and value.endswith(suffix)


@pytest.fixture
def capture_of(browser):
    """Capture(browser.ws_url, ...) started, stopped after the test."""
    started = []

    def make(categories, sink, **options):
        capture = Capture(browser.ws_url, categories=categories, sink=sink, **options)
        started.append(capture)
        return capture.start()

    yield make
    for capture in started:
        capture.stop()


def new_page(cdp, capture):
    """A blank tab (its target and session ids), once `capture` has set up its own session to it."""
    target = cdp.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    assert capture.wait_for_target(target)
    return target, cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]


def test_what_a_page_does_becomes_telemetry_in_order(browser, site, capture_of):
    sink = Sink()
    capture = capture_of(Switch("console", "network", "page", "interaction"), sink)
    with sync_playwright() as playwright:
        connected = playwright.chromium.connect_over_cdp(browser.ws_url)
        page = connected.contexts[0].new_page()
        target = page.context.new_cdp_session(page).send("Target.getTargetInfo")["targetInfo"]["targetId"]
        assert capture.wait_for_target(target)
        page.goto(f"{site.url}/app")
        sink.wait_for(of("console_error", text="Uncaught Error: boom"))
        page.click("#go")
        sink.wait_for(of("interaction_click"))
        page.goto(f"{site.url}/next")
        sink.wait_for(of("page_load", url=ends("/next")))
        page.close()
        connected.close()

    hello = sink.wait_for(of("console_log", text="hello"))
    assert hello["data"]["args"] == ["hello", "42", "Object"] and hello["source"]["kind"] == "cdp"
    assert hello["data"]["stack_trace"]["callFrames"][0]["url"].endswith("/app")
    warn = sink.wait_for(of("console_log", text="fetched"))
    assert warn["data"]["level"] == "warning"
    boom = sink.wait_for(of("console_error", text="Uncaught Error: boom"))
    assert boom["data"]["source_url"].endswith("/app") and boom["data"]["line"] >= 0
    assert boom["data"]["stack_trace"]["callFrames"]
    ok = sink.wait_for(of("network_response", url=ends("/ok.json")))
    assert ok["data"]["status"] == 200 and ok["data"]["mime_type"] == "application/json"
    assert ok["data"]["body"] == '{"ok": true}' and ok["data"]["method"] == "GET"
    assert ok["data"]["headers"]["Content-Type"] == "application/json"
    missing = sink.wait_for(of("network_response", url=ends("/missing")))
    assert missing["data"]["status"] == 404 and missing["data"]["status_text"] == "Not Found"
    request = sink.wait_for(of("network_request", url=ends("/ok.json")))
    assert request["data"]["request_id"] == ok["data"]["request_id"] and request["data"]["resource_type"] == "Fetch"
    click = sink.wait_for(of("interaction_click"))
    assert (click["data"]["tag"], click["data"]["text"], click["data"]["selector"]) == ("BUTTON", "Go", "#go")
    assert click["data"]["x"] > 0 and click["data"]["y"] > 0

    for chain in ([of("page_navigation", url=ends("/app")), of("console_log", text="hello"),
                   of("network_request", url=ends("/ok.json")), of("network_response", url=ends("/ok.json"))],
                  [of("console_log", text="hello"), of("console_error", text="Uncaught Error: boom"),
                   of("interaction_click"), of("page_navigation", url=ends("/next")),
                   of("page_dom_content_loaded", url=ends("/next")), of("page_load", url=ends("/next"))]):
        positions = [sink.index(match) for match in chain]
        assert positions == sorted(positions)
    assert sink.index(of("network_request", url=ends("/missing"))) < sink.index(of("network_response",
                                                                                  url=ends("/missing")))
    assert sink.index(of("page_navigation", url=ends("/app"))) < sink.index(of("page_load", url=ends("/app")))
    # Browser UI targets and chrome:// pages are not attached: nothing of theirs comes through.
    assert not [event for event in sink.events if str(event["data"].get("url", "")).startswith("chrome")]
    assert {event["data"]["target_type"] for event in sink.events if "target_type" in event["data"]} == {"page"}


def test_a_disabled_category_yields_nothing_until_enabled_again(site, cdp, capture_of):
    sink, switch = Sink(), Switch("console", "page")
    _, session = new_page(cdp, capture_of(switch, sink))
    navigate(cdp, session, f"{site.url}/first")
    evaluate(cdp, session, "console.log('one')")
    sink.wait_for(of("console_log", text="one"))

    switch.set("page")
    evaluate(cdp, session, "console.log('two')")
    navigate(cdp, session, f"{site.url}/second")
    sink.wait_for(of("page_load", url=ends("/second")))  # read after the console call: it would be here by now
    switch.set("page", "console")
    evaluate(cdp, session, "console.log('three')")
    sink.wait_for(of("console_log", text="three"))

    assert sink.find(of("console_log", text="two")) is None
    assert not [event for event in sink.events if event["category"] not in ("console", "page")]


def test_pages_open_before_the_start_are_captured_and_bodies_bounded(site, cdp, capture_of):
    target = cdp.call("Target.createTarget", {"url": "about:blank"})["targetId"]  # open before the capture starts
    session = cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    navigate(cdp, session, f"{site.url}/before")
    evaluate(cdp, session, "console.log('old')")
    sink = Sink(max_batch=2)
    capture = capture_of(Switch("network", "console"), sink, max_batch=2)
    assert capture.wait_for_target(target)
    evaluate(cdp, session, "fetch('/big.txt').then(answer => answer.text()).then(() => console.log('new'))")
    big = sink.wait_for(of("network_response", url=ends("/big.txt")))
    assert big["truncated"] is True and big["data"]["body"] == "x" * MAX_BODY
    evaluate(cdp, session, "fetch('/hop').then(answer => answer.text())")
    hop = sink.wait_for(of("network_response", url=ends("/hop")))
    assert hop["data"]["status"] == 302 and hop["data"]["headers"]["Location"] == "/ok.json"
    redirected = sink.wait_for(of("network_request", is_redirect=True))
    assert (redirected["data"]["url"], redirected["data"]["redirect_url"]) == (f"{site.url}/ok.json", f"{site.url}/hop")
    assert sink.wait_for(of("network_response", request_id=redirected["data"]["request_id"], status=200))
    sink.wait_for(of("console_log", text="new"))
    assert sink.find(of("console_log", text="old")) is None  # Runtime.enable replays it: not news
    assert capture.captured == len(sink.events) and capture.dropped == 0


def test_a_crashed_page_yields_page_crashed(site, cdp, capture_of):
    sink = Sink()
    target, session = new_page(cdp, capture_of(Switch("page"), sink))
    navigate(cdp, session, f"{site.url}/doomed")
    cdp.send("Page.crash", session_id=session)  # answers never: the renderer is gone

    crashed = sink.wait_for(of("page_crashed", target_id=target))
    assert crashed["data"] == {"target_id": target, "target_type": "page", "url": f"{site.url}/doomed"}


def test_events_past_the_bound_are_dropped_and_counted(site, cdp, capture_of):
    release, busy = threading.Event(), threading.Event()
    sink = Sink()

    def slow_sink(batch):
        busy.set()
        release.wait(WAIT)
        sink(batch)

    reported = []
    capture = capture_of(Switch("console"), slow_sink, max_pending=5, on_drops=reported.append)
    _, session = new_page(cdp, capture)
    evaluate(cdp, session, "console.log('first')")
    assert busy.wait(WAIT)  # the flusher holds 'first' in the sink
    evaluate(cdp, session, "for (let i = 0; i < 50; i++) console.log('n' + i)")
    assert eventually(lambda: capture.dropped == 45, WAIT), capture.dropped  # n5 to n49: the queue holds 5
    release.set()
    sink.wait_for(of("console_log", text="n4"))
    capture.stop()

    assert [event["data"]["text"] for event in sink.events] == ["first", "n0", "n1", "n2", "n3", "n4"]
    assert capture.dropped == 45 and capture.captured == 6
    assert reported == [45]  # the flusher's pass after the sink let go reported the total, once


def test_a_killed_browser_and_relay_clients_yield_system_and_connection_events(tmp_path):
    browser = Browser.start(CHROMIUM, tmp_path, LaunchOptions())
    sink = Sink()
    capture = Capture(browser.ws_url, categories=Switch("system", "connection", "page"), sink=sink).start()
    try:
        capture.client_connected("c1")
        capture.client_disconnected("c1", 1234.5, 17, reason="client_close")
        browser.process.send_signal(signal.SIGKILL)
        returncode = browser.process.wait()
        capture.browser_exited(returncode, pid=browser.pid)
        sink.wait_for(of("monitor_disconnected"))
    finally:
        capture.stop()
        browser.stop(grace=0)

    crashed = sink.wait_for(of("service_crashed"))
    assert crashed["category"] == "system" and crashed["data"] == {
        "phase": "running", "service_name": "chromium", "pid": browser.pid}
    assert crashed["source"] == {"kind": "local_process", "event": "exit", "metadata": {"signal": "SIGKILL"}}
    assert sink.wait_for(of("cdp_connect"))["data"] == {"connection_id": "c1"}
    assert sink.wait_for(of("cdp_disconnect"))["data"] == {
        "connection_id": "c1", "duration_ms": 1234.5, "message_count": 17, "reason": "client_close"}
    with pytest.raises(ValueError):
        capture.client_disconnected("c2", 1.0, 0, reason="bored")


def test_a_capture_that_cannot_connect_raises_and_leaves_nothing_running():
    capture = Capture("ws://127.0.0.1:9/devtools/browser/none", categories=Switch("console"), sink=Sink())
    threads = threading.active_count()
    with pytest.raises(CdpError):
        capture.start()
    assert threading.active_count() == threads
    capture.stop()


def test_the_log_tail_follows_a_growing_file(tmp_path):
    path = tmp_path / "chromium.log"
    path.write_bytes(b"before start\n")
    lines, changed = [], threading.Condition()

    def sink(batch):
        with changed:
            lines.extend(batch)
            changed.notify_all()

    tail = LogTail(path, sink, poll_seconds=0.01, max_line=10).start()
    with open(path, "ab") as log:
        log.write(b"first line\r\nsecond ")
        log.flush()
        with changed:
            assert changed.wait_for(lambda: "first line" in lines, WAIT)
        assert "second " not in lines  # not complete yet
        log.write(b"half\n" + "é".encode() * 12 + b"\nunfinished")
    tail.stop()
    tail.stop()

    assert lines == ["before sta", "rt", "first line", "second hal", "f", "é" * 10, "éé", "unfinished"]


def test_the_log_tail_hands_on_at_most_its_bytes_and_then_keeps_the_file_empty(tmp_path):
    """A page can make Chromium log without end (a GPU error per WebGL context): neither the host's disk nor
    the app's log lines may follow it."""
    path = tmp_path / "chromium.log"
    lines = []
    tail = LogTail(path, lines.extend, poll_seconds=0.01, max_bytes=100).start()
    with open(path, "ab") as log:  # as Chromium's output is opened: appended to
        for n in range(20):
            log.write(f"line {n:02d}\n".encode())  # 8 bytes each
            log.flush()
        assert eventually(lambda: len(lines) == 14, WAIT)
        log.write(b"x" * 10_000)
        log.flush()
        assert eventually(lambda: path.stat().st_size == 0, WAIT)
    tail.stop()
    assert lines == [*(f"line {n:02d}" for n in range(12)), "line",
                     "(the log passed 100 bytes: what follows is not kept)"]


def test_cdp_sessions_of_the_capture_do_not_reach_the_page(site, cdp, capture_of):
    """The interaction script runs in an isolated world: the page sees no binding it could call."""
    _, session = new_page(cdp, capture_of(Switch("interaction"), Sink()))
    navigate(cdp, session, f"{site.url}/plain")
    assert evaluate(cdp, session, "typeof window.__lanternCapture + ' ' + typeof window.__lanternCaptureOn") == (
        "undefined undefined")


def test_scrolls_and_keys_become_interactions(site, cdp, capture_of):
    sink = Sink()
    _, session = new_page(cdp, capture_of(Switch("interaction"), sink))
    navigate(cdp, session, f"{site.url}/plain")
    evaluate(cdp, session, "document.body.innerHTML = '<input id=name><input id=pw type=password>"
                           "<div style=\"height: 5000px\"></div>'; document.getElementById('name').focus()")
    for key in ("a", "b"):
        cdp.call("Input.dispatchKeyEvent", {"type": "keyDown", "key": key, "text": key}, session_id=session)
    evaluate(cdp, session, "document.getElementById('pw').focus()")
    cdp.call("Input.dispatchKeyEvent", {"type": "keyDown", "key": "s", "text": "s"}, session_id=session)
    cdp.call("Input.dispatchMouseEvent", {"type": "mouseWheel", "x": 100, "y": 100, "deltaX": 0, "deltaY": 300},
             session_id=session)

    scroll = sink.wait_for(of("interaction_scroll_settled"))
    assert scroll["data"]["from_y"] == 0 and scroll["data"]["to_y"] > 0
    assert scroll["data"]["target_selector"] == "document"
    assert sink.wait_for(of("interaction_key", key="b"))["data"]["selector"] == "#name"
    secret = sink.wait_for(of("interaction_key", selector="#pw"))
    assert "key" not in secret["data"] and secret["data"]["tag"] == "INPUT"


def test_tabs_opened_later_are_reported(site, capture_of, cdp):
    sink = Sink()
    capture_of(Switch("page"), sink)
    target = cdp.call("Target.createTarget", {"url": f"{site.url}/tab"})["targetId"]
    opened = sink.wait_for(of("page_tab_opened", target_id=target))
    assert opened["data"]["target_type"] == "page" and opened["source"]["event"] == "Target.attachedToTarget"

