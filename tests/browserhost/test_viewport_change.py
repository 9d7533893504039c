"""A running browser's new viewport on its host (#35 item 3): its windows resized, new windows included, while its
screen holds them; else Chromium started again, only when allowed, with its tabs, cookies and localStorage."""
import base64
import struct
import threading

import pytest

from browserhost import launch, profile_state, sandbox, sandbox_policy
from browserhost.cdp import CdpClient
from browserhost.launch_options import LaunchOptions, command, screen_for
from browserhost.registry import Hosted
from browserhost.unsandboxed import xvfb_available
from tests.browserhost.helpers import CHROMIUM, evaluate, navigate, needs_chromium, open_page, unsandboxed_host
from tests.browserhost.test_sandbox import can_sandbox


@pytest.fixture
def host(tmp_path, monkeypatch):
    """A host without sandboxes (its computer API's screen on an X display of its own when headful)."""
    server = unsandboxed_host(tmp_path, monkeypatch)
    yield server
    for session_id in list(server.registry.hosted):
        server.registry.stop_browser(session_id, save=False, reason=None)


def start(host, **body):
    status, answer = host.starts.start_browser({"session_id": "s1", **body})
    assert status == 201, answer
    return host.registry.hosted["s1"]


def measure(cdp, target):
    session = cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    return evaluate(cdp, session, "[innerWidth, innerHeight]")


def page_sizes(hosted):
    """Every page's [innerWidth, innerHeight], of every browser context."""
    with CdpClient(hosted.browser.devtools) as cdp:
        return [measure(cdp, info["targetId"]) for info in cdp.call("Target.getTargets")["targetInfos"]
                if info["type"] == "page"]


def screenshot_size(hosted):
    png = base64.b64decode(hosted.screen.run([{"type": "capture_screenshot"}])[0]["png"])
    return list(struct.unpack(">II", png[16:24]))


def test_no_window_size_is_given_but_a_kiosks_which_fills_its_screen_from_the_corner():
    """--window-size would give every window opened later the start's size: windows are sized over CDP instead. A
    kiosk's is its viewport, on a screen a pixel larger (no window manager resizes it); headless, it is no kiosk."""
    argv, _ = command("/c", "/u", LaunchOptions(viewport=(1280, 800), display=":7"))
    assert not any(arg.startswith(("--window-size", "--kiosk")) for arg in argv)
    kiosk, _ = command("/c", "/u", LaunchOptions(viewport=(1280, 800), display=":7", kiosk=True))
    assert {"--kiosk", "--window-size=1280,800", "--window-position=0,0"} <= set(kiosk)
    assert screen_for((1280, 800), kiosk=True) == (1281, 801)
    headless, _ = command("/c", "/u", LaunchOptions(viewport=(1280, 800), kiosk=True))
    assert not any(arg.startswith(("--window-size", "--kiosk")) for arg in headless)


@needs_chromium
def test_a_headless_browser_takes_a_new_viewport_in_every_window_and_the_windows_it_opens_later(host, site):
    hosted = start(host, headless=True, viewport={"width": 1280, "height": 800}, start_url=f"{site.url}/first")
    pid = hosted.browser.pid
    assert host.running.resize(hosted, {"width": 1024, "height": 768}) == (200, {"restarted": False})
    with CdpClient(hosted.browser.devtools) as cdp:
        cdp.call("Target.createTarget", {"url": f"{site.url}/tab"})
        cdp.call("Target.createTarget", {"url": "about:blank", "newWindow": True})
        context = cdp.call("Target.createBrowserContext")["browserContextId"]
        cdp.call("Target.createTarget", {"url": "about:blank", "browserContextId": context})
    assert page_sizes(hosted) == [[1024, 768]] * 4
    assert screenshot_size(hosted) == [1024, 768] and hosted.browser.pid == pid


@pytest.mark.skipif(not xvfb_available(), reason="Xvfb is not installed (apt-get install xvfb)")
@needs_chromium
def test_a_headful_browser_shrinks_on_its_screen_and_grows_past_it_only_by_starting_again(host, site):
    hosted = start(host, headless=False, viewport={"width": 1920, "height": 1080}, start_url=f"{site.url}/first")
    with CdpClient(hosted.browser.devtools) as cdp:
        first = next(info for info in cdp.call("Target.getTargets")["targetInfos"] if info["type"] == "page")
        session = cdp.call("Target.attachToTarget", {"targetId": first["targetId"], "flatten": True})["sessionId"]
        evaluate(cdp, session, "document.cookie = 'sid=s3cr3t; max-age=3600; path=/'; "
                               "localStorage.setItem('theme', 'dark')")
        second = cdp.call("Target.createTarget", {"url": "about:blank"})["targetId"]  # in front
        navigate(cdp, cdp.call("Target.attachToTarget", {"targetId": second, "flatten": True})["sessionId"],
                 f"{site.url}/second")
    pid = hosted.browser.pid

    assert host.running.resize(hosted, {"width": 1024, "height": 768}) == (200, {"restarted": False})
    assert screenshot_size(hosted) == [1024, 768]
    with CdpClient(hosted.browser.devtools) as cdp:  # a tab in the background takes it once in front
        cdp.call("Target.activateTarget", {"targetId": first["targetId"]})
    assert page_sizes(hosted) == [[1024, 768]] * 2
    # Its screen is still the one it started on: back to 1920x1080 needs no restart.
    assert host.running.resize(hosted, {"width": 1920, "height": 1080}) == (200, {"restarted": False})
    assert host.running.resize(hosted, {"width": 1024, "height": 768}) == (200, {"restarted": False})

    # 1920x1200 does not fit on the screen a 1920x1080 session has.
    status, refused = host.running.resize(hosted, {"width": 1920, "height": 1200})
    assert status == 409 and refused["code"] == "viewport_needs_restart" and "force" in refused["message"]
    assert hosted.browser.pid == pid and hosted.options.viewport == (1024, 768)

    assert host.running.resize(hosted, {"width": 1920, "height": 1200, "restart": True}) == (200, {"restarted": True})
    assert hosted.browser.pid != pid
    with CdpClient(hosted.browser.devtools) as cdp:
        def opened():
            return sorted(info["url"] for info in cdp.call("Target.getTargets")["targetInfos"]
                          if info["type"] == "page")
        assert opened() == [f"{site.url}/first", f"{site.url}/second"]
        front = hosted.browser.devtools.get_json("/json/list")[0]  # in front, as before
        session = cdp.call("Target.attachToTarget", {"targetId": front["id"], "flatten": True})["sessionId"]
        evaluate(cdp, session, "new Promise(done => document.readyState === 'complete' ? done() "
                               ": addEventListener('load', () => done()))")
        assert evaluate(cdp, session, "[location.pathname, document.visibilityState, document.cookie, "
                                      "localStorage.getItem('theme'), innerWidth, innerHeight, "
                                      "screen.width >= 1920 + 20, screen.height >= 1200]"
                        ) == ["/first", "visible", "sid=s3cr3t", "dark", 1920, 1200, True, True]
    assert screenshot_size(hosted) == [1920, 1200]


@pytest.mark.skipif(not xvfb_available(), reason="Xvfb is not installed (apt-get install xvfb)")
@needs_chromium
def test_a_headful_window_narrower_than_chromium_allows_starts_and_resizes_at_the_width_it_gets(host, site):
    """A headful window is at least 500 px wide: a start or a change waits for no page width it can never have."""
    hosted = start(host, headless=False, viewport={"width": 400, "height": 300}, start_url=f"{site.url}/first",
                   start_seconds=8)
    assert host.running.resize(hosted, {"width": 450, "height": 320}) == (200, {"restarted": False})
    assert page_sizes(hosted) == [[500, 320]]


@can_sandbox
@needs_chromium
def test_the_ui_height_of_a_browser_with_policies_is_its_own_not_the_next_sessions(tmp_path, monkeypatch):
    """A bookmark bar (a policy) makes the browser UI taller: measured in that browser, it must not size the windows
    of the sessions after it."""
    monkeypatch.setattr(launch, "_measured_chrome_heights", {})
    sizes = []
    for name, policy in (("first", {"BookmarkBarEnabled": True}), ("second", None)):
        workdir = tmp_path / "sessions" / name
        box = sandbox.Sandbox(workdir, sandbox_policy.SandboxPolicy(), memory_mb=1024).create()
        try:
            browser = launch.Browser.start(CHROMIUM, workdir, LaunchOptions(viewport=(1280, 720), chrome_policy=policy),
                                           box=box, timeout=40)
            try:
                with CdpClient(browser.devtools) as cdp:
                    session = open_page(cdp, "about:blank")
                    sizes.append(evaluate(cdp, session, "[innerWidth, innerHeight]"))
            finally:
                browser.stop()
        finally:
            box.destroy()
    assert sizes[1] == [1280, 720]


@needs_chromium
def test_a_browser_takes_one_profile_while_it_runs_even_two_at_once(host, monkeypatch):
    hosted = start(host, headless=True)
    arrived, release = threading.Event(), threading.Event()

    def slow_load(hosted, state, timeout, note):
        arrived.set()
        release.wait(10)
    monkeypatch.setattr(profile_state, "load", slow_load)
    first = {}
    loading = threading.Thread(
        target=lambda: first.update(answer=host.running.load_profile(hosted, {"profile_state": {}})))
    loading.start()
    try:
        assert arrived.wait(10)
        second = host.running.load_profile(hosted, {"profile_state": {}})
    finally:
        release.set()
        loading.join(10)
    assert second[0] == 409 and second[1]["code"] == "profile_already_loaded"
    assert first["answer"][0] == 200


def test_a_browser_starting_or_starting_again_takes_a_change_once_it_runs(host, tmp_path):
    """A change sent meanwhile is worth sending again (it was a 404, no such browser; a forced resize of a starting
    one would have stopped a capture it does not have yet)."""
    hosted = Hosted("s1", tmp_path / "s1")
    for answer in (host.running.resize(hosted, {"width": 1024, "height": 768, "restart": True}),
                   host.running.load_profile(hosted, {"profile_state": {}})):
        assert answer[0] == 409 and answer[1]["code"] == "browser_restarting"
    hosted.starting, hosted.stopping = False, True
    assert host.running.resize(hosted, {"width": 1024, "height": 768})[0] == 404
