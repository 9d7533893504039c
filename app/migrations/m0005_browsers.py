"""Browser sessions, their tags, telemetry archive and log lines."""
from peewee import BigAutoField, BigIntegerField, BooleanField, CharField, ForeignKeyField, IntegerField, TextField

from app.core.db import UtcDateTimeField
from app.migrations import FrozenModel


def upgrade(migrator):
    database = migrator.database

    class Project(FrozenModel):
        id = CharField(primary_key=True)

    class Profile(FrozenModel):
        id = CharField(primary_key=True)

    class BrowserSession(FrozenModel):
        id = CharField(primary_key=True)
        project = ForeignKeyField(Project, on_delete="CASCADE")
        name = CharField(null=True)
        invocation_id = CharField(null=True, index=True)
        profile = ForeignKeyField(Profile, null=True, on_delete="SET NULL")
        profile_save_changes = BooleanField()
        headless = BooleanField()
        stealth = BooleanField()
        memory = CharField()
        region = CharField()
        timeout_seconds = IntegerField()
        settings = TextField()
        telemetry_enabled = BooleanField()
        driver = CharField()
        cdp_ws_url = TextField()
        webdriver_ws_url = TextField()
        live_view_url = TextField(null=True)
        created_at = UtcDateTimeField()
        last_active_at = UtcDateTimeField()
        idle_deadline = UtcDateTimeField()
        deleted_at = UtcDateTimeField(null=True)
        end_reason = CharField(null=True)
        last_seq = BigIntegerField()
        telemetry_dropped = BigIntegerField()

    class BrowserTag(FrozenModel):
        session = ForeignKeyField(BrowserSession, on_delete="CASCADE")
        key = CharField()
        value = CharField()

        class Meta:
            indexes = ((("session", "key"), True), (("key", "value"), False))

    class TelemetryEvent(FrozenModel):
        id = BigAutoField()
        session = ForeignKeyField(BrowserSession, on_delete="CASCADE", index=False)
        seq = BigIntegerField()
        ts = BigIntegerField()
        category = CharField()
        type = CharField()
        body = TextField()
        received_at = UtcDateTimeField(index=True)

        class Meta:
            indexes = ((("session", "seq"), True), (("session", "id"), False), (("session", "ts"), False),
                       (("session", "category", "id"), False))

    class BrowserLogLine(FrozenModel):
        id = BigAutoField()
        session = ForeignKeyField(BrowserSession, on_delete="CASCADE", index=False)
        source = CharField()
        log_name = TextField()
        timestamp = UtcDateTimeField()
        message = TextField()
        received_at = UtcDateTimeField(index=True)

        class Meta:
            indexes = ((("session", "source", "log_name", "id"), False),)

    BrowserSession.add_index(BrowserSession.index(BrowserSession.project, BrowserSession.name, unique=True)
                             .where(BrowserSession.deleted_at.is_null()))
    BrowserSession.add_index(BrowserSession.index(BrowserSession.deleted_at, BrowserSession.idle_deadline))
    models = [BrowserSession, BrowserTag, TelemetryEvent, BrowserLogLine]
    database.bind([Project, Profile] + models)
    database.create_tables(models)
