"""Request and response shapes of API keys and organization limits (contract 6.1, 6.2)."""
import marshmallow as ma
from marshmallow import validate

from app.core import clock
from app.core.fields import Choice, JsonInteger, Name, UtcDateTime
from app.core.paging import PageArgsSchema


class CreatedBySchema(ma.Schema):
    id = ma.fields.String()
    email = ma.fields.String()
    name = ma.fields.String(allow_none=True)


class ApiKeySchema(ma.Schema):
    id = ma.fields.String()
    name = ma.fields.String()
    created_at = UtcDateTime()
    created_by = ma.fields.Nested(CreatedBySchema)
    masked_key = ma.fields.String()
    expires_at = UtcDateTime(allow_none=True)
    deleted_at = UtcDateTime(allow_none=True)
    project_id = ma.fields.String(allow_none=True)
    project_name = ma.fields.String(allow_none=True)


def api_key_record(key_id, name, masked_key, created_at, creator_id, creator_email, creator_name, expires_at,
                   deleted_at, project_id, project_name):
    """ApiKeySchema's dump of a key, from its values (a row of the key list's query, or a key read with its creator
    and project): the hot reads skip marshmallow (tests/core/test_records.py holds them equal)."""
    return {"id": key_id, "name": name, "created_at": clock.isoformat(created_at),
            "created_by": {"id": creator_id, "email": creator_email, "name": creator_name}, "masked_key": masked_key,
            "expires_at": None if expires_at is None else clock.isoformat(expires_at),
            "deleted_at": None if deleted_at is None else clock.isoformat(deleted_at),
            "project_id": project_id, "project_name": project_name}


def api_key_record_of(key):
    """api_key_record of a key read with its creator and project (ApiKey.in_org)."""
    return api_key_record(key.id, key.name, key.masked_key, key.created_at, key.created_by.id, key.created_by.email,
                          key.created_by.name, key.expires_at, key.deleted_at, key.project_id, key.project_name)


class CreatedApiKeySchema(ApiKeySchema):
    key = ma.fields.String(attribute="plaintext", metadata={"description": "the plaintext key, shown once"})


def refuse_policy(value):
    raise ma.ValidationError("API key policies are not supported by this server; create the key without "
                             "a policy (use a project-scoped key to limit what it can reach).")


class ApiKeyCreateSchema(ma.Schema):
    name = Name(required=True)
    days_to_expire = JsonInteger(allow_none=True, validate=validate.Range(1, 3650))
    expires_at = UtcDateTime(allow_none=True)
    project_id = ma.fields.String(allow_none=True, validate=validate.Length(min=1))
    policy = ma.fields.Raw(validate=refuse_policy,
                           metadata={"description": "not supported: Lantern does not enforce key policies, so any "
                                                    "policy is refused with 400"})

    @ma.validates_schema
    def one_expiry(self, data, **kwargs):
        if data.get("days_to_expire") is not None and data.get("expires_at") is not None:
            raise ma.ValidationError("Give days_to_expire or expires_at, not both.", "expires_at")
        if data.get("expires_at") is not None and data["expires_at"] <= clock.now():
            raise ma.ValidationError("expires_at must be in the future.", "expires_at")


class ApiKeyUpdateSchema(ma.Schema):
    name = Name(required=True)


class ApiKeyRotateSchema(ma.Schema):
    days_to_expire = JsonInteger(allow_none=True, validate=validate.Range(1, 3650))
    expire_in_days = JsonInteger(allow_none=True, validate=validate.Range(0, 3650),
                                       metadata={"description": "grace period of the old key (default 7)"})

    @ma.validates_schema
    def successor_outlives_grace(self, data, **kwargs):
        days, grace = data.get("days_to_expire"), data.get("expire_in_days")
        if days is not None and grace is not None and days < grace:
            raise ma.ValidationError("days_to_expire may not be shorter than expire_in_days.", "days_to_expire")


class ApiKeyListArgsSchema(PageArgsSchema):
    name = ma.fields.String(metadata={"description": "exact name, case- and accent-insensitive"})
    query = ma.fields.String(metadata={"description": "substring of name, creator or project; exact id or masked key"})
    status = Choice(["active", "deleted", "all"], load_default="active")
    include_deleted = ma.fields.Boolean(metadata={"description": "deprecated alias of status=all"})
    sort_by = Choice(["created_at", "name", "expires_at"], load_default="created_at")
    sort_direction = Choice(["asc", "desc"], load_default="desc")


class ApiKeyGetArgsSchema(ma.Schema):
    include_deleted = ma.fields.Boolean(load_default=False)


class OrgLimitsSchema(ma.Schema):
    max_concurrent_sessions = ma.fields.Integer(allow_none=True,
                                                metadata={"description": "the organization's concurrency limit"})
    default_project_max_concurrent_sessions = ma.fields.Integer(allow_none=True)
    concurrent_sessions_used = ma.fields.Integer(allow_none=True)
    concurrent_sessions_available = ma.fields.Integer(allow_none=True)
    auth_connections_used = ma.fields.Integer()
    max_auth_connections = ma.fields.Integer(allow_none=True)
    vaults_used = ma.fields.Integer()
    max_vaults = ma.fields.Integer(allow_none=True)
    min_health_check_interval_seconds = ma.fields.Integer()


class OrgLimitsUpdateSchema(ma.Schema):
    default_project_max_concurrent_sessions = JsonInteger(
        allow_none=True, validate=validate.Range(0, 1_000_000),
        metadata={"description": "0 or null removes the default; may not exceed the organization limit"},
    )
