"""Sessions' Chromium under their Chrome enterprise policies (#35 item 1), through the SDK and Playwright on
`make run`'s stack, with the examples of Kernel's page on Chrome policies: blocked and allowed URLs (DevTools'
pages too), pop-ups, downloads; and a refused policy naming itself. What is refused and why:
app/browsers/chrome_policy.py."""
import kernel
import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import sync_playwright

from browserhost.cdp import CdpClient
from tests.browserhost.helpers import Site
from tests.waiting import eventually

# A pop-up opened as the page loads, without a user's gesture.
OPENER = b"<!doctype html><title>opener</title><script>window.opened = window.open('popup') !== null</script>"


class Pages(Site):
    def get(self, handler):
        if handler.path.endswith("/opener"):
            handler.answer(200, OPENER, "text/html")
        elif handler.path.endswith("/report.csv"):
            handler.send_response(200)
            handler.send_header("Content-Type", "text/csv")
            handler.send_header("Content-Disposition", "attachment; filename=report.csv")
            handler.send_header("Content-Length", "8")
            handler.end_headers()
            handler.wfile.write(b"a,b\n1,2\n")
        else:
            super().get(handler)


@pytest.fixture(scope="module")
def pages():
    site = Pages().start()
    yield site
    site.stop()


def visit(context, url):
    """The text of `url`'s page, or the network error that stopped it (a new tab each: a failed navigation's
    error page would cut the next one short)."""
    page = context.new_page()
    try:
        page.goto(url)
    except PlaywrightError as error:
        return str(error).split(" at ")[0].removeprefix("Page.goto: ")
    return page.text_content("body").strip()


def download(cdp_ws_url, url):
    """How a download of `url` ends as Chromium handles it itself ("completed" or "canceled"): a CDP client
    that takes downloads over (Browser.setDownloadBehavior "allow", as Playwright does for its contexts)
    decides for itself, past DownloadRestrictions."""
    states = []
    with CdpClient(cdp_ws_url) as cdp:
        cdp.on("Browser.downloadProgress", lambda progress, _session: states.append(progress["state"]))
        cdp.call("Browser.setDownloadBehavior", {"behavior": "default", "eventsEnabled": True})
        cdp.call("Target.createTarget", {"url": url})
        assert eventually(lambda: states and states[-1] in ("completed", "canceled"), 15, interval=0.1), states
    return states[-1]


def what_the_session_does(sdk, pages, policy):
    created = sdk.browsers.create(headless=True, chrome_policy=policy)
    assert sdk.browsers.retrieve(created.session_id).chrome_policy == policy
    with sync_playwright() as playwright:
        browser = playwright.chromium.connect_over_cdp(created.cdp_ws_url)
        context = browser.contexts[0]
        done = {"blocked": visit(context, f"{pages.url}/blocked"), "allowed": visit(context, f"{pages.url}/allowed/"),
                "devtools": visit(context, "devtools://devtools/bundled/inspector.html")}

        opener = context.new_page()
        opener.goto(f"{pages.url}/allowed/opener")
        done["popup"] = opener.evaluate("window.opened")
        if done["popup"]:
            assert eventually(lambda: f"{pages.url}/allowed/popup" in [page.url for page in context.pages], 10)

    done["download"] = download(created.cdp_ws_url, f"{pages.url}/allowed/report.csv")
    sdk.browsers.delete_by_id(created.session_id)
    return done


def test_the_browser_runs_under_the_sessions_policies(sdk, pages):
    allowed = f"127.0.0.1:{pages.port}/allowed"
    locked = what_the_session_does(sdk, pages, {"URLBlocklist": ["*"], "URLAllowlist": [allowed],
                                                "DefaultPopupsSetting": 2, "DownloadRestrictions": 3})
    assert locked == {"blocked": "net::ERR_BLOCKED_BY_ADMINISTRATOR", "allowed": "hello",
                      "devtools": "net::ERR_BLOCKED_BY_ADMINISTRATOR", "popup": False, "download": "canceled"}
    # The same pages under the opposite policies: what changed is the policies' doing.
    open_ = what_the_session_does(sdk, pages, {"URLBlocklist": ["devtools://*"], "DefaultPopupsSetting": 1,
                                               "DownloadRestrictions": 0})
    assert open_ == {"blocked": "hello", "allowed": "hello", "devtools": "net::ERR_BLOCKED_BY_ADMINISTRATOR",
                     "popup": True, "download": "completed"}


def test_a_refused_policy_names_itself_and_no_browser_starts(sdk):
    with pytest.raises(kernel.BadRequestError) as refused:
        sdk.browsers.create(headless=True, chrome_policy={
            "ExtensionInstallForcelist": ["abcdefghijklmnopabcdefghijklmnop"], "ProxyMode": "direct",
            "DeveloperToolsAvailability": 2, "URLBlocklist": ["*"]})
    details = refused.value.body["details"]
    assert sorted(detail["field"] for detail in details) == [
        "chrome_policy.DeveloperToolsAvailability", "chrome_policy.ExtensionInstallForcelist",
        "chrome_policy.ProxyMode"]
    assert list(sdk.browsers.list()) == []


def test_policies_that_would_open_downloads_with_the_sessions_programs_are_refused(sdk):
    """#35 review: with these, a headful session's downloads (a .desktop file, the mimeapps.list picking it, a
    text file) had Chromium run the session's program with xdg-open. Refused by name; and inside the sandbox
    nothing opens a file with a program whatever the policies (tests/browserhost/test_chrome_policy.py)."""
    with pytest.raises(kernel.BadRequestError) as refused:
        sdk.browsers.create(headless=False, chrome_policy={
            "DownloadDirectory": "/home/session/.local/share/applications", "AutoOpenFileTypes": ["txt"],
            "AutoOpenAllowedForURLs": ["*"], "DefaultAutomaticDownloadsSetting": 1})
    details = {detail["field"]: detail["message"] for detail in refused.value.body["details"]}
    assert sorted(details) == ["chrome_policy.AutoOpenAllowedForURLs", "chrome_policy.AutoOpenFileTypes"]
    assert all("program" in message for message in details.values())
    assert list(sdk.browsers.list()) == []
