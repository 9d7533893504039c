"""Browser hosts, and the host each browser session runs on."""
from peewee import BooleanField, CharField, ForeignKeyField, IntegerField, TextField
from playhouse.migrate import migrate

from app.core.db import UtcDateTimeField
from app.migrations import FrozenModel


def upgrade(migrator):
    database = migrator.database

    class BrowserHost(FrozenModel):
        id = CharField(primary_key=True)
        name = CharField(unique=True)
        address = CharField()
        capacity = IntegerField()
        headful = BooleanField()
        unavailable_reason = TextField(null=True)
        started_at = UtcDateTimeField()
        heartbeat_at = UtcDateTimeField()

    database.bind([BrowserHost])
    database.create_tables([BrowserHost])
    host = ForeignKeyField(BrowserHost, null=True, on_delete="SET NULL", field=BrowserHost.id)
    migrate(migrator.add_column("browser_session", "host_id", host))  # indexed, as a foreign key
