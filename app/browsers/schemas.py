"""Request and response shapes of browser sessions, telemetry and logs (contract 6.8)."""
import re
import zoneinfo
from urllib.parse import parse_qs, urlsplit

import marshmallow as ma
from flask import has_app_context
from marshmallow import validate

from app.browsers import chrome_policy
from app.browsers.models import END_REASONS
from app.config import MAX_TIMEOUT_SECONDS
from app.core import clock
from app.core.fields import Choice, JsonBoolean, JsonInteger, PathName
from app.core.paging import MAX_INT64, PageArgsSchema
from app.core.settings import settings
from app.core.timewindow import TimePoint
from app.invocations.schemas import LogLineSchema
from app.profiles.schemas import ProfileSchema
from lantern_wire import control
from lantern_wire.telemetry import CATEGORIES, CDP_METHODS, InvalidEvent, validate_event

REGIONS = ["us-east", "us-west", "eu-west", "ap-southeast"]
HEADLESS_MEMORY = list(control.HEADLESS_MEMORY)
HEADFUL_MEMORY = list(control.HEADFUL_MEMORY)
RECORD_MEMORY = ["1GiB", "2GiB", "4GiB", "6GiB", "8GiB", "12GiB", "16GiB"]
VIDEO_MEMORY = ["2GiB", "4GiB"]
# Categories a session's telemetry config can switch; `monitor` always flows with the others.
CONFIGURABLE_CATEGORIES = [c for c in CATEGORIES if c != "monitor"]
LOCALE = re.compile(r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$")


class SettingMin(validate.Range):
    """A range whose minimum is a setting, read when a value is checked (the tests' short idle timeouts); the
    OpenAPI document shows `default`, the setting's default."""

    def __init__(self, setting, default, maximum):
        super().__init__(default, maximum)
        self.setting = setting

    def __call__(self, value):
        minimum = getattr(settings(), self.setting) if has_app_context() else self.min
        return validate.Range(minimum, self.max)(value)


class Ref(ma.Schema):
    """A reference to another resource by id or by name."""

    id = ma.fields.String(validate=validate.Length(1, 255))
    name = ma.fields.String(validate=validate.Length(1, 255))

    @ma.validates_schema
    def id_or_name(self, data, **kwargs):
        if not data.get("id") and not data.get("name"):
            raise ma.ValidationError("Give id or name.", "id")


class ExactlyOneRef(Ref):
    @ma.validates_schema
    def not_both(self, data, **kwargs):
        if data.get("id") and data.get("name"):
            raise ma.ValidationError("Give id or name, not both.", "name")


class ProfileRef(Ref):
    save_changes = JsonBoolean()


class ProxyRef(ma.Schema):
    id = ma.fields.String(validate=validate.Length(1, 255))
    name = ma.fields.String(validate=validate.Length(1, 255))
    mode = Choice(["direct", "default"])


def timezone_name(value):
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ma.ValidationError(f"{value!r} is not an IANA time zone (e.g. Europe/Paris).") from None


class Location(ma.Schema):
    locale = ma.fields.String(allow_none=True, validate=validate.Regexp(LOCALE, error="Not a BCP 47 tag (en-US)."))
    timezone = ma.fields.String(allow_none=True, validate=timezone_name)


class Viewport(ma.Schema):
    width = JsonInteger(required=True, validate=validate.Range(100, 7680))
    height = JsonInteger(required=True, validate=validate.Range(100, 4320))
    refresh_rate = JsonInteger(validate=validate.Range(1, 240))


class ViewportUpdate(Viewport):
    force = JsonBoolean()


Hosts = ma.fields.List(ma.fields.String(validate=validate.Length(1, 253)))


class ProxyRoute(ma.Schema):
    hosts = ma.fields.List(ma.fields.String(validate=validate.Length(1, 253)), required=True,
                           validate=validate.Length(min=1))
    proxy = ma.fields.Nested(ProxyRef, required=True)


class Network(ma.Schema):
    allowed_hosts = ma.fields.List(ma.fields.String(validate=validate.Length(1, 253)),
                                   validate=validate.Length(min=1, error="allowed_hosts may not be empty."))
    private_hosts = ma.fields.List(ma.fields.String(validate=validate.Length(1, 253)))
    proxy_routes = ma.fields.List(ma.fields.Nested(ProxyRoute))


class NetworkUpdate(ma.Schema):
    allowed_hosts = ma.fields.List(ma.fields.String(validate=validate.Length(1, 253)), allow_none=True)
    expected_allowlist_revision = ma.fields.String()
    mutation_id = ma.fields.String(validate=validate.Length(1, 255))


class CategorySwitch(ma.Schema):
    enabled = JsonBoolean()


class CdpControl(ma.Schema):
    excluded_methods = ma.fields.List(Choice(CDP_METHODS))


class ControlSwitch(CategorySwitch):
    cdp = ma.fields.Nested(CdpControl)


BrowserCategories = ma.Schema.from_dict(
    {name: ma.fields.Nested(ControlSwitch if name == "control" else CategorySwitch)
     for name in CONFIGURABLE_CATEGORIES},
    name="BrowserCategories",
)


class OtlpExport(ma.Schema):
    enabled = JsonBoolean(metadata={"enum": [False]})
    destination = ma.fields.Nested(Ref)

    @ma.validates_schema
    def not_offered(self, data, **kwargs):
        if data.get("enabled") or data.get("destination"):
            raise ma.ValidationError("Lantern does not export telemetry over OTLP; read it from "
                                     "/browsers/{id}/telemetry/events or /telemetry/stream.", "enabled")


class TelemetryExport(ma.Schema):
    otlp = ma.fields.Nested(OtlpExport)


class TelemetryStorage(ma.Schema):
    enabled = JsonBoolean(metadata={"enum": [True]})

    @ma.validates("enabled")
    def kept(self, value, **kwargs):
        # Not storing needs an OTLP destination to send to, which Lantern does not offer.
        if value is False:
            raise ma.ValidationError("Captured telemetry is always stored: storage off needs an OTLP export "
                                     "destination, which Lantern does not offer.")


class TelemetryConfig(ma.Schema):
    enabled = JsonBoolean()
    browser = ma.fields.Nested(BrowserCategories)
    export = ma.fields.Nested(TelemetryExport)
    storage = ma.fields.Nested(TelemetryStorage)

    @ma.validates_schema
    def off_takes_no_categories(self, data, **kwargs):
        if data.get("enabled") is False and data.get("browser"):
            raise ma.ValidationError("enabled false cannot be combined with browser category settings.", "browser")


def websocket_or_http_url(value):
    try:
        parts = urlsplit(value)
    except ValueError as error:  # e.g. "ws://[x": an unclosed IPv6 host
        raise ma.ValidationError(f"Not a URL: {error}.") from None
    if parts.scheme not in ("ws", "wss", "http", "https") or not parts.netloc:
        raise ma.ValidationError("Must be a ws://, wss://, http:// or https:// URL.")
    # With a jwt= the SDK would send stream requests to the browser instead of to Lantern (contract 5).
    if "jwt" in parse_qs(parts.query):
        raise ma.ValidationError("Must not carry a jwt query parameter.")


# What websocket_or_http_url takes, for the OpenAPI document (a plain host; no jwt= either).
ENDPOINT_URL = {"pattern": r"^(wss?|https?)://[A-Za-z0-9.:_~-]+([/?#]\S*)?$"}


class DriverSettings(ma.Schema):
    """Lantern: where the external browser listens, when configuration does not say."""

    kind = Choice(["external"])
    cdp_ws_url = ma.fields.String(validate=websocket_or_http_url, metadata=ENDPOINT_URL)
    webdriver_ws_url = ma.fields.String(validate=websocket_or_http_url, metadata=ENDPOINT_URL)
    live_view_url = ma.fields.String(validate=websocket_or_http_url, metadata=ENDPOINT_URL)


MAX_TAGS = 50


def tag_map(value):
    if len(value) > MAX_TAGS:
        raise ma.ValidationError(f"At most {MAX_TAGS} tags.")


Tags = ma.fields.Dict(keys=ma.fields.String(validate=validate.Length(1, 255)),
                      values=ma.fields.String(validate=validate.Length(max=255)), validate=tag_map,
                      metadata={"maxProperties": MAX_TAGS})
# Documented: a subset of what the URL validator takes (dotted names of letters and digits, a port, a path).
START_URL = r"^https?://([A-Za-z0-9]{1,63}\.)*[A-Za-z0-9]{2,63}(:[0-9]{1,5})?(/|[/?#]\S+)?$"
StartUrl = ma.fields.Url(schemes={"http", "https"}, require_tld=False, metadata={"pattern": START_URL})


def policy_errors(found):
    """A ValidationError of chrome_policy.problems' findings: one message per policy, or one for the whole."""
    return ma.ValidationError(found[None] if None in found else {name: [text] for name, text in found.items()})


class ChromePolicy(ma.fields.Dict):
    """A session's Chrome enterprise policies, checked by the rules that hold for every session."""

    def __init__(self, **kwargs):
        super().__init__(keys=ma.fields.String(), metadata={"description": chrome_policy.described()}, **kwargs)

    def _deserialize(self, value, attr, data, **kwargs):
        # Counted before marshmallow reads each name, which took seconds for 400,000 of them.
        too_many = isinstance(value, dict) and chrome_policy.too_many(value)
        if too_many:
            raise ma.ValidationError(too_many)
        policies = super()._deserialize(value, attr, data, **kwargs)
        found = chrome_policy.problems(policies)
        if found:
            raise policy_errors(found)
        return policies


class BrowserCreateSchema(ma.Schema):
    chrome_policy = ChromePolicy()
    extensions = ma.fields.List(ma.fields.Nested(Ref), validate=validate.Length(max=20))
    gpu = JsonBoolean(load_default=False)
    headless = JsonBoolean(load_default=False)
    invocation_id = ma.fields.String(validate=validate.Length(1, 255))
    kiosk_mode = JsonBoolean(load_default=False)
    location = ma.fields.Nested(Location)
    memory = Choice(HEADLESS_MEMORY + HEADFUL_MEMORY)
    name = PathName()
    network = ma.fields.Nested(Network)
    profile = ma.fields.Nested(ProfileRef)
    proxy = ma.fields.Nested(ProxyRef)
    proxy_id = ma.fields.String(validate=validate.Length(1, 255), metadata={"deprecated": True})
    region = Choice(REGIONS, load_default="us-east")
    start_url = StartUrl
    stealth = JsonBoolean(load_default=False)
    tags = Tags
    telemetry = ma.fields.Nested(TelemetryConfig, allow_none=True)
    timeout_seconds = JsonInteger(load_default=60, validate=SettingMin("browser_min_timeout_seconds", 10,
                                                                     MAX_TIMEOUT_SECONDS),
                                  metadata={"description": "inactivity timeout, 10..259200 s"})
    vaults = ma.fields.List(ma.fields.Nested(ExactlyOneRef), validate=validate.Length(max=20))
    video_memory = Choice(VIDEO_MEMORY)
    viewport = ma.fields.Nested(Viewport)
    driver = ma.fields.Nested(DriverSettings, metadata={"description": "Lantern: the external driver's endpoints"})

    @ma.validates_schema
    def consistent(self, data, **kwargs):
        headless = data["headless"]
        memory = data.get("memory")
        if memory and memory not in (HEADLESS_MEMORY if headless else HEADFUL_MEMORY):
            allowed = ", ".join(HEADLESS_MEMORY if headless else HEADFUL_MEMORY)
            raise ma.ValidationError(f"A {'headless' if headless else 'headful'} browser takes memory {allowed}.",
                                     "memory")
        if data["gpu"] and (headless or data["region"] != "us-east"):
            raise ma.ValidationError("gpu needs headless false and region us-east.", "gpu")
        if data.get("video_memory") and not data["gpu"]:
            raise ma.ValidationError("video_memory needs gpu.", "video_memory")
        if data.get("proxy") and data.get("proxy_id"):
            raise ma.ValidationError("Give proxy or proxy_id, not both.", "proxy_id")
        found = chrome_policy.problems(data.get("chrome_policy") or {}, data)
        if found:
            raise ma.ValidationError({"chrome_policy": policy_errors(found).messages})


class BrowserUpdateSchema(ma.Schema):
    disable_default_proxy = JsonBoolean(metadata={"deprecated": True})
    location = ma.fields.Nested(Location)
    name = ma.fields.String(allow_none=True, metadata={"description": 'null or "" clears', "maxLength": 255,
                                                       "anyOf": [{"maxLength": 0}, {"pattern": PathName.pattern()}]})
    network = ma.fields.Nested(NetworkUpdate)
    profile = ma.fields.Nested(ProfileRef)
    proxy = ma.fields.Nested(ProxyRef)
    proxy_id = ma.fields.String(allow_none=True, metadata={"deprecated": True, "description": '"" removes'})
    start_url = ma.fields.String(metadata={"description": '"" leaves the page',
                                           "anyOf": [{"maxLength": 0}, {"pattern": START_URL}]})
    tags = ma.fields.Dict(keys=ma.fields.String(validate=validate.Length(1, 255)),
                          values=ma.fields.String(validate=validate.Length(max=255)), validate=tag_map,
                          allow_none=True, metadata={"description": "replaces all tags; null or {} clears",
                                                     "maxProperties": MAX_TAGS})
    telemetry = ma.fields.Nested(TelemetryConfig, allow_none=True,
                                 metadata={"description": "null or {} leaves it; enabled false stops capture"})
    viewport = ma.fields.Nested(ViewportUpdate)

    @ma.validates("name")
    def name_is_usable(self, value, **kwargs):
        if value:
            PathName().deserialize(value)

    @ma.validates("start_url")
    def start_url_is_a_url(self, value, **kwargs):
        if value:
            StartUrl.deserialize(value)


class BrowserSchema(ma.Schema):
    """The browser record (contract 6.8.1); built by app.browsers.sessions.record."""

    session_id = ma.fields.String(required=True)
    cdp_ws_url = ma.fields.String(required=True)
    webdriver_ws_url = ma.fields.String(required=True)
    created_at = ma.fields.String(required=True, metadata={"format": "date-time"})
    headless = ma.fields.Boolean(required=True)
    stealth = ma.fields.Boolean(required=True)
    timeout_seconds = ma.fields.Integer(required=True)
    memory = ma.fields.String(required=True, metadata={"enum": RECORD_MEMORY})
    region = ma.fields.String(required=True, metadata={"enum": REGIONS})
    browser_live_view_url = ma.fields.String()
    chrome_policy = ma.fields.Dict(metadata={"description": "The Chrome enterprise policies the browser runs "
                                                            "under, as given at create."})
    deleted_at = ma.fields.String(metadata={"format": "date-time"})
    gpu = ma.fields.Boolean()
    kiosk_mode = ma.fields.Boolean()
    profile_save_changes = ma.fields.Boolean()
    location = ma.fields.Dict()
    name = ma.fields.String()
    network = ma.fields.Dict()
    profile = ma.fields.Nested(ProfileSchema)
    proxy = ma.fields.Dict()
    proxy_id = ma.fields.String()
    start_url = ma.fields.String()
    tags = ma.fields.Dict(keys=ma.fields.String(), values=ma.fields.String())
    telemetry = ma.fields.Dict()
    usage = ma.fields.Dict(metadata={"description": "{uptime_ms}"})
    usage_status = ma.fields.String(metadata={"enum": ["pending", "ready"]})
    end_reason = ma.fields.String(metadata={
        "enum": END_REASONS,
        "description": "Lantern's, beside deleted_at on ended sessions: why the session ended (docs/browsers.md)"})
    vaults = ma.fields.List(ma.fields.Dict())
    video_memory = ma.fields.String()
    viewport = ma.fields.Dict()


class BrowserListArgsSchema(PageArgsSchema):
    query = ma.fields.String(metadata={"description": "substring of the name; exact session or profile id; "
                                                      "exact profile name"})
    region = Choice(REGIONS)
    status = Choice(["active", "deleted", "all"])
    include_deleted = ma.fields.Boolean(metadata={"deprecated": True, "description": "true: status=all"})


class IncludeDeletedArgsSchema(ma.Schema):
    include_deleted = ma.fields.Boolean(load_default=False)


def tag_filters(query_args):
    """The `tags[key]=value` pairs of a query string (the SDK's dict serialization)."""
    return {key[5:-1]: value for key, value in query_args.items(multi=True)
            if key.startswith("tags[") and key.endswith("]") and len(key) > 6}


class CommaSeparated(ma.fields.List):
    """Repeated parameters and one comma-joined value alike (`category=a,b` or `category=a&category=b`)."""

    def __init__(self, choices=None, **kwargs):
        inner = Choice(choices) if choices else ma.fields.String()
        super().__init__(inner, **kwargs)

    def _deserialize(self, value, attr, data, **kwargs):
        values = value if isinstance(value, list) else [value]
        split = [part.strip() for item in values for part in str(item).split(",") if part.strip()]
        return super()._deserialize(split, attr, data, **kwargs)


class TelemetryEventsArgsSchema(ma.Schema):
    since = TimePoint(metadata={"description": "RFC 3339 or a duration ago like 5m; default 5m; "
                                               "ignored with offset; not with order=desc"})
    until = TimePoint(metadata={"description": "exclusive end; RFC 3339 or a duration ago"})
    limit = ma.fields.Integer(load_default=20, validate=validate.Range(1, 100))
    offset = ma.fields.Integer(validate=validate.Range(0, MAX_INT64),
                               metadata={"description": "opaque cursor: the previous X-Next-Offset (not a seq); "
                                                        "0 is no cursor"})
    category = CommaSeparated(CATEGORIES)
    type = CommaSeparated()
    order = Choice(["asc", "desc"], load_default="asc")

    @ma.validates_schema
    def desc_has_no_since(self, data, **kwargs):
        if data["order"] == "desc" and "since" in data:
            raise ma.ValidationError("order=desc reads back from the newest event (or until, or the offset "
                                     "cursor); it does not take since.", "since")


class TelemetryStreamArgsSchema(ma.Schema):
    replay = ma.fields.String(metadata={"description": "all: from the oldest retained event; else new only"})
    type = CommaSeparated(metadata={"description": "only these event types"})


class EnvelopeSchema(ma.Schema):
    seq = ma.fields.Integer(required=True)
    event = ma.fields.Dict(required=True, metadata={"description": "telemetry event (contract 6.8.4)"})


class TelemetryIngestSchema(ma.Schema):
    events = ma.fields.List(ma.fields.Raw(), required=True,
                            metadata={"description": "events (the envelope's `event`, contract 6.8.4); seq is "
                                                     "assigned here; an empty list only records activity"})

    @ma.post_load
    def valid_events(self, data, **kwargs):
        """The normalized events; a batch with any invalid event is refused whole."""
        most = settings().telemetry_max_batch
        if len(data["events"]) > most:
            raise ma.ValidationError(f"At most {most} events per request.", "events")
        now_us = clock.micros(clock.now())
        valid, errors = [], {}
        for index, event in enumerate(data["events"]):
            try:
                valid.append(validate_event(event, now_us=now_us))
            except InvalidEvent as error:
                errors[index] = error.messages
        if errors:
            raise ma.ValidationError({"events": errors})
        return valid


class TelemetryAcceptedSchema(ma.Schema):
    accepted = ma.fields.Integer(metadata={"description": "events stored and streamed"})
    dropped = ma.fields.Integer(metadata={"description": "events not kept: telemetry or their category is off"})
    last_seq = ma.fields.Integer(metadata={"description": "seq of the last accepted event (0: none yet)"})


class LogSourceSchema(ma.Schema):
    source = Choice(["path", "supervisor"], required=True)
    path = ma.fields.String(validate=validate.Length(1, 1024))
    supervisor_process = ma.fields.String(validate=validate.Length(1, 255))

    @ma.validates_schema
    def names_its_log(self, data, **kwargs):
        wanted = "path" if data["source"] == "path" else "supervisor_process"
        if not data.get(wanted):
            raise ma.ValidationError(f"source={data['source']} needs {wanted}.", wanted)
        other = "supervisor_process" if wanted == "path" else "path"
        if data.get(other):
            raise ma.ValidationError(f"{other} goes with source={'supervisor' if wanted == 'path' else 'path'}.",
                                     other)

    @ma.post_load
    def log_name(self, data, **kwargs):
        data["log_name"] = data.get("path") or data.get("supervisor_process")
        return data


class LogStreamArgsSchema(LogSourceSchema):
    follow = ma.fields.Boolean(load_default=True, metadata={"description": "keep streaming new lines"})


class LogIngestSchema(LogSourceSchema):
    lines = ma.fields.List(ma.fields.Nested(LogLineSchema), required=True, validate=validate.Length(1, 1000))


class InvocationBrowsersSchema(ma.Schema):
    browsers = ma.fields.List(ma.fields.Nested(BrowserSchema))


class CdpVersionSchema(ma.Schema):
    """Chromium's /json/version, with the WebSocket URL of Lantern's relay."""

    class Meta:
        unknown = ma.INCLUDE

    Browser = ma.fields.String()
    Protocol_Version = ma.fields.String(data_key="Protocol-Version")
    User_Agent = ma.fields.String(data_key="User-Agent")
    webSocketDebuggerUrl = ma.fields.String()


class CdpTargetSchema(ma.Schema):
    """One of Chromium's /json/list targets, reached through Lantern's relay."""

    id = ma.fields.String()
    type = ma.fields.String()
    title = ma.fields.String()
    url = ma.fields.String()
    webSocketDebuggerUrl = ma.fields.String()
