"""Recordings of a session's screen (the replays API): one row each, the video a blob."""
from peewee import BigIntegerField, CharField, ForeignKeyField, IntegerField, TextField

from app.core.db import UtcDateTimeField
from app.migrations import FrozenModel


def upgrade(migrator):
    class BrowserSession(FrozenModel):
        id = CharField(primary_key=True)

    class Replay(FrozenModel):
        id = CharField(primary_key=True)
        session = ForeignKeyField(BrowserSession, on_delete="CASCADE")
        status = CharField()
        framerate = IntegerField()
        max_duration_seconds = IntegerField()
        started_at = UtcDateTimeField()
        finished_at = UtcDateTimeField(null=True)
        size_bytes = BigIntegerField(null=True)
        video = CharField(null=True)
        error = TextField(null=True)

        class Meta:
            indexes = ((("session", "started_at"), False),)

    migrator.database.bind([BrowserSession, Replay])
    migrator.database.create_tables([Replay])
