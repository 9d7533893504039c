"""Request and response shapes of credentials and credential providers (contract 6.3)."""
import marshmallow as ma
from marshmallow import validate

from app.core.fields import Choice, JsonBoolean, JsonInteger, Name, PathName, UtcDateTime
from app.core.paging import PageArgsSchema
from app.core.text import host_of
from app.credentials import totp
from app.credentials.connect import token_problem

PROVIDER_TYPES = ("onepassword", "vendorpassword")


class Domain(ma.fields.String):
    """A host name; a pasted URL is reduced to its host, case-folded."""

    def _deserialize(self, value, attr, data, **kwargs):
        host = host_of(super()._deserialize(value, attr, data, **kwargs).strip())
        if not host or " " in host or len(host) > 253:
            raise ma.ValidationError("Not a valid domain.")
        return host


class CredentialSchema(ma.Schema):
    id = ma.fields.String()
    name = ma.fields.String()
    domain = ma.fields.String()
    created_at = UtcDateTime()
    updated_at = UtcDateTime()
    has_values = ma.fields.Boolean()
    has_totp_secret = ma.fields.Boolean()
    value_keys = ma.fields.List(ma.fields.String(), metadata={"description": "names of the stored values"})
    sso_provider = ma.fields.String(allow_none=True)
    totp_algorithm = ma.fields.String(allow_none=True, metadata={"enum": list(totp.ALGORITHMS)})
    totp_digits = ma.fields.Integer(allow_none=True)
    totp_period = ma.fields.Integer(allow_none=True)
    totp_code = ma.fields.String(metadata={"description": "only when this request set a TOTP secret"})
    totp_code_expires_at = UtcDateTime(metadata={"description": "only with totp_code"})


class CredentialListItemSchema(CredentialSchema):
    """Lists omit value_keys, as the real API does."""

    class Meta:
        exclude = ("value_keys",)


def values_field(**kwargs):
    return ma.fields.Dict(keys=ma.fields.String(validate=validate.Length(1, 255)), values=ma.fields.String(),
                          metadata={"description": "write-only; stored encrypted"}, **kwargs)


class TotpInputSchema(ma.Schema):
    totp_secret = ma.fields.String(metadata={"description": "base32 (16-128 characters) or an otpauth://totp/ URI"})
    totp_algorithm = Choice(list(totp.ALGORITHMS))
    totp_digits = JsonInteger(validate=validate.Range(*totp.DIGITS_RANGE))
    totp_period = JsonInteger(validate=validate.Range(*totp.PERIOD_RANGE))


class CredentialCreateSchema(TotpInputSchema):
    domain = Domain(required=True)
    name = PathName(required=True)
    values = values_field(required=True)
    sso_provider = ma.fields.String(validate=validate.Length(max=255))


class CredentialUpdateSchema(TotpInputSchema):
    name = PathName()
    values = values_field()
    remove_value_keys = ma.fields.List(ma.fields.String(), metadata={"description": "removed before values merge"})
    sso_provider = ma.fields.String(allow_none=True, validate=validate.Length(max=255),
                                    metadata={"description": "\"\" or null removes it"})


class CredentialListArgsSchema(PageArgsSchema):
    domain = ma.fields.String(metadata={"description": "exact domain"})
    query = ma.fields.String(metadata={"description": "substring of name or domain; exact id"})


class TotpCodeSchema(ma.Schema):
    code = ma.fields.String()
    expires_at = UtcDateTime()


class CredentialProviderSchema(ma.Schema):
    id = ma.fields.String()
    name = ma.fields.String()
    provider_type = ma.fields.String(metadata={"enum": list(PROVIDER_TYPES)})
    url = ma.fields.String(allow_none=True,
                           metadata={"description": "Lantern: the Connect server; null = configured default"})
    enabled = ma.fields.Boolean()
    priority = ma.fields.Integer()
    created_at = UtcDateTime()
    updated_at = UtcDateTime()


class ProviderUrl(ma.fields.Url):
    """The Connect server: http(s), at most 255 characters, no user:password (it would be echoed back)."""

    def __init__(self, **kwargs):
        super().__init__(schemes={"http", "https"}, require_tld=False, validate=validate.Length(max=255), **kwargs)

    def _deserialize(self, value, attr, data, **kwargs):
        url = super()._deserialize(value, attr, data, **kwargs)
        if url and "@" in url.split("://", 1)[-1].split("/", 1)[0]:
            raise ma.ValidationError("Put credentials in token, not in the URL.")
        return url


class ProviderToken(ma.fields.String):
    """A bearer token, taken exactly as given: surrounding whitespace is refused, not trimmed.

    Only visible ASCII fits an Authorization header; the error never quotes the token.
    """

    def __init__(self, **kwargs):
        super().__init__(load_only=True, metadata={"description": "write-only; visible ASCII (RFC 6750)"}, **kwargs)

    def _deserialize(self, value, attr, data, **kwargs):
        token = super()._deserialize(value, attr, data, **kwargs)
        problem = token_problem(token)
        if problem:
            raise ma.ValidationError(problem)
        return token


class CredentialProviderCreateSchema(ma.Schema):
    name = Name(required=True)
    provider_type = Choice(
        PROVIDER_TYPES, error="provider_type must be one of: " + ", ".join(PROVIDER_TYPES) + ".", required=True)
    token = ProviderToken(required=True)
    url = ProviderUrl(allow_none=True)
    cache_ttl_seconds = JsonInteger(validate=validate.Range(0, 86400))
    enabled = JsonBoolean()
    priority = JsonInteger(validate=validate.Range(-1_000_000, 1_000_000))


class CredentialProviderUpdateSchema(ma.Schema):
    name = Name()
    token = ProviderToken()
    url = ProviderUrl(allow_none=True, metadata={"description": "null returns to the configured default"})
    cache_ttl_seconds = JsonInteger(validate=validate.Range(0, 86400))
    enabled = JsonBoolean()
    priority = JsonInteger(validate=validate.Range(-1_000_000, 1_000_000))


class VaultSchema(ma.Schema):
    id = ma.fields.String()
    name = ma.fields.String()


class ProviderTestResultSchema(ma.Schema):
    success = ma.fields.Boolean()
    vaults = ma.fields.List(ma.fields.Nested(VaultSchema))
    error = ma.fields.String()


class ProviderItemSchema(ma.Schema):
    id = ma.fields.String()
    path = ma.fields.String(metadata={"description": "VaultName/ItemTitle"})
    title = ma.fields.String()
    vault_id = ma.fields.String()
    vault_name = ma.fields.String()
    urls = ma.fields.List(ma.fields.String())


class ProviderItemsSchema(ma.Schema):
    items = ma.fields.List(ma.fields.Nested(ProviderItemSchema))


class ProviderListArgsSchema(PageArgsSchema):
    query = ma.fields.String(metadata={"description": "case-insensitive substring of the name; exact id"})
