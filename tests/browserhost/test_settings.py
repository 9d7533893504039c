"""The host's settings (browserhost/settings.py): typed from the environment, and a wrong one stops the host's
start with one line naming it."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from browserhost import settings as host_settings
from lantern_wire.settings_errors import SettingsError

ROOT = Path(__file__).resolve().parents[2]


def test_settings_round_trip_from_the_environment(tmp_path):
    environ = {"LANTERN_APP_URL": "http://10.0.0.5:8000", "LANTERN_BROWSER_HOST_CAPACITY": "4",
               "LANTERN_BROWSER_HOST_DIR": str(tmp_path), "LANTERN_BROWSER_SANDBOX": "off",
               "LANTERN_BROWSER_SANDBOX_CPUS": "0.5", "LANTERN_BROWSER_LOOPBACK_PORTS": "18000-18099,3000",
               "LANTERN_BROWSER_SANDBOXES_MEMORY_MB": "2048", "LANTERN_BROWSER_CHROMIUM_PATH": "",
               "LANTERN_DB_POOL_SIZE": "not the host's"}  # the app's settings are no business of the host
    settings = host_settings.load(environ)
    assert (settings.app_url, settings.browser_host_capacity, settings.browser_host_dir) == (
        "http://10.0.0.5:8000", 4, tmp_path)
    assert (settings.browser_sandbox, settings.browser_sandbox_cpus, settings.browser_sandboxes_memory_mb) == (
        "off", 0.5, 2048)
    assert settings.browser_chromium_path is None  # empty: as if unset
    assert settings.browser_loopback_ports == ((18000, 18099), (3000, 3000))  # parsed once, at start
    # Each setting's value written back as its variable reads as the same settings.
    written = {f"LANTERN_{name}": str(value) for name, value in settings.model_dump(by_alias=True).items()
               if value is not None}
    assert host_settings.load(written) == settings
    # The command line comes on top; the defaults fill the rest.
    assert host_settings.load(environ, APP_URL="https://app.example").app_url == "https://app.example"
    assert host_settings.load({}).browser_host_report_queue == host_settings.HostSettings().browser_host_report_queue


@pytest.mark.parametrize("name, value, takes", [
    ("BROWSER_HOST_CAPACITY", "many", "should be a valid integer"),
    ("BROWSER_SANDBOX_CPUS", "0", "should be greater than or equal to 0.01"),
    ("BROWSER_SANDBOX", "maybe", "should be 'on' or 'off'"),
    ("BROWSER_SANDBOX", "", "should be 'on' or 'off'"),
    ("BROWSER_HOST_CAPACITY", "-1", "should be greater than or equal to 0"),
    ("APP_URL", "10.0.0.5:8000", "should be a URL starting with http:// or https://"),
    ("BROWSER_DNS_SERVERS", "192.0.2.53#dns", "not a DNS server"),
])
def test_a_wrong_setting_is_one_line_naming_it(name, value, takes):
    with pytest.raises(SettingsError) as refused:
        host_settings.load({f"LANTERN_{name}": value})
    assert str(refused.value) == (f"The browser host cannot start: {name}={value!r} (from LANTERN_{name}): "
                                  + str(refused.value).split(": ", 2)[2])
    assert takes in str(refused.value) and "\n" not in str(refused.value)


def test_the_credential_is_never_repeated_in_the_error():
    with pytest.raises(SettingsError) as refused:
        host_settings.load({"LANTERN_BROWSER_HOST_CREDENTIAL": "s3cret", "LANTERN_BROWSER_HOST_CAPACITY": "-1"},
                           BROWSER_HOST_CREDENTIAL=["s3cret"])
    assert "s3cret" not in str(refused.value) and "BROWSER_HOST_CREDENTIAL=(hidden)" in str(refused.value)


def test_python_m_browserhost_stops_with_the_line_and_no_traceback(tmp_path):
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("LANTERN_")},
           "PYTHONPATH": str(ROOT), "LANTERN_BROWSER_HOST_CREDENTIAL": "whatever",
           "LANTERN_BROWSER_SANDBOX_PIDS": "lots"}
    done = subprocess.run([sys.executable, "-m", "browserhost", "--bind", "127.0.0.1:1"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == ["The browser host cannot start: BROWSER_SANDBOX_PIDS='lots' (from "
                                        "LANTERN_BROWSER_SANDBOX_PIDS): should be a valid integer, unable to parse "
                                        "string as an integer"]


def test_values_that_worked_before_typed_settings_keep_their_meaning(tmp_path, monkeypatch):
    """#36 review: an empty LANTERN_BROWSER_HOST_DIR meant the default folder (it became the working folder), and 0
    for BROWSER_HOST_CAPACITY (or --capacity 0) and BROWSER_SANDBOXES_MEMORY_MB meant "from the machine's memory"
    (they were refused)."""
    monkeypatch.chdir(tmp_path)
    settings = host_settings.load({"LANTERN_BROWSER_HOST_DIR": "", "LANTERN_BROWSER_HOST_CAPACITY": "0",
                                   "LANTERN_BROWSER_SANDBOXES_MEMORY_MB": "0"})
    assert settings.browser_host_dir == tmp_path / "instance" / "browser-host"
    assert settings.browser_host_capacity is None
    assert settings.browser_sandboxes_memory_mb == host_settings.browsers_memory_mb() > 0
    assert host_settings.load({}, BROWSER_HOST_CAPACITY=0).browser_host_capacity is None  # --capacity 0


@pytest.mark.parametrize("value, meant", [("on", "on"), ("ON", "on"), ("True", "on"), ("1", "on"), (" off ", "off"),
                                          ("OFF", "off"), ("false", "off"), ("0", "off")])
def test_browser_sandbox_takes_on_off_true_false_1_0_in_any_case(value, meant):
    assert host_settings.load({"LANTERN_BROWSER_SANDBOX": value}).browser_sandbox == meant
