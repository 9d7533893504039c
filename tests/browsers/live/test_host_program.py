"""The browser host as its own program (#27): it runs with no database and no encryption keys, imports no part
of the app, keeps every event through an outage of the app, and stops when its credential is revoked."""
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import kernel
from playwright.sync_api import sync_playwright

from lantern_wire.hosts import HEARTBEAT
from tests.browsers.live.conftest import HOST_SETTINGS, Host
from tests.browsers.live.test_real_browsers import first_page
from tests.live_server import (
    ROOT,
    browser_host,
    free_port,
    gunicorn,
    host_env,
    host_packages,
    private_database,
    run_cli,
    server_env,
    stop,
)
from tests.waiting import eventually


def environment_of(pid):
    entries = Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0")
    return dict(entry.split("=", 1) for entry in entries if "=" in entry)


def console_texts(envelopes):
    return [e.event.data.text for e in envelopes if e.event.type == "console_log"]


def test_a_host_without_database_or_keys_serves_a_session_end_to_end(lantern, sdk, site):
    host = lantern.hosts[0]
    environment = environment_of(host.process.pid)
    assert "LANTERN_DATABASE_URL" not in environment and "LANTERN_ENCRYPTION_KEYS" not in environment
    assert environment["LANTERN_BROWSER_HOST_CREDENTIAL"] == host.credential
    imported = subprocess.run(
        [sys.executable, "-c", "import sys, browserhost.__main__; print(' '.join(sorted({m.split('.')[0] for m in "
                               "sys.modules if m.split('.')[0] in ('app', 'flask', 'peewee', 'psycopg', 'gevent', "
                               "'marshmallow', 'cryptography')})))"],
        cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    assert imported == "", f"the host imports {imported}"

    created = sdk.browsers.create(headless=True, telemetry={"enabled": True, "browser": {"console": {"enabled": True}}})
    with sync_playwright() as playwright:
        browser = playwright.chromium.connect_over_cdp(created.cdp_ws_url)
        page = first_page(browser)  # set up by the capture before the create answered; a new tab may not be yet
        page.goto(f"{site.url}/")
        page.evaluate("console.log('through a host with no database')")
        browser.close()

    def reported():
        return [e for e in sdk.browsers.telemetry.events(created.session_id, since="1h", category=["console"])
                if e.event.data.text == "through a host with no database"]

    assert eventually(reported, 15, interval=0.2), "the host's report never reached the archive"
    lines = [line.message for line in sdk.browsers.logs.stream(
        created.session_id, source="supervisor", supervisor_process="browser-host", follow=False)]
    assert any("CDP client" in line and "connected" in line for line in lines)
    sdk.browsers.delete_by_id(created.session_id)
    assert sdk.browsers.retrieve(created.session_id, include_deleted=True).end_reason == "deleted"


def test_a_revoked_host_is_refused_its_sessions_end_and_it_stops(lantern, sdk):
    revocable = lantern.start_host("revocable", 1)
    created = []
    while not revocable.health()["sessions"]:  # the least loaded host takes each: within a few creates
        assert len(created) < 4
        created.append(sdk.browsers.create(headless=True).session_id)
    [on_revocable] = revocable.health()["sessions"]
    run_cli(lantern.env, "browsers", "hosts", "revoke", "revocable")
    assert sdk.browsers.retrieve(on_revocable, include_deleted=True).end_reason == "host_lost"
    refused = httpx.post(f"{lantern.base_url}{HEARTBEAT}", json={"sessions": [], "active": []},
                         headers={"Authorization": f"Bearer {revocable.credential}"})
    assert refused.status_code == 401
    assert revocable.process.wait(timeout=20) == 4  # its next heartbeat was refused: it stopped its browsers
    assert not any((revocable.workdir / "sessions").iterdir())
    for session_id in set(created) - {on_revocable}:
        assert sdk.browsers.retrieve(session_id).session_id == session_id  # the other host's go on


def test_a_host_keeps_every_event_and_its_sessions_while_the_app_is_down_for_five_seconds(tmp_path):
    """A page logs 600 lines over six seconds; the app stops for five of them and starts again on the same port.
    Every line reaches the archive once, in order, with consecutive seqs; the host goes on by itself, and its
    session with it although the outage outlasted the hosts' timeout (a host cannot heart-beat to an app that
    is down)."""
    port = free_port()
    with private_database(tmp_path) as database_url:
        env = server_env(database_url, tmp_path)
        # A host's timeout of 3 s, which the outage outlasts.
        env.update(HOST_SETTINGS, LANTERN_BROWSER_HOST_DIR=str(tmp_path / "hosts"),
                   LANTERN_BROWSER_HOST_TIMEOUT_SECONDS="3")
        run_cli(env, "db", "upgrade")
        api_key = run_cli(env, "orgs", "create", "--name", "outage", "--owner-email", "o@x.test").split()[-1]
        base_url = f"http://127.0.0.1:{port}"
        with gunicorn(env, tmp_path / "before.log", port=port):
            process, host_port = browser_host(env, tmp_path, "steady", 1, app_url=base_url)
            host = Host("steady", host_port, process, tmp_path / "hosts" / "steady", process.credential)
            sdk = kernel.Kernel(api_key=api_key, base_url=base_url, max_retries=0, timeout=60)
            created = sdk.browsers.create(headless=True, timeout_seconds=300,
                                          telemetry={"enabled": True, "browser": {"console": {"enabled": True}}})
            with sync_playwright() as playwright:
                browser = playwright.chromium.connect_over_cdp(created.cdp_ws_url)
                browser.contexts[0].pages[0].evaluate(
                    "let n = 0; const timer = setInterval(() => { console.log('line ' + n); "
                    "if (++n === 600) clearInterval(timer); }, 10)")
                browser.close()
        try:
            time.sleep(5)  # the app is down
            with gunicorn(env, tmp_path / "after.log", port=port):
                def archived():  # every event of the session (the page's lines, and its CDP client's coming and going)
                    return list(sdk.browsers.telemetry.events(created.session_id, since="1h", limit=100))

                eventually(lambda: len(console_texts(archived())) >= 600, 30, interval=0.5)
                events = archived()
                assert console_texts(events) == [f"line {n}" for n in range(600)]
                assert [e.seq for e in events] == list(range(1, len(events) + 1))  # one seq each, none lost
                time.sleep(5)  # past the restarted app's first sweep that judges hosts (its start + 1 + 3 s)
                assert sdk.browsers.retrieve(created.session_id).session_id == created.session_id
                assert host.process.poll() is None and created.session_id in host.health()["sessions"]
                listed = run_cli(env, "browsers", "hosts", "list")
                assert "steady" in listed and " live " in listed  # heart-beating again
                sdk.browsers.delete_by_id(created.session_id)
        finally:
            sdk.close()
            stop(host.process)
            assert not os.path.exists(tmp_path / "hosts" / "steady" / "sessions" / created.session_id)


def test_a_second_host_for_the_same_folder_refuses_to_start_and_touches_nothing_of_the_first(lantern, sdk, tmp_path):
    """#34 item 15: two stacks of one checkout (each its own app and database), both hosts named alike on the same
    BROWSER_HOST_DIR. The second says which host holds the folder and what to change, exits 5 (make run does not
    start it again), and the first's session goes on, its folder and browser untouched."""
    first = lantern.hosts[0]
    created = sdk.browsers.create(headless=True)
    assert created.session_id in first.health()["sessions"]
    session_folder = first.workdir / "sessions" / created.session_id
    with private_database(tmp_path) as database_url:
        env = server_env(database_url, tmp_path)
        env.update(HOST_SETTINGS, LANTERN_BROWSER_HOST_DIR=lantern.env["LANTERN_BROWSER_HOST_DIR"])
        run_cli(env, "db", "upgrade")
        with gunicorn(env, tmp_path / "gunicorn.log") as base_url:
            port = free_port()
            credential = run_cli(env, "browsers", "hosts", "add", first.name, "--address", f"http://127.0.0.1:{port}",
                                 "--quiet").strip()
            second = subprocess.Popen([sys.executable, "-S", "-m", "browserhost", "--bind", f"127.0.0.1:{port}"],
                                      cwd=ROOT, env=host_env(env, base_url, credential, host_packages(tmp_path / "py")),
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            try:
                output, _ = second.communicate(timeout=60)
            finally:
                stop(second)
            listed = run_cli(env, "browsers", "hosts", "list")
    assert second.returncode == 5, output
    [refusal] = [line for line in output.splitlines() if "another browser host" in line]
    assert f"(pid {first.process.pid})" in refusal and "LANTERN_BROWSER_HOST_DIR" in refusal
    assert " live " not in listed  # it told its app it stopped: nothing is placed on it
    assert (session_folder / "chromium.pgid").exists()
    version = httpx.get(created.cdp_ws_url.replace("ws://", "http://", 1).replace("/cdp?", "/cdp/json/version?"),
                        timeout=10)
    assert version.status_code == 200 and "Chrome" in version.json()["Browser"]
    assert sdk.browsers.retrieve(created.session_id).deleted_at is None


def test_a_second_host_with_the_same_credential_refuses_before_registering_and_the_first_keeps_its_sessions(
        lantern, sdk, tmp_path):
    """#34 item 15, one app: a host started twice with one credential (a unit started twice, a run by hand beside
    systemd's). The app ends every session of a host that registers, so the second must refuse before it
    registers: it exits 5 naming the first's pid, and the first's session stays active on a live host."""
    first = lantern.hosts[0]
    created = sdk.browsers.create(headless=True)
    assert created.session_id in first.health()["sessions"]
    second = subprocess.Popen(
        [sys.executable, "-S", "-m", "browserhost", "--bind", f"127.0.0.1:{free_port()}",
         "--advertise", f"http://127.0.0.1:{first.port}"],  # the address the app has for this credential
        cwd=ROOT, env=host_env(lantern.env, lantern.base_url, first.credential, host_packages(tmp_path / "py")),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        output, _ = second.communicate(timeout=60)
    finally:
        stop(second)
    session = sdk.browsers.retrieve(created.session_id, include_deleted=True)
    assert session.deleted_at is None, session  # not ended host_restarted
    assert created.session_id in first.health()["sessions"]
    listed = [line for line in run_cli(lantern.env, "browsers", "hosts", "list").splitlines() if "first" in line]
    assert listed and " live " in listed[0]
    assert second.returncode == 5, output
    [refusal] = [line for line in output.splitlines() if "another browser host" in line]
    assert f"(pid {first.process.pid})" in refusal and "credential" in refusal
