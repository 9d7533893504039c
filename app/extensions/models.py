"""An uploaded extension: its metadata here, its bytes in the blob store."""
from peewee import BigIntegerField, CharField, ForeignKeyField

from app.core import blobs, clock
from app.core.blobs import BlobRefField
from app.core.db import BaseModel, NamedInProject, UtcDateTimeField, save_or_conflict
from app.core.errors import conflict
from app.core.ids import new_id
from app.orgs.models import Project
from app.orgs.resources import active_resource_counter


def name_taken(name):
    return conflict("extension_name_taken", f"An extension named {name!r} already exists in this project.")


class Extension(NamedInProject, BaseModel):
    noun = "Extension"
    id = CharField(primary_key=True, default=new_id)
    project = ForeignKeyField(Project, backref="extensions", on_delete="CASCADE")
    # Optional; unique per project when set.
    name = CharField(null=True)
    # SHA-256 of the uploaded bytes: the checksum clients see, and the blob's name.
    checksum = BlobRefField()
    size_bytes = BigIntegerField()
    created_at = UtcDateTimeField(default=clock.now)
    last_used_at = UtcDateTimeField(null=True)

    @classmethod
    def ensure_name_free(cls, project, name):
        """409 before any byte is stored when the name is taken (the common clash)."""
        if name is not None and cls.select().where((cls.project == project) & (cls.name == name)).exists():
            raise name_taken(name)

    @classmethod
    def record(cls, project, name, checksum, size_bytes):
        """The row for a validated upload whose bytes are already in the blob store.

        A clash that slipped in since ensure_name_free is still a 409 (the unique
        index), and its blob is released (removed by the sweep after the grace).
        """
        extension = cls(project=project, name=name, checksum=checksum, size_bytes=size_bytes)
        try:
            save_or_conflict(extension, name_taken(name), force_insert=True)
        except Exception:
            blobs.release(BaseModel, checksum)
            raise
        return extension

    @property
    def path(self):
        return blobs.store().path(self.checksum)

    def delete_with_archive(self):
        self.delete_instance()
        blobs.release(BaseModel, self.checksum)


@active_resource_counter("extensions")
def project_extensions(project):
    return Extension.select().where(Extension.project == project.id).count()
