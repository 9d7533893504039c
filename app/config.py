"""Every setting of the app: its type, default, bounds and why. app/core/settings.py reads them once at start.

Overridden by `instance/config.py`, then by `LANTERN_<NAME>` environment variables (JSON when the value parses as
JSON the setting takes: `LANTERN_DB_POOL_SIZE=40`, `LANTERN_SQLITE_PRAGMAS='{"busy_timeout": 9000}'`; an empty
variable is None where None is allowed). A wrong type or value stops the start with one line naming it.
Code reads `settings().db_pool_size`; `app.config["DB_POOL_SIZE"]` holds the same checked value (Flask's own use).
"""
import logging
import os
from datetime import datetime, timezone
from typing import Annotated, Literal
from urllib.parse import urlsplit

from cryptography.fernet import Fernet
from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    model_validator,
)

from lantern_wire import control

# The longest inactivity timeout a session may ask for (the contract's three days).
MAX_TIMEOUT_SECONDS = 259200


# Schemes whose URL may name no host: a file, or a local socket (postgresql:///lantern?host=/var/run/postgresql).
HOSTLESS_SCHEMES = ("sqlite", "unix", "postgresql", "postgres")


def url(*schemes, **placeholders):
    """A URL with one of `schemes`; a template's `{name}` placeholders must be those given (checked by formatting)."""
    def check(value):
        parts = urlsplit(value)
        if parts.scheme not in schemes or not (parts.netloc or parts.scheme in HOSTLESS_SCHEMES):
            raise ValueError(f"should be a URL starting with {' or '.join(s + '://' for s in schemes)}")
        try:
            value.format(**placeholders)
        except (KeyError, IndexError, ValueError):
            names = ", ".join("{" + name + "}" for name in placeholders) or "none"
            raise ValueError(f"should take only these placeholders: {names}") from None
        return value
    return AfterValidator(check)


def comma_separated(value):
    return [item.strip() for item in value.split(",") if item.strip()] if isinstance(value, str) else value


def log_level_name(value):
    """A level as logging.basicConfig took it (a number such as logging.DEBUG, or a name such as WARN) as the name
    logging gives it; anything else is left for the field's check to name."""
    if isinstance(value, int) and not isinstance(value, bool):
        return logging.getLevelName(value)  # "Level 15" for a number with no name: refused below
    if isinstance(value, str) and isinstance(logging.getLevelNamesMapping().get(value), int):
        return logging.getLevelName(logging.getLevelNamesMapping()[value])  # WARN -> WARNING, FATAL -> CRITICAL
    return value


def path_text(value):
    return os.fspath(value) if isinstance(value, os.PathLike) else value


def fernet_keys(keys):
    if not keys:  # a variable set to "" is a mistake, not a request for a new key
        raise ValueError("should hold at least one Fernet key (unset it for a generated one)")
    for key in keys:
        try:
            Fernet(key)
        except ValueError:
            raise ValueError("should be Fernet keys (32 url-safe base64-encoded bytes each)") from None
    return keys


HttpUrl = Annotated[str, url("http", "https")]
Seconds = PositiveFloat
Framerate = Annotated[int, Field(ge=1, le=control.MAX_FRAMERATE)]  # what a host records at
# 0 (or None) turns a periodic task off (app/core/periodic.py).
Interval = NonNegativeFloat | None


class Settings(BaseModel):
    """The app's settings, frozen. Attribute `db_pool_size` is setting DB_POOL_SIZE (LANTERN_DB_POOL_SIZE)."""

    model_config = ConfigDict(extra="forbid", frozen=True, alias_generator=str.upper, validate_by_name=True)

    # Largest request body read (413 beyond); JSON bodies of this API are small.
    max_content_length: PositiveInt | None = 16 * 1024 * 1024  # None: no limit (Flask's)

    # Logging: one line per request at INFO, with its request id. LOG_FORMAT "text" escapes
    # control characters (no forged lines); "json" writes one object per line for log shippers.
    log_level: Annotated[Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL", "NOTSET"],
                         BeforeValidator(log_level_name)] = "INFO"
    log_format: Literal["text", "json"] = "text"

    # Database. None means SQLite in the instance folder (`instance/lantern.db`).
    database_url: Annotated[str, url("sqlite", "postgresql", "postgres")] | None = None
    # WAL lets readers proceed during a write; the busy timeout absorbs short write locks.
    sqlite_pragmas: dict[str, int | float | str] = {"journal_mode": "wal", "foreign_keys": 1, "busy_timeout": 5000,
                                                    "synchronous": "normal"}
    # Postgres pool per worker process; streams hold a connection only briefly.
    db_pool_size: PositiveInt = 20
    db_pool_timeout_seconds: Seconds = 10

    # Organizations. A new organization may run this many browsers at once.
    default_org_max_concurrent_sessions: NonNegativeInt = 10
    # Floor for managed-auth health checks, reported in GET /org/limits.
    min_health_check_interval_seconds: PositiveInt = 300

    # Encryption at rest (credential values, TOTP secrets, provider tokens): Fernet
    # keys, newest first (a list, or one comma-separated string). None: a key is
    # generated once into instance/encryption.keys. Rotate with `flask secrets rotate`.
    encryption_keys: Annotated[list[str], BeforeValidator(comma_separated), AfterValidator(fernet_keys)] | None = None

    # Credential providers: the 1Password Connect server used when a provider has no
    # url of its own, and how long Lantern waits for it.
    onepassword_connect_url: HttpUrl = "http://127.0.0.1:8080"
    credential_provider_timeout_seconds: Seconds = 10

    # Blobs (profile states, extension archives), content-addressed files. None: instance/blobs.
    blob_dir: Annotated[str, BeforeValidator(path_text)] | None = None
    # An unreferenced blob is removed only once this old (see app/core/blobs.py).
    blob_grace_seconds: NonNegativeFloat = 3600

    # Extensions: largest upload (413 beyond) and largest size once unpacked (400 beyond,
    # the zip-bomb guard). The CRX URL template takes {id} and {os}; tests point it at 127.0.0.1.
    extension_max_upload_bytes: PositiveInt = 100 * 1024 * 1024
    extension_max_uncompressed_bytes: PositiveInt = 512 * 1024 * 1024
    extension_max_entries: PositiveInt = 10000
    chrome_store_crx_url: Annotated[str, url("http", "https", id="", os="")] = (
        "https://clients2.google.com/service/update2/crx?response=redirect&os={os}"
        "&arch=x64&prodversion=131.0&acceptformat=crx2,crx3&x=id%3D{id}%26uc")
    chrome_store_timeout_seconds: Seconds = 30

    # Event streams: keepalive when idle; how often a follower re-reads the database
    # when no wake-up came (the fallback: wake-ups from other processes come at once);
    # how many items each in-memory channel keeps.
    sse_heartbeat_seconds: Seconds = 15
    stream_poll_seconds: Seconds = 1.0
    stream_channel_capacity: PositiveInt = 1024
    # Wake-ups across processes (app/streams/wakeups.py): "auto" uses Redis when REDIS_URL is
    # set, else LISTEN/NOTIFY on Postgres, else a poll of the stream_wakeup table on SQLite every
    # STREAM_WAKEUP_POLL_SECONDS per process; "off" leaves followers to STREAM_POLL_SECONDS.
    stream_wakeups: Literal["auto", "off"] = "auto"
    stream_wakeup_poll_seconds: Seconds = 0.02
    redis_url: Annotated[str, url("redis", "rediss", "unix")] | None = None
    # Stream admission (app/core/streamslots.py): each worker admits at most STREAMS_PER_WORKER
    # streams (None: its gunicorn worker_connections less STREAMS_RESERVED_CONNECTIONS, kept for
    # ordinary requests; STREAMS_DEFAULT_WORKER_CONNECTIONS outside gunicorn), and one organization
    # at most STREAMS_PER_ORG of them (None: half the worker's cap); past either, 503 with this Retry-After.
    streams_per_worker: PositiveInt | None = None
    streams_reserved_connections: NonNegativeInt = 100
    streams_default_worker_connections: PositiveInt = 1000
    streams_per_org: PositiveInt | None = None
    streams_retry_after_seconds: NonNegativeInt = 5

    # Invocations: how long a sync create waits for the result; the default async
    # timeout; Retry-After of a 429; longest log line kept whole (longer ones are cut).
    invocation_sync_wait_seconds: NonNegativeFloat = 100
    invocation_async_timeout_seconds: PositiveInt = 900
    # A sync invocation nobody finishes fails after this long, freeing its slot.
    invocation_sync_timeout_seconds: PositiveInt = 900
    invocation_retry_after_seconds: NonNegativeInt = 5
    invocation_log_line_max_bytes: PositiveInt = 16 * 1024
    # A new organization's cap on running invocations (None: only project caps apply).
    default_org_max_concurrent_invocations: NonNegativeInt | None = None

    # Browser sessions. The driver that provides browsers: "host" (a real Chromium on a
    # browser host, below) or "external" (they run elsewhere and report through the ingest
    # endpoints). The external driver's endpoints, as templates taking {session_id}, unless
    # the create request's `driver` gives them.
    browser_driver: Literal["host", "external"] = "host"
    browser_external_cdp_ws_url: Annotated[str, url("ws", "wss", session_id="")] = (
        "ws://127.0.0.1:9222/devtools/browser/{session_id}")
    browser_external_webdriver_ws_url: Annotated[str, url("ws", "wss", session_id="")] = (
        "ws://127.0.0.1:4444/session/{session_id}")
    browser_external_live_view_url: Annotated[str, url("http", "https", session_id="")] | None = None
    # Retry-After of a 429 when a session cap is reached.
    browser_retry_after_seconds: NonNegativeInt = 5
    # Browser hosts (browserhost/, its own program with its own settings: browserhost/settings.py;
    # app/browsers/hosts.py): each is added with a credential (`flask browsers hosts add NAME --address URL`) and
    # heart-beats every BROWSER_HOST_HEARTBEAT_SECONDS (the app tells it at registration); one silent
    # for BROWSER_HOST_TIMEOUT_SECONDS is lost (no new sessions; its sessions end). A browser's start (sandbox,
    # Chromium, DevTools) has BROWSER_HOST_START_SECONDS on a busy machine; past it, the create answers 503 saying so.
    browser_host_heartbeat_seconds: Seconds = 2
    browser_host_timeout_seconds: Seconds = 10
    browser_host_start_seconds: Seconds = 30
    # Retry-After of a 503 when no browser host has room.
    browser_capacity_retry_after_seconds: NonNegativeInt = 5
    # Where clients reach this server (cdp_ws_url; the hosted login page unless AUTH_PUBLIC_BASE_URL
    # says otherwise), e.g. https://lantern.example.com behind a proxy; None: the host of each request.
    public_base_url: HttpUrl | None = None
    # The shortest inactivity timeout a session may ask for (timeout_seconds); the contract's 10 s.
    browser_min_timeout_seconds: Annotated[int, Field(ge=1, le=MAX_TIMEOUT_SECONDS)] = 10
    # How often each worker ends sessions past their idle deadline (wsgi.py's periodic loop).
    browser_idle_sweep_seconds: Interval = 5
    # Activity within this many seconds of the last recorded one is not written again
    # (an idle deadline is that much less exact; one write per request would cost more).
    browser_activity_write_seconds: NonNegativeFloat = 1

    # Telemetry: events kept per session for the live stream (oldest evicted), most
    # events per ingest request, how long the archive keeps events, and how often each
    # worker prunes it (wsgi.py's periodic loop; `flask browsers prune` does it on demand).
    telemetry_buffer_events: PositiveInt = 1024
    telemetry_max_batch: PositiveInt = 1000
    telemetry_retention_seconds: Seconds = 7 * 86400
    telemetry_prune_interval_seconds: Interval = 300
    # The most a session's events (their JSON) take in the archive over its life; past it, its events are dropped
    # and counted (telemetry_dropped), and its `lantern` log says so once. A page logging without end wrote 9.5 MB/s.
    # None: no bound; 0: no event is archived (each is counted as dropped).
    telemetry_archive_session_max_bytes: NonNegativeInt | None = 256 * 1024 * 1024
    # Browser log lines: most lines a log stream replays before following.
    browser_log_replay_lines: NonNegativeInt = 1000
    # Recordings of a session's screen (replays): the framerate when none is asked and the highest one, the
    # longest recording (and the default of max_duration_in_seconds), the largest video kept (the rest of a
    # longer one is not), and how long recordings are kept after they end (then deleted, as telemetry is).
    replay_default_framerate: Framerate = 10
    replay_max_framerate: Framerate = 30
    replay_max_seconds: PositiveInt = 3600
    replay_max_bytes: PositiveInt = 1024 * 1024 * 1024
    replay_retention_seconds: Seconds = 7 * 86400
    # The most a project's saved recordings take (until the retention deletes them): past it, a new recording is
    # refused (403 replay_budget_exceeded); one under way is kept whole. None: no bound; 0: no recording starts.
    replay_project_max_bytes: NonNegativeInt | None = 20 * 1024 * 1024 * 1024

    # Managed auth: how long a login flow may take, its HTTP timeout per request to the
    # site, where the hosted page is reached (None: PUBLIC_BASE_URL, else the host of the
    # request that started the flow), and how often each worker looks for due health checks (wsgi.py's
    # periodic loop; 0: never).
    auth_flow_lifetime_seconds: PositiveInt = 300
    auth_flow_http_timeout_seconds: Seconds = 10
    auth_public_base_url: HttpUrl | None = None
    auth_health_check_poll_seconds: Interval = 60

    # API keys. How long a rotated key keeps working unless the caller says otherwise.
    api_key_rotation_grace_days: NonNegativeFloat = 7

    # The deprecated /projects routes (spec part 9): served with Deprecation and
    # Sunset headers until the sunset instant (RFC 3339), then 410 Gone.
    projects_routes_deprecated_at: AwareDatetime = datetime(2026, 5, 24, tzinfo=timezone.utc)
    projects_routes_sunset_at: AwareDatetime = datetime(2026, 11, 24, tzinfo=timezone.utc)

    # OpenAPI document and interactive docs (public, no key needed).
    api_title: str = "Lantern"
    api_version: str = "0.1.0"
    openapi_version: str = "3.0.3"
    openapi_url_prefix: str = "/"
    openapi_json_path: str = "openapi.json"
    openapi_swagger_ui_path: str = "docs"
    # Where /docs loads Swagger UI's files from: a path here is served by Lantern itself from the
    # pinned flask-swagger-ui package (app/core/docs.py), so the docs work offline; a URL (a CDN) is
    # used as it is. No online validator badge: it would send the document's URL to swagger.io.
    openapi_swagger_ui_url: str = "/docs/assets/"
    openapi_swagger_ui_config: dict = {"validatorUrl": None}
    api_spec_options: dict = {
        "info": {"description": "Organization Management and Browser Automation API, self-hosted."},
        "components": {"securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearerAuth": []}],
    }

    @model_validator(mode="after")
    def consistent(self):
        if self.replay_default_framerate > self.replay_max_framerate:
            raise ValueError(f"REPLAY_DEFAULT_FRAMERATE ({self.replay_default_framerate}) should be at most "
                             f"REPLAY_MAX_FRAMERATE ({self.replay_max_framerate})")
        if self.browser_host_timeout_seconds <= self.browser_host_heartbeat_seconds:
            raise ValueError(f"BROWSER_HOST_TIMEOUT_SECONDS ({self.browser_host_timeout_seconds:g}) should be longer "
                             f"than BROWSER_HOST_HEARTBEAT_SECONDS ({self.browser_host_heartbeat_seconds:g})")
        if self.projects_routes_sunset_at <= self.projects_routes_deprecated_at:
            raise ValueError("PROJECTS_ROUTES_SUNSET_AT should be after PROJECTS_ROUTES_DEPRECATED_AT")
        return self
