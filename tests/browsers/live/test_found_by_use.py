"""Defects found by using Lantern (#26) that need a real browser: a stream open when its session idles
out, and the default viewport."""
import threading
import time

import pytest
from playwright.sync_api import sync_playwright

from tests.browsers.live.test_real_browsers import first_page
from tests.waiting import eventually


def test_streams_open_when_the_session_idles_out_end_cleanly_and_the_browser_stops_at_once(lantern, sdk):
    created = sdk.browsers.create(headless=True, timeout_seconds=2)
    host = lantern.hosts[0]
    assert created.session_id in host.health()["sessions"]
    lines, errors = [], []

    def read_logs():
        try:
            lines.extend(sdk.browsers.logs.stream(created.session_id, source="supervisor",
                                                  supervisor_process="browser-host"))
        except Exception as error:  # noqa: BLE001 - what the SDK raises is the failure
            errors.append(error)

    reader = threading.Thread(target=read_logs)
    reader.start()
    began = time.monotonic()
    events = list(sdk.browsers.telemetry.stream(created.session_id, replay="all"))  # ends by itself, no error
    reader.join(timeout=30)
    assert not reader.is_alive() and errors == []
    assert 1 < time.monotonic() - began < 30
    assert lines and all(envelope.event.type for envelope in events)
    assert sdk.browsers.retrieve(created.session_id, include_deleted=True).end_reason == "timeout"
    # Stopped by whoever noticed the timeout (a stream, or a worker's idle sweep whose stop may still be
    # tearing the sandbox down), not a minute later by the host's sweep of ended sessions.
    assert eventually(lambda: created.session_id not in host.health()["sessions"], 10, interval=0.1)


@pytest.mark.parametrize("headless", [True, False])
def test_without_a_viewport_pages_measure_what_the_record_says(sdk, headless):
    created = sdk.browsers.create(headless=headless)
    with sync_playwright() as playwright:
        browser = playwright.chromium.connect_over_cdp(created.cdp_ws_url)
        page = first_page(browser)
        measured = page.evaluate("[innerWidth, innerHeight]")
        browser.close()
    assert measured == [created.viewport.width, created.viewport.height] == [1920, 1080]
