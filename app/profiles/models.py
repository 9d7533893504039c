"""A browser profile and its stored state."""
import json

import marshmallow as ma
from peewee import CharField, ForeignKeyField

from app.core import blobs, clock
from app.core.blobs import BlobRefField
from app.core.db import BaseModel, NamedInProject, UtcDateTimeField, save_or_conflict
from app.core.errors import conflict
from app.core.ids import new_id
from app.orgs.models import Project
from app.orgs.resources import active_resource_counter

EMPTY_STATE = {"cookies": [], "origins": []}


class CookieSchema(ma.Schema):
    class Meta:
        unknown = ma.INCLUDE

    name = ma.fields.String(required=True)
    value = ma.fields.String(required=True)
    domain = ma.fields.String(required=True)
    path = ma.fields.String(required=True)


class StorageItemSchema(ma.Schema):
    name = ma.fields.String(required=True)
    value = ma.fields.String(required=True)


class OriginSchema(ma.Schema):
    class Meta:
        unknown = ma.INCLUDE

    origin = ma.fields.String(required=True)
    localStorage = ma.fields.List(ma.fields.Nested(StorageItemSchema), load_default=list)


class StorageStateSchema(ma.Schema):
    """The widely used storage-state layout: {"cookies": [...], "origins": [...]}."""

    cookies = ma.fields.List(ma.fields.Nested(CookieSchema), required=True)
    origins = ma.fields.List(ma.fields.Nested(OriginSchema), required=True)


def name_taken(name):
    return conflict("profile_name_taken", f"A profile named {name!r} already exists in this project.")


class Profile(NamedInProject, BaseModel):
    """Sessions refer to a profile by id, so renaming never breaks saving its state."""

    noun = "Profile"
    id = CharField(primary_key=True, default=new_id)
    # The logical project: requests without a project header act in the default
    # project, so "unscoped" and default-project profiles are one namespace.
    project = ForeignKeyField(Project, backref="profiles", on_delete="CASCADE")
    # Optional; unique per project when set (a unique index, so concurrent creates
    # and renames to one name cannot both succeed).
    name = CharField(null=True)
    state_blob = BlobRefField(null=True)
    created_at = UtcDateTimeField(default=clock.now)
    updated_at = UtcDateTimeField(default=clock.now)
    last_used_at = UtcDateTimeField(null=True)

    @classmethod
    def create_in(cls, project, name=None):
        now = clock.now()
        profile = cls(project=project, name=name, created_at=now, updated_at=now)
        save_or_conflict(profile, name_taken(name), force_insert=True)
        return profile

    def rename(self, name):
        self.name = name
        self.updated_at = clock.now()
        save_or_conflict(self, name_taken(name))

    def state(self):
        """The stored storage state; an empty one for a profile never used."""
        return json.loads(blobs.store().read(self.state_blob)) if self.state_blob else dict(EMPTY_STATE)

    def delete_with_state(self):
        self.delete_instance()
        blobs.release(BaseModel, self.state_blob)


def save_profile_state(profile_id, state):
    """Store a new state for the profile (called by browser sessions when they end).

    By id, so a rename while the session ran changes nothing; raises
    marshmallow.ValidationError for a state that is not in the storage-state layout.
    """
    state = StorageStateSchema().load(state)
    profile = Profile.get_by_id(profile_id)
    digest = blobs.store().put_bytes(json.dumps(state, sort_keys=True).encode())
    previous = profile.state_blob
    now = clock.now()
    profile.state_blob, profile.updated_at, profile.last_used_at = digest, now, now
    profile.save()
    if previous != digest:
        blobs.release(BaseModel, previous)
    return profile


@active_resource_counter("profiles")
def project_profiles(project):
    return Profile.select().where(Profile.project == project.id).count()
