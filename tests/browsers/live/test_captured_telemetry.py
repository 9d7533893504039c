"""Telemetry and logs captured by the host from the real browser, read through Lantern (#13)."""
import threading
import time

from playwright.sync_api import sync_playwright

from tests.browsers.host.test_capture import App

ON = {"enabled": True, "browser": {name: {"enabled": True} for name in ("console", "network", "page", "interaction")}}


def archived(sdk, session_id):
    return list(sdk.browsers.telemetry.events(session_id, since="1h", limit=100))


def wait_for_types(sdk, session_id, want, timeout=15):
    """The archive once every type in `want` is there (the host writes in batches)."""
    deadline = time.monotonic() + timeout
    while True:
        envelopes = archived(sdk, session_id)
        if want <= {e.event.type for e in envelopes} or time.monotonic() > deadline:
            return envelopes
        time.sleep(0.2)


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
            statuses = {e.event.data.status for e in envelopes if e.event.type == "network_response"
                        and e.event.data.url.endswith(("/ok.json", "/missing"))}
            assert statuses == {200, 404}

            # Console off: the capture stops producing console events within a second.
            sdk.browsers.update(created.session_id, telemetry={"browser": {"console": {"enabled": False}}})
            time.sleep(1.5)
            newest = max(e.seq for e in archived(sdk, created.session_id))
            page.evaluate("console.log('not captured')")
            page.goto(f"{site.url}/after")
            later = wait_for_types(sdk, created.session_id, set(), timeout=0)
            deadline = time.monotonic() + 10
            while not any(e.seq > newest and e.event.type == "page_load" for e in later):
                assert time.monotonic() < deadline, "the second page's load never arrived"
                time.sleep(0.2)
                later = archived(sdk, created.session_id)
            assert not [e for e in later if e.seq > newest and e.event.category == "console"]
        sdk.browsers.delete_by_id(created.session_id)  # ends the stream
        reader.join(timeout=15)
        assert {"console_log", "network_response"} <= set(seen)  # the live stream saw them too
        lines = [line.message for line in sdk.browsers.logs.stream(
            created.session_id, source="supervisor", supervisor_process="chromium", follow=False)]
        assert lines, "Chromium's own output is served as the chromium log"
    finally:
        site.stop()
