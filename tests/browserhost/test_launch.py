"""Starting and stopping Chromium: process group, DevTools port, leftovers, failures (browserhost/launch.py)."""
import os
import socket
import stat

import pytest

from browserhost.cdp import CdpClient
from browserhost.launch import Browser
from browserhost.launch_options import LaunchError, LaunchOptions, command
from browserhost.unsandboxed import group_alive, kill_group, start_xvfb, xvfb_available
from tests.browserhost.helpers import CHROMIUM, evaluate, needs_chromium, open_page
from tests.waiting import eventually


def port_open(port):
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def leave_crash_leftovers(user_data):
    """What a SIGKILLed Chromium leaves: Singleton links to a process that is gone, and an old DevToolsActivePort."""
    user_data.mkdir(parents=True)
    os.symlink("otherhost-999999", user_data / "SingletonLock")
    os.symlink("/tmp/gone/SingletonSocket", user_data / "SingletonSocket")
    os.symlink("1234567890", user_data / "SingletonCookie")
    (user_data / "DevToolsActivePort").write_text("1\n/devtools/browser/stale\n")


@needs_chromium
def test_start_over_crash_leftovers_then_stop_leaves_nothing_running(tmp_path):
    leave_crash_leftovers(tmp_path / "user-data")

    browser = Browser.start(CHROMIUM, tmp_path, LaunchOptions())

    assert browser.alive and group_alive(browser.pid)
    assert browser.ws_url == f"ws://127.0.0.1:{browser.port}{browser.browser_path}"
    assert browser.browser_path.startswith("/devtools/browser/") and "stale" not in browser.browser_path
    assert port_open(browser.port)
    assert (tmp_path / "tmp").is_dir() and (tmp_path / "chromium.log").exists()

    status = browser.stop()

    assert not browser.alive and not group_alive(browser.pid)
    assert not port_open(browser.port)
    assert not os.path.islink(browser.tmpdir)  # the short link to a long workdir's tmp/ is gone too
    assert browser.stop() == status  # idempotent


@needs_chromium
def test_kill_group_ends_a_recorded_browser_only_when_it_is_the_expected_one(tmp_path):
    browser = Browser.start(CHROMIUM, tmp_path, LaunchOptions())
    try:
        assert kill_group(browser.pid, expect_in_cmdline="/some/other/user-data") is False
        assert group_alive(browser.pid)

        assert kill_group(browser.pid, grace=0.5, expect_in_cmdline=str(tmp_path / "user-data")) is True

        assert not group_alive(browser.pid)
        # The kernel closes a killed process's listening socket a moment later.
        assert eventually(lambda: not port_open(browser.port), 5, interval=0.05)
    finally:
        browser.stop()


def test_a_browser_that_exits_at_once_is_a_launch_error_with_its_output(tmp_path):
    fake = tmp_path / "chromium"
    fake.write_text("#!/bin/sh\necho 'cannot open display: nothing here' >&2\nexit 3\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)

    with pytest.raises(LaunchError) as raised:
        Browser.start(str(fake), tmp_path / "work", LaunchOptions(), timeout=10)

    assert "exited with 3" in str(raised.value)
    assert "cannot open display: nothing here" in str(raised.value)


def test_command_line():
    argv, env = command("/usr/lib/chromium/chromium", "/w/user-data", LaunchOptions(
        viewport=(1280, 720), timezone="Asia/Tokyo", locale="fr-FR",
        extension_dirs=["/ext/a", "/ext/b"], allowed_hosts=["example.com", "127.0.0.1"]))

    assert argv[0] == "/usr/lib/chromium/chromium" and argv[-1] == "about:blank"  # the capture loads start_url
    assert "--headless=new" in argv and "--remote-debugging-port=0" in argv
    assert ("--no-sandbox" in argv) == (os.geteuid() == 0)
    assert "--user-data-dir=/w/user-data" in argv
    assert "--lang=fr-FR" in argv and "--accept-lang=fr-FR,fr" in argv
    assert "--load-extension=/ext/a,/ext/b" in argv
    assert ("--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE example.com, EXCLUDE *.example.com, "
            "EXCLUDE 127.0.0.1") in argv
    assert env == {"TZ": "Asia/Tokyo"}
    assert not any(arg.startswith("--remote-allow-origins") for arg in argv)

    headful, env = command("/c", "/u", LaunchOptions(display=":7"))
    assert env == {"DISPLAY": ":7"} and not any(arg.startswith("--headless") for arg in headful)
    assert headful[-1] == "about:blank"


@pytest.mark.parametrize("options", [
    LaunchOptions(allowed_hosts=["example.com, MAP * 127.0.0.1"]),
    LaunchOptions(extension_dirs=["/ext/a,/ext/b"]),
], ids=["host rules", "comma in extension folder"])
def test_options_cannot_smuggle_switches(options):
    with pytest.raises(ValueError):
        command("/c", "/u", options)


@pytest.mark.skipif(not xvfb_available(), reason="Xvfb is not installed (apt-get install xvfb)")
@needs_chromium
def test_headful_on_xvfb_has_the_requested_viewport(tmp_path):
    xvfb, display = start_xvfb(tmp_path / "x")
    try:
        browser = Browser.start(CHROMIUM, tmp_path / "b", LaunchOptions(viewport=(1000, 700), display=display))
        try:
            with CdpClient(browser.ws_url) as cdp:
                session = open_page(cdp, "about:blank")
                assert evaluate(cdp, session, "[innerWidth, innerHeight]") == [1000, 700]
        finally:
            browser.stop()
    finally:
        xvfb.terminate()
        xvfb.wait()
