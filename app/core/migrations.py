"""Versioned schema migrations: app/migrations/mNNNN_*.py, each with `upgrade(migrator)`."""
import importlib
import logging
import pkgutil

from peewee import CharField, IntegerField, Model
from playhouse.migrate import SchemaMigrator

import app.migrations
from app.core import clock
from app.core.db import UtcDateTimeField

logger = logging.getLogger(__name__)


def _schema_version_model(database):
    class SchemaVersion(Model):
        version = IntegerField(primary_key=True)
        name = CharField()
        applied_at = UtcDateTimeField()

        class Meta:
            table_name = "schema_version"

    SchemaVersion.bind(database)
    return SchemaVersion


def available():
    """(version, name) of every migration module, oldest first."""
    found = []
    for info in pkgutil.iter_modules(app.migrations.__path__):
        if info.name.startswith("m") and info.name[1:5].isdigit():
            found.append((int(info.name[1:5]), info.name))
    return sorted(found)


def upgrade(database):
    """Apply every migration not yet recorded; each in its own transaction."""
    SchemaVersion = _schema_version_model(database)
    with database.connection_context():
        database.create_tables([SchemaVersion], safe=True)
        applied = {row.version for row in SchemaVersion.select()}
        done = []
        for version, name in available():
            if version in applied:
                continue
            module = importlib.import_module(f"app.migrations.{name}")
            with database.atomic():
                module.upgrade(SchemaMigrator.from_database(database))
                SchemaVersion.create(version=version, name=name, applied_at=clock.now())
            logger.info("applied migration %s", name)
            done.append(name)
    return done
