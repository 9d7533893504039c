"""Telemetry and logs captured by the host from the real browser, read through Lantern (#13)."""
import os
import re
import signal
import threading
import time
from pathlib import Path

import httpx
import kernel
from playwright.sync_api import sync_playwright

from browserhost.cdp import CdpClient
from tests.browserhost.test_capture import App
from tests.browsers.live.conftest import browser_pid
from tests.browsers.live.test_real_browsers import first_page
from tests.waiting import eventually

ON = {"enabled": True, "browser": {name: {"enabled": True} for name in ("console", "network", "page", "interaction")}}


def archived(sdk, session_id, **filters):
    return list(sdk.browsers.telemetry.events(session_id, since="1h", limit=100, **filters))


def wait_for_types(sdk, session_id, want, timeout=15):
    """The archive once every type in `want` is there (the host writes in batches), or as it is at `timeout`."""
    eventually(lambda: want <= {e.event.type for e in archived(sdk, session_id)}, timeout, interval=0.2)
    return archived(sdk, session_id)


def wait_for_console(sdk, session_id, text, timeout=15):
    """The archived console_log whose text is `text`, or None after `timeout` seconds."""
    return eventually(lambda: next((e for e in archived(sdk, session_id)
                                    if e.event.type == "console_log" and e.event.data.text == text), None),
                      timeout, interval=0.2)


def response_statuses(envelopes):
    """The statuses of the test page's two fetches."""
    return {e.event.data.status for e in envelopes
            if e.event.type == "network_response" and e.event.data.url.endswith(("/ok.json", "/missing"))}


def test_what_the_page_did_reaches_the_archive_the_stream_and_the_log(lantern, sdk):
    site = App().start()
    try:
        created = sdk.browsers.create(headless=True, telemetry=ON)
        seen = []
        stream = sdk.browsers.telemetry.stream(created.session_id)
        reader = threading.Thread(target=lambda: seen.extend(e.event.type for e in stream), daemon=True)
        reader.start()
        with sync_playwright() as playwright:
            browser = playwright.chromium.connect_over_cdp(created.cdp_ws_url)
            context = browser.contexts[0]
            page = context.pages[0] if context.pages else context.new_page()
            page.goto(f"{site.url}/app")
            page.click("#go")
            want = {"console_log", "console_error", "network_request", "network_response", "page_navigation",
                    "page_load", "interaction_click", "cdp_connect"}
            envelopes = wait_for_types(sdk, created.session_id, want)
            assert want <= {e.event.type for e in envelopes}
            # The two responses may come in different batches.
            both = eventually(lambda: response_statuses(archived(sdk, created.session_id)) == {200, 404}, 10,
                              interval=0.2)
            assert both, response_statuses(archived(sdk, created.session_id))

            # Console off: the capture stops producing console events within a second.
            sdk.browsers.update(created.session_id, telemetry={"browser": {"console": {"enabled": False}}})
            time.sleep(1.5)
            newest = max(e.seq for e in archived(sdk, created.session_id))
            page.evaluate("console.log('not captured')")
            page.goto(f"{site.url}/after")
            loaded = eventually(lambda: any(e.seq > newest and e.event.type == "page_load"
                                            for e in archived(sdk, created.session_id)), 10, interval=0.2)
            assert loaded, "the second page's load never arrived"
            later = archived(sdk, created.session_id)
            assert not [e for e in later if e.seq > newest and e.event.category == "console"]

            # And on again: captured again within a second.
            sdk.browsers.update(created.session_id, telemetry={"browser": {"console": {"enabled": True}}})
            time.sleep(1.5)
            page.evaluate("console.log('captured again')")
            again = wait_for_console(sdk, created.session_id, "captured again")
            assert again is not None and again.seq > newest
        sdk.browsers.delete_by_id(created.session_id)  # ends the stream
        reader.join(timeout=15)
        assert {"console_log", "network_response"} <= set(seen)  # the live stream saw them too
        lines = [line.message for line in sdk.browsers.logs.stream(
            created.session_id, source="supervisor", supervisor_process="chromium", follow=False)]
        assert lines, "Chromium's own output is served as the chromium log"
        assert not [line for line in lines if "dbus" in line or "socat" in line], "no noise that means nothing"
    finally:
        site.stop()


def test_a_crashed_page_and_a_killed_browser_are_reported_and_the_record_says_how_it_ended(lantern, sdk, site):
    created = sdk.browsers.create(headless=True, telemetry={"enabled": True, "browser": {"page": {"enabled": True}}})
    with sync_playwright() as playwright:
        browser = playwright.chromium.connect_over_cdp(created.cdp_ws_url)
        context = browser.contexts[0]
        page = context.new_page()
        page.goto(f"{site.url}/")
        # The capture has set the page up once its load is archived (Inspector.enable goes before
        # Page.enable); a crash before that would be the capture's documented loss, not a defect.
        target = context.new_cdp_session(page).send("Target.getTargetInfo")["targetInfo"]["targetId"]
        assert eventually(lambda: any(e.event.type == "page_load" and e.event.data.target_id == target
                                      for e in archived(sdk, created.session_id)), 15, interval=0.2)
        # Page.crash is never answered (the renderer is gone), and Playwright would wait for that
        # answer forever; so send it from a CDP client of our own that waits for the crash itself
        # instead: closing at once could detach its session before the renderer took the command.
        with CdpClient(created.cdp_ws_url) as cdp:
            attached = cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True})
            gone = threading.Event()
            cdp.on("Inspector.targetCrashed", lambda _params, _session: gone.set())
            cdp.call("Inspector.enable", session_id=attached["sessionId"])
            cdp.send("Page.crash", session_id=attached["sessionId"])
            assert gone.wait(15), "the renderer did not crash"
        crashed = wait_for_types(sdk, created.session_id, {"page_crashed"})
        assert [e.event.data.url for e in crashed if e.event.type == "page_crashed"] == [f"{site.url}/"]

        chromium = browser_pid(sdk, created.session_id)
        os.kill(chromium, signal.SIGKILL)
    ended = eventually(lambda: sdk.browsers.retrieve(created.session_id, include_deleted=True).deleted_at, 15,
                       interval=0.2)
    assert ended, "the session outlived its browser"
    assert sdk.browsers.retrieve(created.session_id, include_deleted=True).end_reason == "browser_exited"
    system = [e.event for e in archived(sdk, created.session_id, category=["system"])]
    assert [(e.type, e.data.service_name, e.data.pid, e.source.metadata) for e in system] == [
        ("service_crashed", "chromium", chromium, {"signal": "SIGKILL"})]
    host_lines = [line.message for line in sdk.browsers.logs.stream(
        created.session_id, source="supervisor", supervisor_process="browser-host", follow=False)]
    assert host_lines[0].startswith("Chromium started on browser host first: pid ")
    assert f"Chromium (pid {chromium}) was killed by SIGKILL; the session ends" in host_lines
    assert any(line.startswith("CDP client ") and line.endswith(" connected") for line in host_lines)


def test_200_readers_of_a_real_session_receive_every_event_in_order(lantern, sdk):
    readers, count = 200, 50
    created = sdk.browsers.create(headless=True, telemetry=ON)
    # The SDK's default pool holds 100 connections; each open stream keeps one.
    wide = lantern.client(http_client=kernel.DefaultHttpxClient(limits=httpx.Limits(max_connections=readers)))
    streams = [wide.browsers.telemetry.stream(created.session_id, type=["console_log"]) for _ in range(readers)]
    received = [[] for _ in range(readers)]

    def read(stream, into):
        for envelope in stream:
            into.append((envelope.seq, envelope.event.data.text))
            if len(into) == count:
                return

    threads = [threading.Thread(target=read, args=pair, daemon=True) for pair in zip(streams, received, strict=True)]
    for thread in threads:
        thread.start()
    with sync_playwright() as playwright:
        page = first_page(playwright.chromium.connect_over_cdp(created.cdp_ws_url))
        page.evaluate(f"for (let i = 0; i < {count}; i++) console.log(`line ${{i}}`)")
        for thread in threads:
            thread.join(timeout=30)
    for stream in streams:
        stream.close()
    wide.close()
    expected = [f"line {i}" for i in range(count)]
    for got in received:
        assert [text for _, text in got] == expected
        assert [seq for seq, _ in got] == sorted({seq for seq, _ in got})
    assert len({tuple(got) for got in received}) == 1  # the same seqs for everyone


def start_page_loads(sdk, url, headless):
    """The page_load events of `url` in a new session started on it: (the archive's, the stream's)."""
    created = sdk.browsers.create(headless=headless, start_url=url,
                                  telemetry={"enabled": True, "browser": {"page": {"enabled": True}}})
    streamed = []
    stream = sdk.browsers.telemetry.stream(created.session_id, replay="all", type=["page_load"])
    reader = threading.Thread(target=lambda: streamed.extend(e.event.data.url for e in stream), daemon=True)
    reader.start()
    loaded = eventually(lambda: [e.event.data.url for e in archived(sdk, created.session_id, type=["page_load"])
                                 if e.event.data.url == url], 15, interval=0.2)
    eventually(lambda: url in streamed, 10, interval=0.1)
    sdk.browsers.delete_by_id(created.session_id)  # ends the stream
    reader.join(timeout=15)
    return loaded, [each for each in streamed if each == url]


def test_the_start_page_is_captured_in_every_session(lantern, sdk, site):
    """#34 item 5: the start page loads only once the capture is attached to its tab, so its page_* events
    reach the archive and the stream every time (headless and headful)."""
    for attempt in range(10):
        url = f"{site.url}/start-{attempt}"
        loaded, streamed = start_page_loads(sdk, url, headless=attempt % 2 == 0)
        assert loaded == [url], f"session {attempt}: the start page's load is not in the archive"
        assert streamed == [url], f"session {attempt}: the start page's load never came on the stream"


def memory_kb(pid, field):
    """A line of /proc/<pid>/status in kB: VmRSS (now) or VmHWM (the peak since the last reset_peak)."""
    return int(re.search(rf"^{field}:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text(), re.M).group(1))


def reset_peak(pid):
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM starts again from VmRSS


# Chromium takes about 10 s per 100 MB to serialise and send such a message to each CDP client.
HUGE_LOGS = "const huge = 'x'.repeat(200 * 1024 * 1024); console.log(huge); console.log('after'); huge.length"


def test_a_page_logging_huge_strings_leaves_the_hosts_memory_bounded(lantern, sdk, site):
    """#34 item 12: a CDP message past BROWSER_CAPTURE_MAX_MESSAGE_MB (16) is skipped while read and counted
    as dropped: the host's RSS stays under its idle RSS + 100 MB, and later events still arrive."""
    host = lantern.hosts[0].process.pid
    created = sdk.browsers.create(headless=True, memory="4GiB", start_url=f"{site.url}/quiet", telemetry={
        "enabled": True, "browser": {name: {"enabled": True} for name in ("console", "page")}})
    assert wait_for_types(sdk, created.session_id, {"page_load"})  # the capture has set the page up
    idle = memory_kb(host, "VmRSS")
    reset_peak(host)
    with CdpClient(created.cdp_ws_url, timeout=120) as cdp:  # no Runtime.enable: it gets no console events
        page = next(t for t in cdp.call("Target.getTargets")["targetInfos"] if t["type"] == "page")["targetId"]
        session = cdp.call("Target.attachToTarget", {"targetId": page, "flatten": True})["sessionId"]
        logged = cdp.call("Runtime.evaluate", {"expression": HUGE_LOGS, "returnByValue": True}, session_id=session)
    assert logged["result"]["value"] == 200 * 1024 * 1024
    after = wait_for_console(sdk, created.session_id, "after", timeout=30)
    peak = memory_kb(host, "VmHWM")

    assert after is not None, "the session's capture stopped after the huge messages"
    assert peak < idle + 100 * 1024, f"the host's RSS went from {idle} kB to {peak} kB"
    texts = [e.event.data.text for e in archived(sdk, created.session_id, category=["console"])]
    assert texts == ["after"]
    dropped = eventually(lambda: [line.message for line in sdk.browsers.logs.stream(
        created.session_id, source="supervisor", supervisor_process="browser-host", follow=False)
        if "events dropped so far" in line.message], 25, interval=0.5)  # a report at most every 10 s
    assert dropped and "1 events dropped so far" in dropped[-1], dropped
