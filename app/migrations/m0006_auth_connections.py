"""Managed auth connections, their login flows, flow state events and health checks."""
from peewee import AutoField, BooleanField, CharField, ForeignKeyField, IntegerField, TextField

from app.core.crypto import CiphertextField
from app.core.db import UtcDateTimeField
from app.migrations import FrozenModel


def upgrade(migrator):
    database = migrator.database

    class Project(FrozenModel):
        id = CharField(primary_key=True)

    class Profile(FrozenModel):
        id = CharField(primary_key=True)

    class AuthConnection(FrozenModel):
        id = CharField(primary_key=True)
        project = ForeignKeyField(Project, on_delete="CASCADE")
        profile = ForeignKeyField(Profile, on_delete="CASCADE")
        domain = CharField()
        allowed_domains = TextField()
        auto_reauth = BooleanField()
        health_checks = BooleanField()
        health_check_interval = IntegerField()
        login_url = TextField(null=True)
        credential = TextField(null=True)
        record_session = BooleanField()
        save_credentials = BooleanField()
        browser = TextField()
        status = CharField()
        post_login_url = TextField(null=True)
        last_auth_at = UtcDateTimeField(null=True)
        last_auth_check_at = UtcDateTimeField(null=True)
        next_check_at = UtcDateTimeField(null=True, index=True)
        created_at = UtcDateTimeField()
        updated_at = UtcDateTimeField()

        class Meta:
            indexes = ((("profile", "domain"), True),)

    class LoginFlow(FrozenModel):
        id = CharField(primary_key=True)
        connection = ForeignKeyField(AuthConnection, on_delete="CASCADE")
        flow_type = CharField()
        status = CharField(index=True)
        step = CharField()
        prompt = TextField()
        interaction_id = CharField(null=True)
        website_error = TextField(null=True)
        error_code = CharField(null=True)
        error_message = TextField(null=True)
        external_action_message = TextField(null=True)
        post_login_url = TextField(null=True)
        hosted_url = TextField()
        handoff_code = CiphertextField()
        submission = CiphertextField(null=True)
        expires_at = UtcDateTimeField()
        started_at = UtcDateTimeField()
        updated_at = UtcDateTimeField()
        completed_at = UtcDateTimeField(null=True)

    class AuthEvent(FrozenModel):
        id = AutoField()
        connection = ForeignKeyField(AuthConnection, on_delete="CASCADE")
        flow = ForeignKeyField(LoginFlow, on_delete="CASCADE")
        timestamp = UtcDateTimeField()
        snapshot = TextField()

    class HealthCheck(FrozenModel):
        id = CharField(primary_key=True)
        connection = ForeignKeyField(AuthConnection, on_delete="CASCADE")
        status = CharField()
        previous_status = CharField()
        checked_at = UtcDateTimeField()
        error_code = CharField(null=True)
        error_message = TextField(null=True)

    models = [AuthConnection, LoginFlow, AuthEvent, HealthCheck]
    database.bind([Project, Profile] + models)
    database.create_tables(models)
