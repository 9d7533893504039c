"""Budgets of what sessions store (#34 item 13), on real browsers through a stack of their own (gunicorn and a
browser host) whose budgets are small: a session's telemetry archive (TELEMETRY_ARCHIVE_SESSION_MAX_BYTES) and a
project's recordings (REPLAY_PROJECT_MAX_BYTES)."""
import json

import kernel
import pytest
from playwright.sync_api import sync_playwright

from tests.browserhost.helpers import CHROMIUM
from tests.browsers.live.conftest import HOST_SETTINGS
from tests.live_server import browser_host, serve_with_organization
from tests.waiting import eventually

ARCHIVE_BYTES = 100_000
BUDGETS = {"LANTERN_TELEMETRY_ARCHIVE_SESSION_MAX_BYTES": str(ARCHIVE_BYTES), "LANTERN_REPLAY_PROJECT_MAX_BYTES": "1"}
CONSOLE = {"enabled": True, "browser": {"console": {"enabled": True}}}


@pytest.fixture(scope="module")
def sdk(tmp_path_factory):
    if CHROMIUM is None:
        pytest.skip("no Chromium at /usr/lib/chromium/chromium (`apt-get install chromium` on Debian)")
    workdir = tmp_path_factory.mktemp("budgets")
    env_updates = {**HOST_SETTINGS, **BUDGETS, "LANTERN_BROWSER_HOST_DIR": str(workdir / "hosts")}
    with serve_with_organization(workdir, "budgets", env_updates=env_updates) as served:
        process, _ = browser_host(served.env, workdir, "budgets", 2, app_url=served.base_url)
        client = kernel.Kernel(api_key=served.api_key, base_url=served.base_url, max_retries=2,
                               _strict_response_validation=True, timeout=60)
        try:
            yield client
        finally:
            for browser in client.browsers.list():
                client.browsers.delete_by_id(browser.session_id)
            client.close()
            process.terminate()
            process.wait(timeout=20)


def lantern_log(sdk, session_id):
    with sdk.browsers.logs.stream(session_id, source="supervisor", supervisor_process="lantern",
                                  follow=False) as lines:
        return [line.message for line in lines]


def test_past_its_archive_budget_a_pages_console_is_dropped_and_the_log_says_so_once(sdk):
    session = sdk.browsers.create(headless=True, telemetry=CONSOLE)
    with sync_playwright() as playwright:
        browser = playwright.chromium.connect_over_cdp(session.cdp_ws_url)
        page = browser.contexts[0].pages[0]
        page.evaluate("for (let i = 0; i < 300; i++) console.log(i + ' ' + 'x'.repeat(1000))")  # some 300 KB
        said = eventually(lambda: lantern_log(sdk, session.session_id), 30, interval=0.2)
        page.evaluate("for (let i = 0; i < 50; i++) console.log('later ' + i)")
        browser.close()
    assert len(said) == 1 and "TELEMETRY_ARCHIVE_SESSION_MAX_BYTES" in said[0]
    kept = [e for e in sdk.browsers.telemetry.events(session.session_id, since="1h", limit=100)
            if e.event.type == "console_log"]
    # The first ones are kept, in order and whole; none past the budget, and none of the later ones.
    assert 0 < len(kept) < 100 and [e.event.data.text.split()[0] for e in kept] == [str(n) for n in range(len(kept))]
    sizes = [len(json.dumps(e.event.model_dump(exclude_none=True), separators=(",", ":"))) for e in kept]  # as kept
    assert sum(sizes) <= ARCHIVE_BYTES
    assert lantern_log(sdk, session.session_id) == said  # once


def test_past_the_projects_recordings_budget_a_new_recording_is_refused_naming_it(sdk):
    session_id = sdk.browsers.create(headless=True).session_id
    first = sdk.browsers.replays.start(session_id, max_duration_in_seconds=1)
    assert eventually(lambda: [r for r in sdk.browsers.replays.list(session_id)
                               if r.model_extra["status"] == "saved"], 30, interval=0.1)
    with pytest.raises(kernel.PermissionDeniedError) as refused:  # a 403, which the SDK does not send again
        sdk.browsers.replays.start(session_id)
    assert refused.value.body["code"] == "replay_budget_exceeded"
    assert "REPLAY_PROJECT_MAX_BYTES" in refused.value.body["message"]
    assert [r.replay_id for r in sdk.browsers.replays.list(session_id)] == [first.replay_id]
    assert sdk.browsers.replays.download(first.replay_id, id_or_name=session_id).read()[4:8] == b"ftyp"
