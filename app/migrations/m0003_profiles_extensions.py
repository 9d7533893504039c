"""Browser profiles and extensions."""
from peewee import BigIntegerField, CharField, ForeignKeyField

from app.core.db import UtcDateTimeField
from app.migrations import FrozenModel


def upgrade(migrator):
    database = migrator.database

    class Project(FrozenModel):
        id = CharField(primary_key=True)

    class Profile(FrozenModel):
        id = CharField(primary_key=True)
        project = ForeignKeyField(Project, on_delete="CASCADE")
        name = CharField(null=True)
        state_blob = CharField(null=True, index=True)
        created_at = UtcDateTimeField()
        updated_at = UtcDateTimeField()
        last_used_at = UtcDateTimeField(null=True)

        class Meta:
            # Unique names per project; NULL names (unnamed profiles) never collide.
            indexes = ((("project", "name"), True),)

    class Extension(FrozenModel):
        id = CharField(primary_key=True)
        project = ForeignKeyField(Project, on_delete="CASCADE")
        name = CharField(null=True)
        checksum = CharField(index=True)
        size_bytes = BigIntegerField()
        created_at = UtcDateTimeField()
        last_used_at = UtcDateTimeField(null=True)

        class Meta:
            indexes = ((("project", "name"), True),)

    models = [Profile, Extension]
    database.bind([Project] + models)
    database.create_tables(models)
