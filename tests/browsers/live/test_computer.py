"""The computer API (#28) on real browsers, headless and headful, through the official SDK: what a page sees of
the clicks, keys, wheel and drags sent, screenshots of the viewport, batches that stop at the first failure,
the answers for what is off the screen or not served, and recordings of the screen (replays)."""
import base64
import json
import re
import struct
import subprocess
import time
from pathlib import Path

import httpx
import kernel
import pytest
from playwright.sync_api import expect, sync_playwright

from tests.browserhost.helpers import Site
from tests.browsers.live.conftest import host_words, sandbox_of
from tests.chromium import Browser, find_chromium
from tests.readme import examples, run
from tests.waiting import eventually

PAGE = b"""<!doctype html><title>computer</title>
<style>body { margin: 0; height: 5000px } #b { position: absolute; left: 100px; top: 100px; width: 200px;
height: 50px } #i { position: absolute; left: 100px; top: 200px; width: 300px; height: 30px }</style>
<button id=b onclick="this.textContent = 'clicked ' + event.detail">click me</button><input id=i>
<select id=s style="position: absolute; left: 800px; top: 100px; width: 200px">
""" + b"".join(b"<option>option %d</option>" % n for n in range(200)) + b"""</select>
<div style="position: absolute; left: 600px; top: 300px; width: 100px; height: 100px; background: rgb(255, 0, 128)">
</div>
<script>
window.seen = [];
for (const type of ["mousedown", "mouseup", "keydown"])
  addEventListener(type, e => seen.push([type, e.clientX, e.clientY, e.key, e.ctrlKey, e.shiftKey, e.button]));
</script>"""


@pytest.fixture(scope="module")
def page_site():
    site = Site(PAGE).start()
    yield site
    site.stop()


@pytest.fixture(params=[True, False], ids=["headless", "headful"])
def screen(request, sdk, page_site):
    """(session id, the Playwright page on the site) of a new session, headless (DevTools) and headful (its X
    display: xdotool and ffmpeg in its sandbox)."""
    created = sdk.browsers.create(headless=request.param)
    with sync_playwright() as playwright:
        browser = playwright.chromium.connect_over_cdp(created.cdp_ws_url)
        context = browser.contexts[0]
        page = context.pages[0] if context.pages else context.new_page()
        page.goto(f"{page_site.url}/")
        yield created.session_id, page
        browser.close()


# In the live view page: the colour of the screen's image at a point of the session's page (its CSS pixels), once a
# frame is shown; and a click there, sent as a person's click on the image.
PIXEL_AT = """(() => {{ const img = document.getElementById("screen"); if (!img.naturalWidth) return null;
  const canvas = document.createElement("canvas"); canvas.width = img.naturalWidth; canvas.height = img.naturalHeight;
  const context = canvas.getContext("2d"); context.drawImage(img, 0, 0);
  return Array.from(context.getImageData({x}, {y}, 1, 1).data.slice(0, 3)); }})()"""
CLICK_AT = """(() => {{ const img = document.getElementById("screen"), box = img.getBoundingClientRect();
  const at = {{clientX: box.left + {x} * box.width / img.naturalWidth,
              clientY: box.top + {y} * box.height / img.naturalHeight, bubbles: true, button: 0, detail: 1}};
  img.dispatchEvent(new MouseEvent("mousedown", at)); img.dispatchEvent(new MouseEvent("mouseup", at)); }})()"""


def png_size(data):
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_clicks_keys_and_text_reach_the_page(sdk, screen):
    session_id, page = screen
    computer = sdk.browsers.computer
    # On an X display an action's answer means the display has the input; the page handles it a moment later, as
    # it would a person's keyboard (docs/browsers.md), hence the waiting expectations.
    computer.click_mouse(session_id, x=200, y=125)
    expect(page.locator("#b")).to_have_text("clicked 1")
    time.sleep(0.6)  # past the double-click interval: on an X display, the next two clicks would make three
    computer.click_mouse(session_id, x=200, y=125, num_clicks=2)
    expect(page.locator("#b")).to_have_text("clicked 2")
    computer.click_mouse(session_id, x=250, y=215)
    computer.type_text(session_id, text="Hello, World!")
    expect(page.locator("#i")).to_have_value("Hello, World!")
    computer.press_key(session_id, keys=["ctrl+a", "BackSpace", "shift+a", "b"])
    expect(page.locator("#i")).to_have_value("Ab")
    keydowns = [event[3:6] for event in page.evaluate("seen") if event[0] == "keydown"]
    assert ["a", True, False] in keydowns  # ctrl+a: a with Ctrl (which typed nothing)
    assert ["H", False, True] in keydowns and ["A", False, True] in keydowns  # shifted: the key is the capital
    assert computer.get_mouse_position(session_id).model_dump() == {"x": 250, "y": 215}


def test_any_text_is_typed_exactly_and_what_cannot_be_typed_is_refused_before_any_of_it(sdk, screen):
    session_id, page = screen
    computer = sdk.browsers.computer
    many = "".join(chr(0x4E00 + n) for n in range(200))  # more than the display has spare keycodes
    text = "naïve café é ü ÀÉÜ Ç 日本語 😀 Ω≈ €£¥ ß Ꭰ 𝔘 " + many
    computer.click_mouse(session_id, x=250, y=215)
    computer.type_text(session_id, text=text)
    expect(page.locator("#i")).to_have_value(text)
    page.evaluate("i.value = ''")
    with pytest.raises(kernel.BadRequestError) as refused:
        computer.type_text(session_id, text="typed\x07never")
    assert "U+0007" in refused.value.body["message"]
    with pytest.raises(kernel.BadRequestError) as key:
        computer.press_key(session_id, keys=["ctrl+"])  # a modifier and nothing
    assert "'ctrl+'" in key.value.body["message"]
    computer.type_text(session_id, text="é")
    expect(page.locator("#i")).to_have_value("é")  # nothing of the refused text was typed


def test_the_wheel_scrolls_and_a_drag_goes_down_and_up_where_asked(sdk, screen):
    session_id, page = screen
    sdk.browsers.computer.scroll(session_id, x=500, y=500, delta_y=3)
    page.wait_for_function("scrollY === 360")  # 3 wheel units of 120 px, as X's wheel clicks scroll in Chromium
    page.evaluate("scrollTo(0, 0); seen.length = 0")
    sdk.browsers.computer.drag_mouse(session_id, path=[[10, 500], [100, 550], [200, 600]], steps_per_segment=3)
    page.wait_for_function("seen.some(event => event[0] === 'mouseup')")  # an X display's events come a moment later
    buttons = [event[:3] for event in page.evaluate("seen") if event[0] in ("mousedown", "mouseup")]
    assert buttons == [["mousedown", 10, 500], ["mouseup", 200, 600]]
    sdk.browsers.computer.move_mouse(session_id, x=640, y=360, smooth=True, duration_ms=200)
    assert sdk.browsers.computer.get_mouse_position(session_id).model_dump() == {"x": 640, "y": 360}
    assert sdk.browsers.computer.set_cursor_visibility(session_id, hidden=True).ok is True


def test_a_headful_wheel_scrolls_an_open_select_list_not_the_page_behind_it(sdk, page_site):
    """The display's wheel reaches what is under the mouse as a person's does (before, a headful scroll was the
    page's wheel event: it closed the <select>'s list and scrolled the page)."""
    created = sdk.browsers.create(headless=False)
    session_id, computer = created.session_id, sdk.browsers.computer
    with sync_playwright() as playwright:
        browser = playwright.chromium.connect_over_cdp(created.cdp_ws_url)
        page = browser.contexts[0].pages[0]
        page.goto(f"{page_site.url}/")
        computer.set_cursor_visibility(session_id, hidden=True)
        below = {"x": 810, "y": 140, "width": 150, "height": 300}  # where the list shows, under the select

        def shot():
            return computer.capture_screenshot(session_id, region=below).read()

        closed = shot()
        computer.click_mouse(session_id, x=900, y=110)
        opened = eventually(lambda: (lambda png: png if png != closed else None)(shot()))
        assert opened, "the list did not open"
        computer.scroll(session_id, x=880, y=300, delta_y=5)
        scrolled = eventually(lambda: (lambda png: png if png != opened else None)(shot()))
        list_moved, list_shown = scrolled is not None, scrolled not in (None, closed)
        assert list_moved and list_shown, "the list did not scroll, or it closed"
        assert page.evaluate("[scrollY, s.selectedIndex]") == [0, 0]
        computer.press_key(session_id, keys=["Escape"])
        browser.close()
    sdk.browsers.delete_by_id(session_id)


def test_kernels_docs_scroll_of_120_clicks_scrolls_that_far_and_typos_are_backspaced(sdk, screen):
    """#35 item 5: the docs' `scroll(delta_y=120)` (120 wheel clicks, 14,400 px) and newer SDKs' `typo_chance`."""
    session_id, page = screen
    computer = sdk.browsers.computer
    page.evaluate("document.body.style.height = '30000px'")
    computer.scroll(session_id, x=300, y=400, delta_x=0, delta_y=120)
    page.wait_for_function("scrollY === 14400")
    computer.scroll(session_id, x=300, y=400, delta_y=-10_000)  # the most one scroll takes: back to the top
    page.wait_for_function("scrollY === 0")
    computer.click_mouse(session_id, x=250, y=215)
    text = "Typos fixed: Hello World 42"  # 22 letters and digits: 2 or 3 typos at 0.1
    # kernel 0.131 has no typo_chance argument (newer SDKs do): sent in the body as they send it.
    computer.type_text(session_id, text=text, extra_body={"typo_chance": 0.1})
    expect(page.locator("#i")).to_have_value(text)
    backspaces = page.evaluate("seen.filter(event => event[0] === 'keydown' && event[3] === 'Backspace').length")
    assert backspaces >= 2


def test_a_session_stays_active_while_its_computer_types_past_its_timeout(sdk, page_site):
    """A person's typing can outlast a session's timeout_seconds: the call typing is the session's activity all along
    (before, the idle sweep ended the session, and its browser, under its own typing)."""
    created = sdk.browsers.create(headless=True, timeout_seconds=5)
    session_id = created.session_id
    with sync_playwright() as playwright:
        browser = playwright.chromium.connect_over_cdp(created.cdp_ws_url)
        page = browser.contexts[0].pages[0]
        page.goto(f"{page_site.url}/")
        browser.close()  # a CDP client keeps a session active by itself
    sdk.browsers.computer.click_mouse(session_id, x=250, y=215)
    text = "typed at a person's pace, word by word, for longer than the five seconds the session may idle: 10 s"
    sdk.browsers.computer.type_text(session_id, text=text, extra_body={"smooth": True})
    with sync_playwright() as playwright:
        browser = playwright.chromium.connect_over_cdp(created.cdp_ws_url)
        expect(browser.contexts[0].pages[0].locator("#i")).to_have_value(text)
        browser.close()
    sdk.browsers.delete_by_id(session_id)


def test_a_type_the_sdk_sends_again_after_giving_up_waiting_is_typed_once(lantern, page_site):
    """The SDK gives up on a call after its timeout and sends it again (x-stainless-retry-count): the host answers the
    second send from the first, still typing, instead of typing the text twice."""
    sdk = lantern.client().with_options(timeout=1.5, max_retries=1)  # gives up for good after about 3.5 s
    created = lantern.client().browsers.create(headless=True)  # a start may take longer than 1.5 s
    with sync_playwright() as playwright:
        browser = playwright.chromium.connect_over_cdp(created.cdp_ws_url)
        page = browser.contexts[0].pages[0]
        page.goto(f"{page_site.url}/")
        lantern.client().browsers.computer.click_mouse(created.session_id, x=250, y=215)
        # 6.5 s at the fastest person's pace (lantern_wire/keyboard.py), well past the SDK's second wait
        text = "typed once, however many times the SDK sends it, since the host answers a resend from the first send"
        with pytest.raises(kernel.APITimeoutError):
            sdk.browsers.computer.type_text(created.session_id, text=text, extra_body={"smooth": True})
        expect(page.locator("#i")).to_have_value(text, timeout=30_000)
        time.sleep(3)  # a second typing would have begun by now
        assert page.input_value("#i") == text
        browser.close()
    lantern.client().browsers.delete_by_id(created.session_id)


def pixel(page, png, x, y):
    """The colour at x, y of a PNG, decoded by the page's own canvas."""
    return page.evaluate("""async ([data, x, y]) => {
        const image = new Image(); image.src = "data:image/png;base64," + data; await image.decode();
        const canvas = document.createElement("canvas"); canvas.width = image.width; canvas.height = image.height;
        const context = canvas.getContext("2d"); context.drawImage(image, 0, 0);
        return Array.from(context.getImageData(x, y, 1, 1).data.slice(0, 3)); }""",
                         [base64.b64encode(png).decode(), x, y])


def test_a_screenshot_is_the_viewport_or_a_region_of_it(sdk, screen):
    session_id, page = screen
    whole = sdk.browsers.computer.capture_screenshot(session_id).read()
    assert png_size(whole) == (1920, 1080)  # the record's viewport
    assert pixel(page, whole, 650, 350) == [255, 0, 128]  # the coloured box, where the page draws it
    box = sdk.browsers.computer.capture_screenshot(session_id, region={"x": 600, "y": 300, "width": 100,
                                                                       "height": 100}).read()
    assert png_size(box) == (100, 100) and pixel(page, box, 0, 0) == pixel(page, box, 99, 99) == [255, 0, 128]
    for width, height in ((1, 1), (20, 20), (79, 79), (80, 50), (100, 40), (40, 100)):  # small ones too
        small = sdk.browsers.computer.capture_screenshot(session_id, region={"x": 600, "y": 300, "width": width,
                                                                             "height": height}).read()
        assert png_size(small) == (width, height)
        assert pixel(page, small, 0, 0) == pixel(page, small, width - 1, height - 1) == [255, 0, 128], (width, height)
    corner = sdk.browsers.computer.capture_screenshot(session_id, region={"x": 599, "y": 299, "width": 2,
                                                                          "height": 2}).read()
    assert [pixel(page, corner, 0, 0), pixel(page, corner, 1, 1)] == [[255, 255, 255], [255, 0, 128]]
    part = sdk.browsers.computer.capture_screenshot(session_id, region={"x": 100, "y": 100, "width": 200,
                                                                        "height": 50}).read()
    assert png_size(part) == (200, 50)
    empty = sdk.browsers.computer.capture_screenshot(session_id, region={"x": 1000, "y": 800, "width": 200,
                                                                         "height": 50}).read()
    assert len(part) > len(empty) + 200  # the button's border and text, beside a blank stretch of the page


def test_the_clipboard_is_the_browsers_own_what_its_pages_copy_and_paste(sdk, screen):
    session_id, page = screen
    sdk.browsers.computer.write_clipboard(session_id, text="from the API \u2603")
    sdk.browsers.computer.click_mouse(session_id, x=250, y=215)
    sdk.browsers.computer.press_key(session_id, keys=["ctrl+v"])
    expect(page.locator("#i")).to_have_value("from the API \u2603")  # the page pasted what the API wrote
    page.evaluate("i.value = 'copied in the page'; i.select()")
    sdk.browsers.computer.press_key(session_id, keys=["ctrl+c"])
    copied = eventually(lambda: sdk.browsers.computer.read_clipboard(session_id).text == "copied in the page")
    assert copied


def test_a_batch_runs_in_order_and_stops_at_the_first_failure(sdk, screen):
    session_id, page = screen
    sdk.browsers.computer.batch(session_id, actions=[
        {"type": "click_mouse", "click_mouse": {"x": 250, "y": 215}},
        {"type": "type_text", "type_text": {"text": "first"}},
        {"type": "sleep", "sleep": {"duration_ms": 10}},
        {"type": "set_cursor", "set_cursor": {"hidden": True}}])
    expect(page.locator("#i")).to_have_value("first")
    with pytest.raises(kernel.BadRequestError) as failed:
        sdk.browsers.computer.batch(session_id, actions=[
            {"type": "type_text", "type_text": {"text": " second"}},
            {"type": "press_key", "press_key": {"keys": ["NoSuchKey"]}},
            {"type": "type_text", "type_text": {"text": " never"}}])
    assert "action 1" in failed.value.body["message"] and "NoSuchKey" in failed.value.body["message"]
    expect(page.locator("#i")).to_have_value("first second")


def test_what_is_off_the_screen_or_not_served_is_refused_saying_why(sdk, screen):
    session_id, page = screen
    with pytest.raises(kernel.BadRequestError) as off:
        sdk.browsers.computer.click_mouse(session_id, x=1920, y=10)
    assert "x must be below 1920" in off.value.body["message"] and off.value.body["details"][0]["field"] == "x"
    with pytest.raises(kernel.BadRequestError) as region:
        sdk.browsers.computer.capture_screenshot(session_id, region={"x": 0, "y": 1000, "width": 10, "height": 81})
    assert "y must be below 1080" in region.value.body["message"]
    with pytest.raises(kernel.BadRequestError):
        sdk.browsers.computer.batch(session_id, actions=[{"type": "sleep", "click_mouse": {"x": 1, "y": 1}}])
    # A page that lies about its window (on a display, the page's place is found from it) gets clicks where the
    # screen shows them, or a refusal, never clicks somewhere else.
    page.evaluate("for (const name of ['outerHeight', 'screenX', 'devicePixelRatio']) "
                  "Object.defineProperty(window, name, {get: () => 'anywhere'})")
    sdk.browsers.computer.click_mouse(session_id, x=200, y=125)
    expect(page.locator("#b")).to_have_text("clicked 1")
    page.evaluate("Object.defineProperty(window, 'innerHeight', {get: () => 'anywhere'})")
    if not sdk.browsers.retrieve(session_id).headless:
        with pytest.raises(kernel.APIStatusError) as lied:
            sdk.browsers.computer.click_mouse(session_id, x=1, y=1)
        assert lied.value.status_code == 502 and "place on the screen" in lied.value.body["message"]
    sdk.browsers.delete_by_id(session_id)
    with pytest.raises(kernel.NotFoundError):
        sdk.browsers.computer.click_mouse(session_id, x=1, y=1)


def zoom_of(page, zoom):
    """Wait for the page's zoom to be `zoom` (an X display's keys and wheel reach the browser a moment later)."""
    page.wait_for_function(f"Math.abs(devicePixelRatio - {zoom}) < 0.01")


def test_at_any_zoom_clicks_and_screenshots_are_where_the_screen_shows_them(sdk, screen):
    session_id, page = screen
    computer = sdk.browsers.computer
    headless = sdk.browsers.retrieve(session_id).headless
    computer.press_key(session_id, keys=["ctrl+minus", "ctrl+minus"])  # 80%, as the docs' example keys do
    zoom_of(page, 0.8)
    steps = [(0.8, None)]
    if not headless:  # a display's ctrl+wheel zooms as a person's does (DevTools' wheel does not zoom)
        steps.append((0.9, lambda: computer.scroll(session_id, x=500, y=500, delta_y=-1, hold_keys=["ctrl"])))
    steps += [(1.1, lambda: computer.press_key(session_id, keys=["ctrl+0", "ctrl+plus"]))]
    for zoom, change in steps:
        if change:
            change()
            zoom_of(page, zoom)
        page.evaluate("b.textContent = 'click me'; scrollTo(0, 0)")
        # The button (CSS 100..300 x 100..150) and the pink box (CSS 600..700 x 300..400), in screen pixels.
        computer.click_mouse(session_id, x=round(200 * zoom), y=round(125 * zoom))
        expect(page.locator("#b")).to_have_text("clicked 1")
        whole = computer.capture_screenshot(session_id).read()
        assert png_size(whole) == (1920, 1080)
        assert pixel(page, whole, round(650 * zoom), round(350 * zoom)) == [255, 0, 128], zoom
        page.evaluate("scrollTo(0, 50)")  # a region is of the screen, wherever the page is scrolled to
        region = {"x": round(600 * zoom) + 2, "y": round(250 * zoom) + 2, "width": 20, "height": 20}
        box = computer.capture_screenshot(session_id, region=region).read()
        assert pixel(page, box, 0, 0) == pixel(page, box, 19, 19) == [255, 0, 128], zoom
    replay = sdk.browsers.replays.start(session_id)  # a recording starts at any zoom
    sdk.browsers.replays.stop(replay.replay_id, id_or_name=session_id)


def test_when_the_browser_cannot_be_reached_the_error_says_so_without_the_hosts_paths(lantern, sdk, screen):
    session_id, _ = screen
    # What a download written over the DevTools socket left (#34 item 7): a file where the socket was.
    socket = Path(sandbox_of(lantern, session_id).devtools_socket())
    aside = socket.with_name(f"{socket.name}.aside")
    socket.rename(aside)
    bodies = []
    try:
        socket.write_text("")
        for call in (lambda: sdk.browsers.computer.click_mouse(session_id, x=1, y=1),
                     lambda: sdk.browsers.computer.capture_screenshot(session_id),
                     lambda: sdk.browsers.replays.start(session_id)):
            with pytest.raises(kernel.APIStatusError) as failed:
                call()
            assert failed.value.status_code == 502
            bodies.append(json.dumps(failed.value.body))
    finally:
        socket.unlink(missing_ok=True)
        aside.rename(socket)
    assert all("could not be reached" in body or "could not do it" in body for body in bodies), bodies
    assert [body for body in bodies if host_words(lantern).search(body)] == []
    sdk.browsers.computer.click_mouse(session_id, x=1, y=1)  # the socket back, the session goes on


def probe_video(data, tmp_path):
    """(duration in seconds, frames, codec, width, height) of an MP4, by Debian's ffprobe."""
    video = tmp_path / "replay.mp4"
    video.write_bytes(data)
    probed = json.loads(subprocess.run(
        ["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries",
         "format=duration:stream=nb_read_frames,codec_name,width,height", "-of", "json", str(video)],
        capture_output=True, check=True).stdout)
    stream = probed["streams"][0]
    return (float(probed["format"]["duration"]), int(stream["nb_read_frames"]), stream["codec_name"],
            stream["width"], stream["height"])


def video_began(lantern, session_id, replay_id):
    """Whether the recording's video has its first bytes on its host: ffmpeg can take a second to start (and a
    screencast's some more to probe its frames), and one asked to stop before its first frame writes nothing."""
    def began():
        return any(video.exists() and video.stat().st_size > 0
                   for video in (host.workdir / "replays" / f"{session_id}-{replay_id}.mp4" for host in lantern.hosts))
    return eventually(began, 20, interval=0.1)


def test_a_replay_records_the_screen_as_an_mp4_listed_and_downloadable(lantern, sdk, screen, tmp_path):
    session_id, page = screen
    replays = sdk.browsers.replays
    started = replays.start(session_id, framerate=10)
    assert video_began(lantern, session_id, started.replay_id)
    with pytest.raises(kernel.ConflictError):  # one recording at a time
        replays.start(session_id)
    for colour in ("red", "green", "blue", "white", "black"):  # something to see changing
        page.evaluate(f"document.body.style.background = '{colour}'")
        time.sleep(1)
    replays.stop(started.replay_id, id_or_name=session_id)
    [listed] = replays.list(session_id)
    assert listed.replay_id == started.replay_id and listed.finished_at > listed.started_at
    assert listed.model_extra["status"] == "saved" and listed.model_extra["size_bytes"] > 0
    video = replays.download(started.replay_id, id_or_name=session_id).read()
    assert len(video) == listed.model_extra["size_bytes"]
    duration, frames, codec, width, height = probe_video(video, tmp_path)
    recorded = (listed.finished_at - listed.started_at).total_seconds()
    assert abs(duration - recorded) <= 1 and recorded >= 5
    assert frames > 0 and codec == "h264" and (width, height) == (1920, 1080)


def test_a_replay_stops_at_its_max_duration_and_with_its_session(lantern, sdk, screen, tmp_path):
    session_id, _ = screen
    replays = sdk.browsers.replays
    short = replays.start(session_id, max_duration_in_seconds=2)
    saved = eventually(lambda: [r for r in replays.list(session_id) if r.model_extra["status"] == "saved"], 20)
    assert [r.replay_id for r in saved] == [short.replay_id]
    assert abs(probe_video(replays.download(short.replay_id, id_or_name=session_id).read(), tmp_path)[0] - 2) <= 1
    cut = replays.start(session_id)
    assert video_began(lantern, session_id, cut.replay_id)
    time.sleep(1)
    sdk.browsers.delete_by_id(session_id)
    ended = eventually(lambda: {r.replay_id: r.model_extra["status"] for r in replays.list(session_id)}
                       .get(cut.replay_id) == "saved", 30)
    assert ended  # the ended session's recording was saved, and is still listed and downloadable
    assert probe_video(replays.download(cut.replay_id, id_or_name=session_id).read(), tmp_path)[1] > 0


@pytest.mark.parametrize("headless", [True, False], ids=["headless", "headful"])
def test_the_live_view_shows_the_screen_and_takes_clicks_and_is_telemetry(sdk, page_site, headless):
    created = sdk.browsers.create(headless=headless, telemetry={"enabled": True})
    # The record shows the URL for headful sessions (the contract); the page is the same for headless ones.
    url = "http" + created.cdp_ws_url[2:].replace("/cdp?", "/live?")  # the session's token, as for CDP
    assert created.browser_live_view_url == (None if headless else url)
    assert "Referrer-Policy" in httpx.get(url).headers and httpx.get(url.split("?")[0]).status_code == 401
    with sync_playwright() as playwright:
        session_browser = playwright.chromium.connect_over_cdp(created.cdp_ws_url)
        context = session_browser.contexts[0]
        page = context.pages[0] if context.pages else context.new_page()
        page.goto(f"{page_site.url}/")
        page.evaluate("document.body.style.background = 'rgb(0, 128, 255)'")
        viewer = Browser(find_chromium(), extra_args=("--window-size=1920,1080",))
        try:
            live = viewer.new_page()
            live.navigate(url)
            live.wait_for("document.getElementById('state')?.textContent === 'live'", what="the live view connected")
            # A pixel of the page's background, read from what the viewer shows of it (a blank stretch at 1000,800).
            pixel = live.wait_for(PIXEL_AT.format(x=1000, y=800), what="a frame of the screen")
            # JPEG frames: within a few levels of the colour.
            assert all(abs(got - want) <= 8 for got, want in zip(pixel, (0, 128, 255), strict=True)), pixel
            live.evaluate(CLICK_AT.format(x=200, y=125))  # the button, in the page's coordinates
            expect(page.locator("#b")).to_have_text("clicked 1")
        finally:
            viewer.close()
        session_browser.close()
    kinds = eventually(lambda: {"live_view_connect", "live_view_disconnect"} <= {
        e.event.type for e in sdk.browsers.telemetry.events(created.session_id, since="1h", limit=100)})
    assert kinds
    sdk.browsers.delete_by_id(created.session_id)


def test_calls_that_drive_the_browser_are_control_telemetry_and_screenshots_monitor_screenshots(sdk):
    on = {"enabled": True, "browser": {"control": {"enabled": True}, "screenshot": {"enabled": True}}}
    created = sdk.browsers.create(headless=True, telemetry=on)
    png = sdk.browsers.computer.capture_screenshot(created.session_id).read()
    sdk.browsers.computer.click_mouse(created.session_id, x=5, y=5)
    with pytest.raises(kernel.BadRequestError):
        sdk.browsers.computer.click_mouse(created.session_id, x=5000, y=5)

    def events():
        found = list(sdk.browsers.telemetry.events(created.session_id, since="1h", limit=100))
        return found if len([e for e in found if e.event.type == "api_call"]) >= 3 else None

    found = eventually(events)
    calls = [(e.event.data.operation_id, e.event.data.status) for e in found if e.event.type == "api_call"]
    assert calls == [("TakeScreenshot", 200), ("ClickMouse", 204), ("ClickMouse", 400)]
    [shot] = [e.event for e in found if e.event.type == "monitor_screenshot"]
    assert base64.b64decode(shot.data.png) == png
    sdk.browsers.delete_by_id(created.session_id)


def test_the_docs_examples_of_computer_use_replays_and_the_live_view_run_as_written(lantern, tmp_path):
    markdown = (Path(__file__).resolve().parents[3] / "docs" / "browsers.md").read_text()
    blocks = [code for language, code in examples("Sessions (`/browsers`)", markdown)
              if language == "python" and re.search(r"\.computer\.|\.replays\.|browser_live_view_url", code)]
    assert len(blocks) == 4
    for code in blocks:
        given = "import kernel\nclient = kernel.Kernel()\n"
        if "browser = " not in code:
            given += "browser = client.browsers.create()\n"
        out = run("python", given + code + "client.browsers.delete_by_id(browser.session_id)\n", lantern.api_key,
                  lantern.base_url, **{"kernel.Kernel()": f"kernel.Kernel(api_key={lantern.api_key!r}, "
                                                         f"base_url={lantern.base_url!r})",
                                       '"replay.mp4"': repr(str(tmp_path / "replay.mp4"))})
        if "browser_live_view_url" in code:
            assert "/live?token=" in out
    assert (tmp_path / "replay.mp4").read_bytes()[4:8] == b"ftyp"  # the replay was written where asked
