"""A profile's cookies and localStorage into and out of a running Chromium (browserhost/storage.py)."""
import threading
import time

from browserhost import sandbox, sandbox_policy
from browserhost.cdp import CdpClient
from browserhost.launch import Browser
from browserhost.launch_options import LaunchOptions
from browserhost.storage import load_state, read_state
from tests.browserhost.helpers import CHROMIUM, evaluate, needs_chromium, open_page
from tests.browserhost.test_sandbox import can_sandbox

pytestmark = needs_chromium

UNSERVED_ORIGIN = "http://127.0.0.1:9"  # nothing answers there: its localStorage is reached without the site


def cookie(name, value, **fields):
    return {"name": name, "value": value, "domain": "127.0.0.1", "path": "/", "expires": -1, "httpOnly": False,
            "secure": False, "sameSite": "Lax", **fields}


def page_urls(cdp):
    return [target["url"] for target in cdp.call("Target.getTargets")["targetInfos"] if target["type"] == "page"]


def test_state_loaded_is_what_the_site_sees_and_what_is_read_back(cdp, site):
    tomorrow = int(time.time()) + 86400
    load_state(cdp, {
        "cookies": [cookie("sid", "s3cret", httpOnly=True),
                    cookie("theme", "dark", expires=tomorrow, sameSite="Strict")],
        "origins": [{"origin": site.url, "localStorage": [{"name": "token", "value": "abc"}]},
                    {"origin": UNSERVED_ORIGIN, "localStorage": [{"name": "unseen", "value": "é\u2028x"}]}]})

    session = open_page(cdp, f"{site.url}/app")
    assert sorted(site.headers[-1]["Cookie"].split("; ")) == ["sid=s3cret", "theme=dark"]
    assert evaluate(cdp, session, "document.cookie") == "theme=dark"  # sid is httpOnly
    assert evaluate(cdp, session, "localStorage.getItem('token')") == "abc"
    evaluate(cdp, session, "localStorage.setItem('later', 'set by the page')")

    state = read_state(cdp, extra_origins=[UNSERVED_ORIGIN])

    cookies = {c["name"]: c for c in state["cookies"]}
    assert cookies["sid"] == cookie("sid", "s3cret", httpOnly=True)
    assert cookies["theme"] == cookie("theme", "dark", expires=tomorrow, sameSite="Strict")
    origins = {entry["origin"]: sorted(entry["localStorage"], key=lambda item: item["name"])
               for entry in state["origins"]}
    assert origins == {
        site.url: [{"name": "later", "value": "set by the page"}, {"name": "token", "value": "abc"}],
        UNSERVED_ORIGIN: [{"name": "unseen", "value": "é\u2028x"}]}
    assert f"{UNSERVED_ORIGIN}/" not in page_urls(cdp)  # the helper tab is gone


def test_a_cookie_chromium_refuses_does_not_keep_the_others_out(cdp):
    load_state(cdp, {"cookies": [cookie("cross", "1", sameSite="None"),  # SameSite=None needs Secure
                                 cookie("kept", "2")], "origins": []})

    names = {c["name"] for c in read_state(cdp)["cookies"]}
    assert "kept" in names and "cross" not in names


def test_state_of_a_context_a_client_created_is_not_the_profiles(cdp, site):
    context = cdp.call("Target.createBrowserContext")["browserContextId"]
    target = cdp.call("Target.createTarget", {"url": "about:blank", "browserContextId": context})["targetId"]
    session = cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    cdp.call("Page.navigate", {"url": f"http://localhost:{site.port}/private"}, session_id=session)
    evaluate(cdp, session, "localStorage.setItem('private', '1'); document.cookie = 'private=1'")
    open_page(cdp, "data:text/html,<p>opaque</p>")

    state = read_state(cdp)

    assert not any(entry["origin"].startswith("http://localhost") for entry in state["origins"])
    assert "private" not in {c["name"] for c in state["cookies"]}
    cdp.call("Target.disposeBrowserContext", {"browserContextId": context})


def test_local_storage_of_a_page_stuck_on_a_dialog_is_still_read(cdp, site):
    origin = f"http://localhost:{site.port}"  # no other page of the default context is on it
    session = open_page(cdp, f"{origin}/dialog")
    opened = threading.Event()
    cdp.on("Page.javascriptDialogOpening", lambda params, session_id: opened.set())
    cdp.call("Page.enable", session_id=session)
    evaluate(cdp, session, "localStorage.setItem('before', 'the dialog'); setTimeout(() => alert('stuck'))")
    assert opened.wait(10)

    origins = {entry["origin"]: entry["localStorage"] for entry in read_state(cdp)["origins"]}

    assert origins[origin] == [{"name": "before", "value": "the dialog"}]
    cdp.call("Page.handleJavaScriptDialog", {"accept": True}, session_id=session)


@can_sandbox
def test_an_origin_the_policies_keep_the_browser_from_opening_is_skipped_and_named(tmp_path):
    """URLBlocklist ["*"]: the helper tab cannot open an origin. Its localStorage is not loaded, nor read (unknown,
    not empty), and the others and the cookies still are: a start with the profile failed (503, retried for ever),
    and a save at the end lost the whole profile state."""
    workdir = tmp_path / "sessions" / "s1"
    box = sandbox.Sandbox(workdir, sandbox_policy.SandboxPolicy(), memory_mb=1024).create()
    try:
        browser = Browser.start(CHROMIUM, workdir, LaunchOptions(chrome_policy={
            "URLBlocklist": ["*"], "URLAllowlist": ["127.0.0.1:9/allowed"]}), box=box, timeout=40)
        try:
            with CdpClient(browser.devtools) as cdp:
                skipped = load_state(cdp, {"cookies": [cookie("sid", "s3cret")], "origins": [
                    {"origin": UNSERVED_ORIGIN, "localStorage": [{"name": "token", "value": "abc"}]}]})
                unread = []
                state = read_state(cdp, extra_origins=[UNSERVED_ORIGIN], unread=unread)
        finally:
            browser.stop()
    finally:
        box.destroy()
    assert skipped == [UNSERVED_ORIGIN] and unread == [UNSERVED_ORIGIN]
    assert [c["name"] for c in state["cookies"]] == ["sid"] and state["origins"] == []
