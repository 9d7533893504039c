"""What pages see of the launch options, through Playwright connected over CDP as a client would
(browserhost/launch.py): viewport, time zone, locale, stealth, extensions, the host allowlist."""
import json

import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import sync_playwright

from browserhost.launch import Browser
from browserhost.launch_options import LaunchOptions
from tests.browserhost.helpers import CHROMIUM, needs_chromium

pytestmark = needs_chromium

VIEWPORT = (1111, 666)


@pytest.fixture(scope="module")
def extension(tmp_path_factory):
    """A tiny MV3 extension whose content script marks every page it runs in."""
    folder = tmp_path_factory.mktemp("extension")
    (folder / "manifest.json").write_text(json.dumps({
        "manifest_version": 3, "name": "Lantern test", "version": "1.0",
        "content_scripts": [{"matches": ["<all_urls>"], "js": ["content.js"]}]}))
    (folder / "content.js").write_text('document.documentElement.dataset.lantern = "1";\n')
    return folder


@pytest.fixture(scope="module")
def browser(tmp_path_factory, site, extension):
    browser = Browser.start(CHROMIUM, tmp_path_factory.mktemp("pages"), LaunchOptions(
        viewport=VIEWPORT, timezone="Asia/Tokyo", locale="fr-FR", stealth=True,
        extension_dirs=[str(extension)], allowed_hosts=["127.0.0.1", "Test.Localhost.", "bücher.localhost"]))
    yield browser
    browser.stop()


@pytest.fixture(scope="module")
def context(browser):
    """The default browser context, as Playwright's connect_over_cdp gives it (no viewport emulation)."""
    with sync_playwright() as playwright:
        connected = playwright.chromium.connect_over_cdp(browser.ws_url)
        yield connected.contexts[0]
        connected.close()


@pytest.fixture
def page(context):
    page = context.new_page()
    yield page
    page.close()


def test_every_page_has_the_requested_viewport(context, page, site):
    first = context.pages[0]  # the first tab, as Chromium opened it
    first.goto(f"{site.url}/first")
    page.goto(f"{site.url}/new")

    for each in (first, page):
        assert each.evaluate("[innerWidth, innerHeight]") == list(VIEWPORT)
    screen = page.evaluate("[screen.width, screen.height]")
    assert screen[0] >= VIEWPORT[0] and screen[1] >= VIEWPORT[1]


def test_time_zone_and_locale(page, site):
    page.goto(f"{site.url}/locale")

    assert page.evaluate("Intl.DateTimeFormat().resolvedOptions().timeZone") == "Asia/Tokyo"
    assert page.evaluate("new Date(0).getTimezoneOffset()") == -540
    assert page.evaluate("navigator.languages") == ["fr-FR", "fr"]
    assert site.headers[-1]["Accept-Language"].startswith("fr-FR,fr")


def test_stealth_hides_headless_and_automation(page, site):
    page.goto(f"{site.url}/stealth")

    agent = page.evaluate("navigator.userAgent")
    assert "Chrome/" in agent and "Headless" not in agent
    assert site.headers[-1]["User-Agent"] == agent
    assert page.evaluate("navigator.webdriver") is False


def test_an_extension_content_script_runs(page, site):
    page.goto(f"{site.url}/extension")

    page.wait_for_function("document.documentElement.dataset.lantern === '1'", timeout=10_000)


def test_only_allowed_hosts_and_their_subdomains_resolve(context, page, site):
    # Listed with a final dot and capitals, and in Unicode, which Chromium looks up in its xn-- form (#34 review).
    for allowed in ("a.test.localhost", "bücher.localhost"):
        page.goto(f"http://{allowed}:{site.port}/allowed")
        assert page.evaluate("document.title") == "site"

    for blocked in ("localhost", "127.0.0.2", "[::1]", "example.com"):
        # A page each: with Playwright 1.65 on Chromium 156, closing a page after three failed
        # navigations never returns.
        other = context.new_page()
        with pytest.raises(PlaywrightError, match="ERR_NAME_NOT_RESOLVED"):
            other.goto(f"http://{blocked}:{site.port}/blocked")
        other.close()
