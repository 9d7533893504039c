"""Wake-ups of event streams across processes on SQLite (app/streams/wakeups.py): a short-lived
row per announced change, polled by each process that follows streams. Created on Postgres too
(where LISTEN/NOTIFY carries them instead), so a database keeps one schema whatever the engine."""
from peewee import AutoField, BigIntegerField, TextField

from app.migrations import FrozenModel


def upgrade(migrator):
    class StreamWakeup(FrozenModel):
        id = AutoField()
        payload = TextField()
        created_at = BigIntegerField(index=True)  # Unix microseconds: pruned after a minute

    migrator.database.bind([StreamWakeup])
    migrator.database.create_tables([StreamWakeup])
