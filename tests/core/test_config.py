"""Configuration layers: app/config.py, then instance/config.py, then LANTERN_ variables."""
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
