"""Request and response shapes of profiles (contract 6.4)."""
import marshmallow as ma
from marshmallow import validate

from app.core import clock
from app.core.fields import Choice, UtcDateTime
from app.core.paging import PageArgsSchema

# The rule a browser session's `profile.name` follows, so every name is usable there.
PROFILE_NAME = validate.Regexp(r"^[A-Za-z0-9._-]{1,255}$",
                               error="A profile name is 1 to 255 letters, digits, '.', '_' or '-'.")


class ProfileSchema(ma.Schema):
    id = ma.fields.String()
    name = ma.fields.String(allow_none=True)
    created_at = UtcDateTime()
    updated_at = UtcDateTime()
    last_used_at = UtcDateTime(allow_none=True)


def profile_record(profile):
    """ProfileSchema's dump of a profile, as a browser record shows it (sessions.record_dumped; tests/core/
    test_records.py holds them equal)."""
    return {"id": profile.id, "name": profile.name, "created_at": clock.isoformat(profile.created_at),
            "updated_at": clock.isoformat(profile.updated_at),
            "last_used_at": None if profile.last_used_at is None else clock.isoformat(profile.last_used_at)}


class ProfileCreateSchema(ma.Schema):
    name = ma.fields.String(validate=PROFILE_NAME)


class ProfileUpdateSchema(ma.Schema):
    name = ma.fields.String(required=True, validate=PROFILE_NAME)


class ProfileListArgsSchema(PageArgsSchema):
    name = ma.fields.String(metadata={"description": "exact name"})
    query = ma.fields.String(metadata={"description": "substring of the name; exact id"})


class ProfileDownloadArgsSchema(ma.Schema):
    format = Choice(["tar.zst", "tar"], metadata={"description": "accepted for compatibility; Lantern profiles are "
                                                       "JSON storage states and always download as JSON"})
