"""Organizations, users, projects and API keys."""
from peewee import CharField, ForeignKeyField, IntegerField

from app.core.db import UtcDateTimeField
from app.migrations import FrozenModel


def upgrade(migrator):
    database = migrator.database

    class Organization(FrozenModel):
        id = CharField(primary_key=True)
        name = CharField()
        max_concurrent_sessions = IntegerField(null=True)
        default_project_max_concurrent_sessions = IntegerField(null=True)
        default_project_id = CharField(null=True)
        created_at = UtcDateTimeField()

    class User(FrozenModel):
        id = CharField(primary_key=True)
        org = ForeignKeyField(Organization, on_delete="CASCADE")
        email = CharField()
        name = CharField(null=True)
        created_at = UtcDateTimeField()

        class Meta:
            indexes = ((("org", "email"), True),)

    class Project(FrozenModel):
        id = CharField(primary_key=True)
        org = ForeignKeyField(Organization, on_delete="CASCADE")
        name = CharField()
        name_key = CharField()
        status = CharField()
        created_at = UtcDateTimeField()
        updated_at = UtcDateTimeField()
        deleted_at = UtcDateTimeField(null=True)
        max_concurrent_sessions = IntegerField(null=True)
        max_concurrent_invocations = IntegerField(null=True)

    class ApiKey(FrozenModel):
        id = CharField(primary_key=True)
        org = ForeignKeyField(Organization, on_delete="CASCADE")
        project = ForeignKeyField(Project, null=True)
        name = CharField()
        name_key = CharField()
        key_hash = CharField(unique=True)
        masked_key = CharField()
        created_by = ForeignKeyField(User)
        created_at = UtcDateTimeField()
        expires_at = UtcDateTimeField(null=True)
        deleted_at = UtcDateTimeField(null=True)
        lifetime_seconds = IntegerField(null=True)

    Project.add_index(Project.index(Project.org, Project.name_key, unique=True)
                      .where(Project.deleted_at.is_null()))
    models = [Organization, User, Project, ApiKey]
    database.bind(models)
    database.create_tables(models)
