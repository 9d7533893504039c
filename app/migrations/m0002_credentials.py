"""Credentials and credential providers."""
from peewee import BooleanField, CharField, ForeignKeyField, IntegerField, TextField

from app.core.db import UtcDateTimeField
from app.migrations import FrozenModel


def upgrade(migrator):
    database = migrator.database

    class Organization(FrozenModel):
        id = CharField(primary_key=True)

    class Project(FrozenModel):
        id = CharField(primary_key=True)

    class Credential(FrozenModel):
        id = CharField(primary_key=True)
        project = ForeignKeyField(Project, on_delete="CASCADE")
        name = CharField()
        domain = CharField(index=True)
        values_ciphertext = TextField()
        value_keys_json = TextField()
        sso_provider = CharField(null=True)
        totp_secret_ciphertext = TextField(null=True)
        totp_algorithm = CharField(null=True)
        totp_digits = IntegerField(null=True)
        totp_period = IntegerField(null=True)
        created_at = UtcDateTimeField()
        updated_at = UtcDateTimeField()

        class Meta:
            indexes = ((("project", "name"), True),)

    class CredentialProvider(FrozenModel):
        id = CharField(primary_key=True)
        org = ForeignKeyField(Organization, on_delete="CASCADE")
        name = CharField()
        name_key = CharField()
        provider_type = CharField()
        url = CharField(null=True)
        token_ciphertext = TextField()
        cache_ttl_seconds = IntegerField()
        enabled = BooleanField()
        priority = IntegerField()
        created_at = UtcDateTimeField()
        updated_at = UtcDateTimeField()

        class Meta:
            indexes = ((("org", "name_key"), True),)

    models = [Credential, CredentialProvider]
    database.bind([Organization, Project] + models)
    database.create_tables(models)
