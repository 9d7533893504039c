"""Fixtures of the browser-host tests: a small site on 127.0.0.1, a plain browser per module, a CDP client, a session's
sandbox with no browser in it."""
import pytest

from browserhost import sandbox, sandbox_policy
from browserhost.cdp import CdpClient
from browserhost.launch import Browser
from browserhost.launch_options import LaunchOptions
from tests.browserhost.helpers import CHROMIUM, Site


@pytest.fixture(scope="module")
def site():
    site = Site().start()
    yield site
    site.stop()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """A browser with default options (modules that need others define their own)."""
    browser = Browser.start(CHROMIUM, tmp_path_factory.mktemp("browser"), LaunchOptions())
    yield browser
    browser.stop()


@pytest.fixture
def cdp(browser):
    with CdpClient(browser.ws_url) as client:
        yield client


@pytest.fixture
def box(tmp_path):
    """A session's sandbox of 256 MiB (its machine, network and cgroups; no browser), removed afterwards."""
    box = sandbox.Sandbox(tmp_path / "sessions" / "s1", sandbox_policy.SandboxPolicy(), memory_mb=256).create()
    try:
        yield box
    finally:
        box.destroy()
