"""Versioned migrations apply once, in order."""
from app.core import migrations


def test_migrations_are_numbered_without_gaps():
    versions = [v for v, _ in migrations.available()]
    assert versions == list(range(1, len(versions) + 1))


def test_upgrade_is_idempotent(app):
    database = app.extensions["database"]
    assert migrations.upgrade(database) == []
    database.close_all()
    with database.connection_context():
        assert {"organization", "project", "api_key", "user"} <= set(database.get_tables())


def test_fresh_sqlite_database_upgrades_from_nothing(tmp_path):
    from app.core.db import open_database

    database = open_database(f"sqlite:///{tmp_path / 'fresh.db'}")
    applied = migrations.upgrade(database)
    assert applied == [name for _, name in migrations.available()]
    assert migrations.upgrade(database) == []
    database.close_all()
