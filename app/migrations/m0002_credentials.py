"""Credentials and credential providers."""
from peewee import BooleanField, CharField, ForeignKeyField, IntegerField, Model, TextField

from app.core.db import UtcDateTimeField


def upgrade(migrator):
    database = migrator.database

    class Base(Model):
        class Meta:
            legacy_table_names = False

    class Organization(Base):
        id = CharField(primary_key=True)

    class Project(Base):
        id = CharField(primary_key=True)

    class Credential(Base):
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

    class CredentialProvider(Base):
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
