"""A running browser's viewport, over a browser-level CdpClient: its windows' size, and the tabs a restart carries.

Chromium gives a new window the size of the last active one unless `--window-size` says otherwise (then every new
window gets that size, whatever happened since), so the host starts Chromium without it and sizes the first window
here (launch.Browser.start); sizing every window again later (a new viewport) sizes the windows opened after too:
new tabs, a CDP client's new pages, windows of new browser contexts. Each window is as tall as the viewport plus
the browser's UI (tab strip and toolbar, launch_options.CHROME_HEIGHT), so each page sees exactly the viewport.

A restart (a viewport its screen cannot hold) keeps what a session's user would call its tabs: the URLs of the
default browser context's pages, opened again in the order Chromium lists them (newest first), the newest in
front.
"""
import time

from browserhost.cdp import CdpError

POLL_SECONDS = 0.02
# How long a live change waits for the pages in front to have their windows' new size, all windows together.
SETTLE_SECONDS = 2.0


def fit_windows(cdp, viewport, chrome_height, timeout=10.0, *, settle=False):
    """Give every window of the browser an inner size of `viewport` (width, height); waits up to `timeout` for its
    first page when it has none yet (just started). With `settle` (a live change), also waits, up to
    SETTLE_SECONDS, for the page in front of each window to have its window's new size (Chromium tells pages of it
    a moment after its answer); a start needs no wait: its first page loads after the window has its size. The
    windows' ids."""
    width, height = viewport
    windows = {}
    deadline = time.monotonic() + timeout
    while not windows:
        pages = _pages(cdp)
        for target in pages:
            try:
                found = cdp.call("Browser.getWindowForTarget", {"targetId": target["targetId"]})
            except CdpError:  # closed meanwhile
                continue
            windows.setdefault(found["windowId"], []).append(target)
        if not windows:
            if time.monotonic() > deadline:
                raise CdpError("the browser opened no window in time")
            time.sleep(POLL_SECONDS)
    for window in windows:
        bounds = cdp.call("Browser.getWindowBounds", {"windowId": window})["bounds"]
        if bounds.get("windowState", "normal") != "normal":  # a maximized or minimized window keeps its size else
            cdp.call("Browser.setWindowBounds", {"windowId": window, "bounds": {"windowState": "normal"}})
        cdp.call("Browser.setWindowBounds",
                 {"windowId": window, "bounds": {"width": width, "height": height + chrome_height}})
    if settle:
        settle_deadline = min(deadline, time.monotonic() + SETTLE_SECONDS)
        for window, targets in windows.items():
            # The size the window got, which may not be the one asked for (a headful window is at least 500 px wide)
            got = cdp.call("Browser.getWindowBounds", {"windowId": window})["bounds"]
            _settle(cdp, targets, (got["width"], got["height"]), settle_deadline)
    return sorted(windows)


def _settle(cdp, pages, outer, deadline):
    """Wait until the visible page among `pages` (one window's) sees its window's `outer` size. outerWidth and
    outerHeight follow the window even when a client emulates another viewport on the page (Puppeteer's
    defaultViewport, Playwright's viewport), where innerWidth never would. A page in the background gets its
    window's size when it is brought to the front (Chromium resizes hidden tabs then). A page that does not answer
    (a dialog open) is left to take it when it can."""
    expression = f"document.visibilityState === 'hidden' || (outerWidth === {outer[0]} " \
                 f"&& outerHeight === {outer[1]})"
    for target in pages:
        try:
            session = cdp.call("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True})["sessionId"]
        except CdpError:
            continue
        try:
            while time.monotonic() < deadline:
                wait = max(deadline - time.monotonic(), 0.1)
                answer = cdp.call("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                                  session_id=session, timeout=wait)
                if answer["result"].get("value") is True:
                    break
                time.sleep(POLL_SECONDS)
        except CdpError:
            pass
        finally:
            try:
                cdp.call("Target.detachFromTarget", {"sessionId": session})
            except CdpError:
                pass


def tabs(cdp, listed):
    """The URLs of the default context's pages, in the order of `listed` (Chromium's /json/list: newest first)."""
    others = _other_contexts(cdp)
    ours = {target["targetId"] for target in _pages(cdp) if target.get("browserContextId") not in others}
    return [target["url"] for target in listed if target.get("type") == "page" and target.get("id") in ours]


def reopen(cdp, urls, timeout=10.0):
    """Open `urls` as tabs of a browser just started (on one blank tab), in the order Chromium lists them (the
    newest first, `tabs`'s order), the first in front: the blank tab takes the last, then the others open in turn.
    Answered once each tab is at its URL (its page may still be loading), or at `timeout`."""
    deadline = time.monotonic() + timeout
    blank = None
    while blank is None:
        blank = next((target for target in _pages(cdp) if target["url"] == "about:blank"), None)
        if blank is None:
            if time.monotonic() > deadline:
                raise CdpError("the browser opened no tab in time")
            time.sleep(POLL_SECONDS)
    if urls and urls[-1] != "about:blank":
        session = cdp.call("Target.attachToTarget", {"targetId": blank["targetId"], "flatten": True})["sessionId"]
        cdp.send("Page.navigate", {"url": urls[-1]}, session_id=session)
    for url in reversed(urls[:-1]):
        cdp.call("Target.createTarget", {"url": url})
    elsewhere = sum(url != "about:blank" for url in urls)
    while sum(target["url"] not in ("", "about:blank") for target in _pages(cdp)) < elsewhere:
        if time.monotonic() > deadline:
            break  # a page that has not answered yet goes on loading
        time.sleep(POLL_SECONDS)


def await_kiosk(cdp, viewport, timeout=2.0):
    """Wait until a kiosk's first window has the viewport's size. Its full-screen window takes the size Chromium
    guesses (the whole screen) before the one it keeps (a pixel less: the viewport); which X event comes last varies
    on a busy machine, and a client must not find the page a pixel too large. False when it did not in time."""
    deadline = time.monotonic() + timeout
    while True:
        for target in _pages(cdp):
            try:
                bounds = cdp.call("Browser.getWindowForTarget", {"targetId": target["targetId"]})["bounds"]
            except CdpError:
                continue
            if (bounds.get("width"), bounds.get("height")) == tuple(viewport):
                return True
        if time.monotonic() > deadline:
            return False
        time.sleep(POLL_SECONDS)


def _pages(cdp):
    return [target for target in cdp.call("Target.getTargets")["targetInfos"] if target["type"] == "page"]


def _other_contexts(cdp):
    return set(cdp.call("Target.getBrowserContexts").get("browserContextIds", ()))
