"""A browser host installed alone (#36): the venv deploy/install-browser-host made (tests/deploy/conftest.py),
holding the package without its `server` extra, runs `lantern-browser-host` against a test app and serves a
session end to end, its CDP traffic through the host's own relay as for a host on another machine."""
import subprocess
import time

import httpx
import kernel
import pytest
from playwright.sync_api import sync_playwright

from lantern_wire.hosts import control_key
from tests.browserhost.helpers import CHROMIUM, Site
from tests.browsers.live.test_real_browsers import first_page
from tests.live_server import STARTUP_SECONDS, free_port, host_env, run_cli, serve_with_organization, stop

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium at /usr/lib/chromium/chromium")


def started(command, env, workdir, credential, port):
    """The host's process once its health check answers; its output in workdir/host.log."""
    with open(workdir / "host.log", "ab") as log:
        process = subprocess.Popen(command, cwd=workdir, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + STARTUP_SECONDS
    while process.poll() is None and time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=5,
                         headers={"Authorization": f"Bearer {control_key(credential)}"}).status_code == 200:
                return process
        except httpx.TransportError:
            time.sleep(0.1)
    stop(process)
    raise AssertionError(f"the host did not start:\n{(workdir / 'host.log').read_text(errors='replace')}")


def test_a_host_installed_alone_serves_a_session(host_machine, tmp_path):
    updates = {"LANTERN_BROWSER_DRIVER": "host", "LANTERN_BROWSER_HOST_DIR": str(tmp_path / "hosts")}
    with serve_with_organization(tmp_path, "alone", env_updates=updates) as served:
        port = free_port()
        address = f"http://localhost:{port}"  # not 127.0.0.1: the app's workers relay CDP through the host
        credential = run_cli(served.env, "browsers", "hosts", "add", "alone", "--address", address, "--replace",
                             "--quiet").strip()
        env = host_env(served.env, served.base_url, credential, packages=tmp_path)
        del env["PYTHONPATH"]  # nothing of the checkout or the suite's venv: the installed venv alone
        found = subprocess.run([host_machine.venv / "bin" / "python", "-c", "import browserhost; "
                                "print(browserhost.__file__)"], cwd=tmp_path, env=env, capture_output=True,
                               text=True, check=True).stdout
        assert found.startswith(f"{host_machine.venv}/lib/"), found

        host = started([host_machine.venv / "bin" / "lantern-browser-host", "--bind", f"127.0.0.1:{port}",
                        "--capacity", "1", "--advertise", address], env, tmp_path, credential, port)
        site = Site().start()
        sdk = kernel.Kernel(api_key=served.api_key, base_url=served.base_url, max_retries=0, timeout=60)
        try:
            created = sdk.browsers.create(headless=True)
            with sync_playwright() as playwright:
                browser = playwright.chromium.connect_over_cdp(created.cdp_ws_url)
                page = first_page(browser)
                page.goto(f"{site.url}/")
                assert page.title() == "site"
                browser.close()
            sdk.browsers.delete_by_id(created.session_id)
            assert sdk.browsers.retrieve(created.session_id, include_deleted=True).end_reason == "deleted"
        finally:
            sdk.close()
            site.stop()
            stop(host)
        assert host.returncode == 0, (tmp_path / "host.log").read_text(errors="replace")
        log = (tmp_path / "host.log").read_text()
        assert f"session {created.session_id}: Chromium started on browser host alone" in log, log
