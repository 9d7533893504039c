"""Settings (app/config.py, app/core/settings.py): layers (the defaults, then instance/config.py, then LANTERN_
variables), their types, and the one line a wrong one stops the start with."""
import json
import logging

import pytest

from app.config import Settings
from app.core import settings
from lantern_wire.settings_errors import SettingsError
from tests.conftest import TEST_ENCRYPTION_KEY


def test_instance_file_overrides_defaults_and_environment_overrides_both(tmp_path, monkeypatch, make_app):
    instance = tmp_path / "instance"
    instance.mkdir()
    (instance / "config.py").write_text("API_KEY_ROTATION_GRACE_DAYS = 3\nMIN_HEALTH_CHECK_INTERVAL_SECONDS = 60\n")
    monkeypatch.setenv("LANTERN_MIN_HEALTH_CHECK_INTERVAL_SECONDS", "120")
    monkeypatch.setattr("flask.Flask.auto_find_instance_path", lambda self: str(instance))
    app = make_app()
    assert app.config["API_KEY_ROTATION_GRACE_DAYS"] == 3
    assert app.config["MIN_HEALTH_CHECK_INTERVAL_SECONDS"] == 120
    assert app.config["DEFAULT_ORG_MAX_CONCURRENT_SESSIONS"] == 10


def test_sqlite_in_the_instance_folder_by_default(tmp_path, monkeypatch):
    from app import create_app

    monkeypatch.delenv("LANTERN_DATABASE_URL", raising=False)
    monkeypatch.setattr("flask.Flask.auto_find_instance_path", lambda self: str(tmp_path))
    app = create_app({"ENCRYPTION_KEYS": TEST_ENCRYPTION_KEY})
    assert app.config["DATABASE_URL"] == f"sqlite:///{tmp_path / 'lantern.db'}"


def environment_of(settings):
    """LANTERN_* variables that say `settings`: text as it is, None as empty, the rest as JSON."""
    return {f"LANTERN_{name}": "" if value is None else value if isinstance(value, str) else json.dumps(value)
            for name, value in settings.model_dump(mode="json", by_alias=True).items()}


def test_every_setting_round_trips_through_the_environment(tmp_path):
    changed = Settings(DB_POOL_SIZE=40, STREAM_POLL_SECONDS=0.25, LOG_FORMAT="json", REDIS_URL="redis://cache:6379/0",
                       SQLITE_PRAGMAS={"busy_timeout": 9000}, ENCRYPTION_KEYS=[TEST_ENCRYPTION_KEY],
                       STREAMS_PER_WORKER=None, TELEMETRY_ARCHIVE_SESSION_MAX_BYTES=None, API_VERSION="1.0",
                       PUBLIC_BASE_URL="https://lantern.example", BROWSER_DRIVER="external",
                       PROJECTS_ROUTES_SUNSET_AT="2027-01-01T00:00:00Z", DATABASE_URL="sqlite:////tmp/x.db",
                       BLOB_DIR=str(tmp_path))
    loaded, _ = settings.load(str(tmp_path), environ=environment_of(changed))
    assert loaded == changed and loaded.api_version == "1.0"  # text that parses as a number stays text
    assert settings.load(str(tmp_path), environ={"LANTERN_ENCRYPTION_KEYS": f" {TEST_ENCRYPTION_KEY} ,"})[0] \
        .encryption_keys == [TEST_ENCRYPTION_KEY]  # one comma-separated string, as before
    pragmas = settings.load(str(tmp_path), environ={"LANTERN_SQLITE_PRAGMAS__busy_timeout": "100"})[0].sqlite_pragmas
    assert pragmas == {**Settings().sqlite_pragmas, "busy_timeout": 100}  # one key of a mapping, as Flask did


def test_what_is_not_a_lantern_setting_reaches_flask_as_before(make_app, monkeypatch):
    monkeypatch.setenv("LANTERN_SECRET_KEY", "flask's own")
    app = make_app()
    assert app.config["SECRET_KEY"] == "flask's own" and app.testing
    assert app.config["DB_POOL_SIZE"] == settings.settings(app).db_pool_size == 20  # the checked values, for Flask


@pytest.mark.parametrize("variable, value, line", [
    ("DB_POOL_SIZE", "many", "DB_POOL_SIZE='many' (from LANTERN_DB_POOL_SIZE): should be a valid integer, unable "
                             "to parse string as an integer"),
    ("STREAM_WAKEUPS", "redis", "STREAM_WAKEUPS='redis' (from LANTERN_STREAM_WAKEUPS): should be 'auto' or 'off'"),
    ("SSE_HEARTBEAT_SECONDS", "0", "SSE_HEARTBEAT_SECONDS=0 (from LANTERN_SSE_HEARTBEAT_SECONDS): should be greater "
                                   "than 0"),
    ("DATABASE_URL", "postgresql://lantern:pw@db/x?sslmode=", None),  # a good one
    ("DATABASE_URL", "mysql://lantern:pw@db/x", "DATABASE_URL='mysql://lantern:***@db/x' (from LANTERN_DATABASE_URL): "
                                                "should be a URL starting with sqlite:// or postgresql:// or "
                                                "postgres://"),
    ("CHROME_STORE_CRX_URL", "https://store.example/{name}", "CHROME_STORE_CRX_URL='https://store.example/{name}' "
                                                             "(from LANTERN_CHROME_STORE_CRX_URL): should take only "
                                                             "these placeholders: {id}, {os}"),
    ("ENCRYPTION_KEYS", "not-a-key", "ENCRYPTION_KEYS=(hidden) (from LANTERN_ENCRYPTION_KEYS): should be Fernet keys "
                                     "(32 url-safe base64-encoded bytes each)"),
    ("BROWSER_HOST_TIMEOUT_SECONDS", "1", "BROWSER_HOST_TIMEOUT_SECONDS (1) should be longer than "
                                         "BROWSER_HOST_HEARTBEAT_SECONDS (2)"),
])
def test_a_wrong_variable_is_one_line_naming_it_its_value_and_what_it_takes(tmp_path, variable, value, line):
    environ = {f"LANTERN_{variable}": value}
    if line is None:
        assert settings.load(str(tmp_path), environ=environ)[0].database_url == value
        return
    with pytest.raises(SettingsError) as refused:
        settings.load(str(tmp_path), environ=environ)
    assert str(refused.value) == f"Lantern cannot start: {line}"


def test_a_wrong_value_in_the_instance_file_is_named_there(tmp_path, monkeypatch, make_app):
    (tmp_path / "config.py").write_text("LOG_LEVEL = 'LOUD'\n")
    monkeypatch.setattr("flask.Flask.auto_find_instance_path", lambda self: str(tmp_path))
    with pytest.raises(SettingsError, match=r"^Lantern cannot start: LOG_LEVEL='LOUD' \(from "
                                                     r"instance/config.py\): should be 'DEBUG', 'INFO', "):
        make_app()


def test_a_test_changes_a_setting_checked_as_at_start(app):
    settings.change(app, BLOB_GRACE_SECONDS=0)
    assert settings.settings(app).blob_grace_seconds == 0 == app.config["BLOB_GRACE_SECONDS"]
    with pytest.raises(SettingsError, match=r"BLOB_GRACE_SECONDS=-1 \(from change\(\)\): should be "):
        settings.change(app, BLOB_GRACE_SECONDS=-1)
    with pytest.raises(SettingsError, match="BLOB_GRACE_SECOND=0 .*: Extra inputs are not permitted"):
        settings.change(app, BLOB_GRACE_SECOND=0)
    assert settings.settings(app).blob_grace_seconds == 0
    with pytest.raises(TypeError, match=r"change it with app.core.settings.change\(app, BLOB_GRACE_SECONDS=...\)"):
        app.config["BLOB_GRACE_SECONDS"] = 5  # what the code reads would not change
    app.config["PROPAGATE_EXCEPTIONS"] = False  # Flask's own settings are Flask's


@pytest.mark.parametrize("name, written, read", [
    ("DATABASE_URL", "'postgresql:///lantern'", "postgresql:///lantern"),  # a local socket, as open_database takes
    ("DATABASE_URL", "'postgres:///lantern?host=/var/run/postgresql'", "postgres:///lantern?host=/var/run/postgresql"),
    ("LOG_LEVEL", "logging.DEBUG", "DEBUG"),  # what logging.basicConfig took
    ("LOG_LEVEL", "'WARN'", "WARNING"),
    ("LOG_LEVEL", "'NOTSET'", "NOTSET"),
    ("BLOB_DIR", "pathlib.Path('/srv/blobs')", "/srv/blobs"),
    ("MAX_CONTENT_LENGTH", "None", None),  # Flask's "no limit"
    ("TELEMETRY_RETENTION_SECONDS", "0.5", 0.5),  # fed to timedelta, as before
    ("REPLAY_RETENTION_SECONDS", "1.5", 1.5),
    ("API_KEY_ROTATION_GRACE_DAYS", "0.5", 0.5),
    ("TELEMETRY_ARCHIVE_SESSION_MAX_BYTES", "0", 0),  # no event archived (each counted as dropped)
    ("REPLAY_PROJECT_MAX_BYTES", "0", 0),  # no recording starts (403 replay_budget_exceeded)
])
def test_values_that_worked_before_typed_settings_still_load(tmp_path, name, written, read):
    (tmp_path / "config.py").write_text(f"import logging\nimport pathlib\n{name} = {written}\n")
    loaded, _ = settings.load(str(tmp_path), environ={})
    assert loaded.model_dump(by_alias=True)[name] == read


def test_a_numeric_log_level_reaches_logging_as_its_name(make_app, tmp_path):
    app = make_app(LOG_LEVEL=logging.WARNING)
    assert settings.settings(app).log_level == "WARNING" == app.config["LOG_LEVEL"]
    assert settings.load(str(tmp_path), environ={"LANTERN_LOG_LEVEL": "10"})[0].log_level == "DEBUG"  # JSON, as before


def test_no_way_of_writing_app_config_changes_a_setting_behind_settings(app):
    message = r"change it with app.core.settings.change\(app, BLOB_GRACE_SECONDS=...\)"
    with pytest.raises(TypeError, match=message):
        app.config.update(BLOB_GRACE_SECONDS=5)
    with pytest.raises(TypeError, match=message):
        app.config.update({"PROPAGATE_EXCEPTIONS": False, "BLOB_GRACE_SECONDS": 5})
    with pytest.raises(TypeError, match=message):
        app.config |= {"BLOB_GRACE_SECONDS": 5}
    del app.config["BLOB_GRACE_SECONDS"]
    with pytest.raises(TypeError, match=message):
        app.config.setdefault("BLOB_GRACE_SECONDS", 5)
    assert "BLOB_GRACE_SECONDS" not in app.config and app.config["PROPAGATE_EXCEPTIONS"] is None  # none half-done
    assert app.config.setdefault("DB_POOL_SIZE", 1) == 20  # there already: nothing written
    app.config.update(PROPAGATE_EXCEPTIONS=False)  # Flask's own settings are Flask's
    assert app.config.setdefault("MY_EXTENSION_OPTION", 3) == 3
    settings.change(app, BLOB_GRACE_SECONDS=7)
    assert app.config["BLOB_GRACE_SECONDS"] == 7 == settings.settings(app).blob_grace_seconds
