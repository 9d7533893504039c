"""Request and response shapes of managed auth connections (contract 6.7)."""
import marshmallow as ma
from marshmallow import validate

from app.browsers.schemas import REGIONS, ProxyRef, TelemetryConfig
from app.core.fields import Choice, JsonBoolean, JsonInteger
from app.core.paging import PageArgsSchema
from app.core.settings import settings
from app.profiles.schemas import PROFILE_NAME

MAX_HEALTH_CHECK_INTERVAL = 86400
HOST = validate.Regexp(r"^(\*\.)?[A-Za-z0-9.-]{1,253}(:\d{1,5})?$", error="Not a host name (example.com).")


class BrowserConfig(ma.Schema):
    proxy = ma.fields.Nested(ProxyRef)
    region = Choice(REGIONS)
    stealth = JsonBoolean()
    telemetry = ma.fields.Nested(TelemetryConfig, allow_none=True)


class CredentialRef(ma.Schema):
    name = ma.fields.String(validate=validate.Length(1, 255))
    provider = ma.fields.String(validate=validate.Length(1, 255))
    path = ma.fields.String(validate=validate.Length(1, 1024))
    auto = JsonBoolean()

    @ma.validates_schema
    def one_source(self, data, **kwargs):
        if data.get("name") and data.get("provider"):
            raise ma.ValidationError("Give name (a Lantern credential) or provider, not both.", "name")
        if data.get("name"):
            if data.get("path") or data.get("auto"):
                raise ma.ValidationError("path and auto go with provider.", "path")
            return
        if not data.get("provider"):
            raise ma.ValidationError("Give name, or provider with path or auto: true.", "name")
        if bool(data.get("path")) == bool(data.get("auto")):
            raise ma.ValidationError("With provider, give path (Vault/Title) or auto: true.", "path")


def health_check_interval_in_range(value):
    floor = settings().min_health_check_interval_seconds
    if not floor <= value <= MAX_HEALTH_CHECK_INTERVAL:
        raise ma.ValidationError(f"Must be between {floor} and {MAX_HEALTH_CHECK_INTERVAL} seconds.")


LoginUrl = ma.fields.Url(schemes={"http", "https"}, require_tld=False)


class ConnectionSettings(ma.Schema):
    """What create and update both take."""

    allowed_domains = ma.fields.List(ma.fields.String(validate=HOST), validate=validate.Length(max=50))
    auto_reauth = JsonBoolean()
    browser = ma.fields.Nested(BrowserConfig)
    browser_telemetry = ma.fields.Nested(TelemetryConfig, allow_none=True, metadata={"deprecated": True})
    credential = ma.fields.Nested(CredentialRef, allow_none=True)
    health_check_interval = JsonInteger(validate=health_check_interval_in_range)
    health_checks = JsonBoolean()
    proxy = ma.fields.Nested(ProxyRef, metadata={"deprecated": True})
    record_session = JsonBoolean()
    save_credentials = JsonBoolean()


class ConnectionCreateSchema(ConnectionSettings):
    domain = ma.fields.String(required=True, validate=HOST)
    profile_name = ma.fields.String(required=True, validate=PROFILE_NAME)
    login_url = LoginUrl


class ConnectionUpdateSchema(ConnectionSettings):
    login_url = ma.fields.String(metadata={"description": '"" clears'})

    @ma.validates("login_url")
    def a_url_or_nothing(self, value, **kwargs):
        if value:
            LoginUrl.deserialize(value)


class ConnectionListArgsSchema(PageArgsSchema):
    domain = ma.fields.String()
    profile_name = ma.fields.String()
    query = ma.fields.String(metadata={"description": "exact id; substring of the domain or profile name"})


class LoginSchema(ma.Schema):
    browser = ma.fields.Nested(BrowserConfig)
    browser_telemetry = ma.fields.Nested(TelemetryConfig, allow_none=True, metadata={"deprecated": True})
    proxy = ma.fields.Nested(ProxyRef, metadata={"deprecated": True})
    record_session = JsonBoolean()
    skill_mode = Choice(["enabled", "disabled"])


class LoginResponseSchema(ma.Schema):
    id = ma.fields.String(required=True, metadata={"description": "the connection id"})
    flow_expires_at = ma.fields.String(required=True, metadata={"format": "date-time"})
    flow_type = ma.fields.String(required=True, metadata={"enum": ["LOGIN", "REAUTH"]})
    hosted_url = ma.fields.String(required=True, metadata={
        "description": "shown here only: Lantern keeps just a hash of its code; each login call gives a new one"})
    handoff_code = ma.fields.String(metadata={"description": "the code in hosted_url"})


class SubmitSchema(ma.Schema):
    interaction_id = ma.fields.String()
    field_values = ma.fields.Dict(keys=ma.fields.String(), values=ma.fields.String())
    selected_choice_id = ma.fields.String()
    fields = ma.fields.Dict(keys=ma.fields.String(), values=ma.fields.String(), metadata={"deprecated": True})
    mfa_option_id = ma.fields.String(metadata={"deprecated": True})
    sign_in_option_id = ma.fields.String(metadata={"deprecated": True})
    sso_button_selector = ma.fields.String(metadata={"deprecated": True})
    sso_provider = ma.fields.String(metadata={"deprecated": True})


class SubmitResponseSchema(ma.Schema):
    accepted = ma.fields.Boolean(required=True)


class ConnectionSchema(ma.Schema):
    """The ManagedAuth record (contract 6.7); built by app.auth_connections.connections.record."""

    id = ma.fields.String(required=True)
    domain = ma.fields.String(required=True)
    profile_name = ma.fields.String(required=True)
    record_session = ma.fields.Boolean(required=True)
    save_credentials = ma.fields.Boolean(required=True)
    status = ma.fields.String(required=True, metadata={"enum": ["AUTHENTICATED", "NEEDS_AUTH"]})
    allowed_domains = ma.fields.List(ma.fields.String())
    auto_reauth = ma.fields.Boolean()
    health_checks = ma.fields.Boolean()
    health_check_interval = ma.fields.Integer()
    can_reauth = ma.fields.Boolean()
    can_reauth_reason = ma.fields.String()
    browser = ma.fields.Dict()
    credential = ma.fields.Dict()
    login_url = ma.fields.String()
    post_login_url = ma.fields.String()
    last_auth_at = ma.fields.String(metadata={"format": "date-time"})
    last_auth_check_at = ma.fields.String(metadata={"format": "date-time"})
    flow_status = ma.fields.String()
    flow_step = ma.fields.String()
    flow_type = ma.fields.String()
    flow_expires_at = ma.fields.String(metadata={"format": "date-time"})
    interaction_id = ma.fields.String()
    fields = ma.fields.List(ma.fields.Dict())
    choices = ma.fields.List(ma.fields.Dict())
    discovered_fields = ma.fields.List(ma.fields.Dict())
    mfa_options = ma.fields.List(ma.fields.Dict())
    sign_in_options = ma.fields.List(ma.fields.Dict())
    pending_sso_buttons = ma.fields.List(ma.fields.Dict())
    website_error = ma.fields.String()
    error_code = ma.fields.String()
    error_message = ma.fields.String()
    external_action_message = ma.fields.String()


class TimelineArgsSchema(PageArgsSchema):
    type = Choice(["login", "reauth", "health_check"])


class TimelineEventSchema(ma.Schema):
    id = ma.fields.String(required=True)
    type = ma.fields.String(required=True)
    status = ma.fields.String(required=True)
    timestamp = ma.fields.String(required=True, metadata={"format": "date-time"})
    step = ma.fields.String()
    previous_status = ma.fields.String()
    updated_at = ma.fields.String(metadata={"format": "date-time"})
    completed_at = ma.fields.String(metadata={"format": "date-time"})
    error_code = ma.fields.String()
    error_message = ma.fields.String()
    website_error = ma.fields.String()
