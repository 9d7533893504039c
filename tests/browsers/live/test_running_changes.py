"""Kiosk sessions and changes to a running browser (#35 items 2, 3, 4) through the official SDK on real Chromium:
Kernel's documented examples (`kiosk_mode=True`, `browsers.update(viewport=...)`, `browsers.update(profile=...)`)."""
import subprocess

import kernel
import pytest
from playwright.sync_api import sync_playwright

from tests.browsers.live.conftest import sandbox_of
from tests.browsers.live.test_computer import png_size, probe_video, video_began
from tests.waiting import eventually

BLUE = (0, 128, 255)
WINDOW = "[innerWidth, innerHeight, outerWidth - innerWidth, outerHeight - innerHeight, location.pathname]"


def first_page(browser):
    context = browser.contexts[0]
    return context.pages[0] if context.pages else context.new_page()


def top_rows(png, rows, width=None):
    """The RGB pixels of the first `rows` rows of a PNG (decoded by Debian's ffmpeg), as a set; of its first
    `width` columns when given."""
    full = png_size(png)[0]
    raw = subprocess.run(["ffmpeg", "-loglevel", "error", "-f", "png_pipe", "-i", "pipe:0", "-f", "rawvideo",
                          "-pix_fmt", "rgb24", "pipe:1"], input=png, capture_output=True, check=True).stdout
    lines = [raw[row * full * 3:(row * full + (width or full)) * 3] for row in range(rows)]
    return {tuple(line[i:i + 3]) for line in lines for i in range(0, len(line), 3)}


def whole_screen(lantern, session_id, size):
    """A PNG of a headful session's whole X screen (not only its page, as the computer API's): grabbed from its
    sandbox's network namespace, where its display listens."""
    box = sandbox_of(lantern, session_id)
    return subprocess.run(["ip", "netns", "exec", box.name, "ffmpeg", "-loglevel", "error", "-f", "x11grab",
                           "-draw_mouse", "0", "-video_size", f"{size[0]}x{size[1]}", "-i", ":99", "-frames:v", "1",
                           "-f", "image2pipe", "-vcodec", "png", "-"], capture_output=True, check=True,
                          timeout=30).stdout


def test_a_kiosk_shows_the_page_alone_and_takes_a_new_size_by_starting_again_when_forced(lantern, sdk, site):
    created = sdk.browsers.create(headless=False, kiosk_mode=True, viewport={"width": 1024, "height": 768})
    assert created.kiosk_mode is True
    computer = sdk.browsers.computer
    computer.set_cursor_visibility(created.session_id, hidden=True)
    with sync_playwright() as playwright:
        page = first_page(playwright.chromium.connect_over_cdp(created.cdp_ws_url))
        page.goto(f"{site.url}/kiosk")
        page.evaluate("document.body.style.cssText = 'margin: 0; background: rgb(0, 128, 255)'; "
                      "document.cookie = 'sid=s3cr3t; max-age=3600; path=/'")
        # No tab strip or toolbar: the window is the page, in the screen's corner.
        assert page.evaluate(WINDOW) == [1024, 768, 0, 0, "/kiosk"]
        assert page.evaluate("[screenX, screenY]") == [0, 0]
    # Its screen (one pixel wider and higher than the window) is the page from its first row: no tab strip,
    # address bar or frame. (The display shows the new colour a frame or two after the page has it.)
    assert eventually(lambda: top_rows(whole_screen(lantern, created.session_id, (1025, 769)), 10, 1024) == {BLUE},
                      10, interval=0.2)
    screenshot = computer.capture_screenshot(created.session_id).read()
    assert png_size(screenshot) == (1024, 768) and top_rows(screenshot, 10) == {BLUE}

    # A kiosk's screen is its viewport: a new one needs its browser started again, which only force allows.
    with pytest.raises(kernel.ConflictError) as refused:
        sdk.browsers.update(created.session_id, viewport={"width": 1280, "height": 800})
    assert refused.value.body["code"] == "viewport_needs_restart"
    assert refused.value.response.headers["x-should-retry"] == "false"
    assert sdk.browsers.retrieve(created.session_id).viewport.width == 1024

    updated = sdk.browsers.update(created.session_id, viewport={"width": 1280, "height": 800, "force": True})
    assert (updated.viewport.width, updated.viewport.height) == (1280, 800)
    with sync_playwright() as playwright:
        page = first_page(playwright.chromium.connect_over_cdp(created.cdp_ws_url))
        page.wait_for_load_state()
        assert page.evaluate(WINDOW) == [1280, 800, 0, 0, "/kiosk"]  # its tab, at the new size, still a kiosk
        assert page.evaluate("document.cookie") == "sid=s3cr3t"
    assert png_size(computer.capture_screenshot(created.session_id).read()) == (1280, 800)
    sdk.browsers.delete_by_id(created.session_id)


def test_a_running_browser_takes_a_new_viewport_with_its_tab_open_and_records_it(lantern, sdk, site, tmp_path):
    created = sdk.browsers.create(headless=True)
    assert (created.viewport.width, created.viewport.height) == (1920, 1080)
    replays = sdk.browsers.replays
    with sync_playwright() as playwright:
        page = first_page(playwright.chromium.connect_over_cdp(created.cdp_ws_url))
        page.goto(f"{site.url}/kept")
        before = replays.start(created.session_id, framerate=5)
        assert video_began(lantern, created.session_id, before.replay_id)
        # A recording keeps its size: the resize is refused while it runs, unless forced.
        with pytest.raises(kernel.ConflictError) as refused:
            sdk.browsers.update(created.session_id, viewport={"width": 1024, "height": 768})
        assert refused.value.body["code"] == "replay_in_progress"

        updated = sdk.browsers.update(created.session_id, viewport={"width": 1024, "height": 768, "force": True})
        assert (updated.viewport.width, updated.viewport.height) == (1024, 768)
        # The same tab over the same connection: its page has the new size, as have pages opened after.
        assert page.evaluate(WINDOW) == [1024, 768, 0, 87, "/kept"]
        assert page.context.new_page().evaluate("[innerWidth, innerHeight]") == [1024, 768]
        assert png_size(page.screenshot()) == (1024, 768)
    assert png_size(sdk.browsers.computer.capture_screenshot(created.session_id).read()) == (1024, 768)

    old, new = replays.list(created.session_id)  # the recording went on as a new one, at the new size
    assert old.replay_id == before.replay_id and new.model_extra["status"] == "recording"
    assert video_began(lantern, created.session_id, new.replay_id)
    replays.stop(new.replay_id, id_or_name=created.session_id)
    sizes = [probe_video(replays.download(replay.replay_id, id_or_name=created.session_id).read(), tmp_path)[3:]
             for replay in (old, new)]
    assert sizes == [(1920, 1080), (1024, 768)]
    sdk.browsers.delete_by_id(created.session_id)


def test_a_profile_given_to_a_running_browser_is_saved_and_carried_into_the_next_one(sdk, site):
    profile = sdk.profiles.create(name="per-user")
    pooled = sdk.browsers.create(headless=True)  # Kernel's recipe: a browser without a profile gets a user's
    updated = sdk.browsers.update(pooled.session_id, profile={"name": profile.name, "save_changes": True})
    assert updated.profile.id == profile.id and updated.profile_save_changes is True
    with pytest.raises(kernel.ConflictError) as again:
        sdk.browsers.update(pooled.session_id, profile={"name": profile.name})
    assert again.value.body["code"] == "profile_already_loaded"
    with sync_playwright() as playwright:
        page = first_page(playwright.chromium.connect_over_cdp(pooled.cdp_ws_url))
        page.goto(f"{site.url}/login")
        page.evaluate("document.cookie = 'user=ada; max-age=3600; path=/'; localStorage.setItem('theme', 'dark')")
    sdk.browsers.delete_by_id(pooled.session_id)  # saves the profile (save_changes)

    following = sdk.browsers.create(headless=True)
    sdk.browsers.update(following.session_id, profile={"name": profile.name})
    with sync_playwright() as playwright:
        page = first_page(playwright.chromium.connect_over_cdp(following.cdp_ws_url))
        page.goto(f"{site.url}/back")
        assert page.evaluate("[document.cookie, localStorage.getItem('theme')]") == ["user=ada", "dark"]
    sdk.browsers.delete_by_id(following.session_id)
