"""Invocations, their events, and the organization's invocation cap."""
from peewee import AutoField, BooleanField, CharField, ForeignKeyField, IntegerField, TextField

from app.core.db import UtcDateTimeField
from app.migrations import FrozenModel


def upgrade(migrator):
    database = migrator.database

    class Project(FrozenModel):
        id = CharField(primary_key=True)

    class Invocation(FrozenModel):
        id = CharField(primary_key=True)
        project = ForeignKeyField(Project, on_delete="CASCADE")
        app_name = CharField()
        action_name = CharField()
        version = CharField()
        payload = TextField(null=True)
        output = TextField(null=True)
        status = CharField(index=True)
        status_reason = TextField(null=True)
        is_async = BooleanField()
        async_timeout_seconds = IntegerField(null=True)
        started_at = UtcDateTimeField(index=True)
        deadline = UtcDateTimeField(null=True, index=True)
        finished_at = UtcDateTimeField(null=True)

    class InvocationEvent(FrozenModel):
        id = AutoField()
        invocation = ForeignKeyField(Invocation, on_delete="CASCADE")
        kind = CharField()
        timestamp = UtcDateTimeField()
        message = TextField(null=True)
        snapshot = TextField(null=True)

    models = [Invocation, InvocationEvent]
    database.bind([Project] + models)
    database.create_tables(models)
    from playhouse.migrate import migrate
    migrate(migrator.add_column("organization", "max_concurrent_invocations", IntegerField(null=True)))
