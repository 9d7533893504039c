"""Every setting, its default and why.

Overridden by `instance/config.py`, then by `LANTERN_<NAME>` environment variables
(values that parse as JSON are read as JSON: `LANTERN_DB_POOL_SIZE=40`).
"""


class DefaultConfig:
    # Largest request body read (413 beyond); JSON bodies of this API are small.
    MAX_CONTENT_LENGTH = 16 * 1024 * 1024

    # Logging: one line per request at INFO, with its request id. LOG_FORMAT "text" escapes
    # control characters (no forged lines); "json" writes one object per line for log shippers.
    LOG_LEVEL = "INFO"
    LOG_FORMAT = "text"

    # Database. None means SQLite in the instance folder (`instance/lantern.db`).
    DATABASE_URL = None
    # WAL lets readers proceed during a write; the busy timeout absorbs short write locks.
    SQLITE_PRAGMAS = {"journal_mode": "wal", "foreign_keys": 1, "busy_timeout": 5000, "synchronous": "normal"}
    # Postgres pool per worker process; streams hold a connection only briefly.
    DB_POOL_SIZE = 20
    DB_POOL_TIMEOUT_SECONDS = 10

    # Organizations. A new organization may run this many browsers at once.
    DEFAULT_ORG_MAX_CONCURRENT_SESSIONS = 10
    # Floor for managed-auth health checks, reported in GET /org/limits.
    MIN_HEALTH_CHECK_INTERVAL_SECONDS = 300

    # Encryption at rest (credential values, TOTP secrets, provider tokens): Fernet
    # keys, newest first (a list, or one comma-separated string). None: a key is
    # generated once into instance/encryption.keys. Rotate with `flask secrets rotate`.
    ENCRYPTION_KEYS = None

    # Credential providers: the 1Password Connect server used when a provider has no
    # url of its own, and how long Lantern waits for it.
    ONEPASSWORD_CONNECT_URL = "http://127.0.0.1:8080"
    CREDENTIAL_PROVIDER_TIMEOUT_SECONDS = 10

    # Blobs (profile states, extension archives), content-addressed files. None: instance/blobs.
    BLOB_DIR = None
    # An unreferenced blob is removed only once this old (see app/core/blobs.py).
    BLOB_GRACE_SECONDS = 3600

    # Extensions: largest upload (413 beyond) and largest size once unpacked (400 beyond,
    # the zip-bomb guard). The CRX URL template takes {id} and {os}; tests point it at 127.0.0.1.
    EXTENSION_MAX_UPLOAD_BYTES = 100 * 1024 * 1024
    EXTENSION_MAX_UNCOMPRESSED_BYTES = 512 * 1024 * 1024
    EXTENSION_MAX_ENTRIES = 10000
    CHROME_STORE_CRX_URL = ("https://clients2.google.com/service/update2/crx?response=redirect&os={os}"
                            "&arch=x64&prodversion=131.0&acceptformat=crx2,crx3&x=id%3D{id}%26uc")
    CHROME_STORE_TIMEOUT_SECONDS = 30

    # Event streams: keepalive when idle; how often a follower re-reads the database
    # when no wake-up came (the fallback: wake-ups from other processes come at once);
    # how many items each in-memory channel keeps.
    SSE_HEARTBEAT_SECONDS = 15
    STREAM_POLL_SECONDS = 1.0
    STREAM_CHANNEL_CAPACITY = 1024
    # Wake-ups across processes (app/streams/wakeups.py): "auto" uses Redis when REDIS_URL is
    # set, else LISTEN/NOTIFY on Postgres, else a poll of the stream_wakeup table on SQLite every
    # STREAM_WAKEUP_POLL_SECONDS per process; "off" leaves followers to STREAM_POLL_SECONDS.
    STREAM_WAKEUPS = "auto"
    STREAM_WAKEUP_POLL_SECONDS = 0.02
    REDIS_URL = None
    # Stream admission (app/core/streamslots.py): each worker admits at most STREAMS_PER_WORKER
    # streams (None: its gunicorn worker_connections less STREAMS_RESERVED_CONNECTIONS, kept for
    # ordinary requests; STREAMS_DEFAULT_WORKER_CONNECTIONS outside gunicorn), and one organization
    # at most STREAMS_PER_ORG of them (None: half the worker's cap); past either, 503 with this Retry-After.
    STREAMS_PER_WORKER = None
    STREAMS_RESERVED_CONNECTIONS = 100
    STREAMS_DEFAULT_WORKER_CONNECTIONS = 1000
    STREAMS_PER_ORG = None
    STREAMS_RETRY_AFTER_SECONDS = 5

    # Invocations: how long a sync create waits for the result; the default async
    # timeout; Retry-After of a 429; longest log line kept whole (longer ones are cut).
    INVOCATION_SYNC_WAIT_SECONDS = 100
    INVOCATION_ASYNC_TIMEOUT_SECONDS = 900
    # A sync invocation nobody finishes fails after this long, freeing its slot.
    INVOCATION_SYNC_TIMEOUT_SECONDS = 900
    INVOCATION_RETRY_AFTER_SECONDS = 5
    INVOCATION_LOG_LINE_MAX_BYTES = 16 * 1024
    # A new organization's cap on running invocations (None: only project caps apply).
    DEFAULT_ORG_MAX_CONCURRENT_INVOCATIONS = None

    # Browser sessions. The driver that provides browsers: "host" (a real Chromium on a
    # browser host, below) or "external" (they run elsewhere and report through the ingest
    # endpoints). The external driver's endpoints, as templates taking {session_id}, unless
    # the create request's `driver` gives them.
    BROWSER_DRIVER = "host"
    BROWSER_EXTERNAL_CDP_WS_URL = "ws://127.0.0.1:9222/devtools/browser/{session_id}"
    BROWSER_EXTERNAL_WEBDRIVER_WS_URL = "ws://127.0.0.1:4444/session/{session_id}"
    BROWSER_EXTERNAL_LIVE_VIEW_URL = None
    # Retry-After of a 429 when a session cap is reached.
    BROWSER_RETRY_AFTER_SECONDS = 5
    # Browser hosts (browserhost/, its own program with its own settings: browserhost/settings.py;
    # app/browsers/hosts.py): each is added with a credential (`flask browsers hosts add NAME --address URL`) and
    # heart-beats every BROWSER_HOST_HEARTBEAT_SECONDS (the app tells it at registration); one silent
    # for BROWSER_HOST_TIMEOUT_SECONDS is lost (no new sessions; its sessions end). A browser's start (sandbox,
    # Chromium, DevTools) has BROWSER_HOST_START_SECONDS on a busy machine; past it, the create answers 503 saying so.
    BROWSER_HOST_HEARTBEAT_SECONDS = 2
    BROWSER_HOST_TIMEOUT_SECONDS = 10
    BROWSER_HOST_START_SECONDS = 30
    # Retry-After of a 503 when no browser host has room.
    BROWSER_CAPACITY_RETRY_AFTER_SECONDS = 5
    # Where clients reach this server (cdp_ws_url; the hosted login page unless AUTH_PUBLIC_BASE_URL
    # says otherwise), e.g. https://lantern.example.com behind a proxy; None: the host of each request.
    PUBLIC_BASE_URL = None
    # The shortest inactivity timeout a session may ask for (timeout_seconds); the contract's 10 s.
    BROWSER_MIN_TIMEOUT_SECONDS = 10
    # How often each worker ends sessions past their idle deadline (wsgi.py's periodic loop).
    BROWSER_IDLE_SWEEP_SECONDS = 5
    # Activity within this many seconds of the last recorded one is not written again
    # (an idle deadline is that much less exact; one write per request would cost more).
    BROWSER_ACTIVITY_WRITE_SECONDS = 1

    # Telemetry: events kept per session for the live stream (oldest evicted), most
    # events per ingest request, how long the archive keeps events, and how often each
    # worker prunes it (wsgi.py's periodic loop; `flask browsers prune` does it on demand).
    TELEMETRY_BUFFER_EVENTS = 1024
    TELEMETRY_MAX_BATCH = 1000
    TELEMETRY_RETENTION_SECONDS = 7 * 86400
    TELEMETRY_PRUNE_INTERVAL_SECONDS = 300
    # The most a session's events (their JSON) take in the archive over its life; past it, its events are dropped
    # and counted (telemetry_dropped), and its `lantern` log says so once. A page logging without end wrote 9.5 MB/s.
    # None: no bound.
    TELEMETRY_ARCHIVE_SESSION_MAX_BYTES = 256 * 1024 * 1024
    # Browser log lines: most lines a log stream replays before following.
    BROWSER_LOG_REPLAY_LINES = 1000
    # Recordings of a session's screen (replays): the framerate when none is asked and the highest one, the
    # longest recording (and the default of max_duration_in_seconds), the largest video kept (the rest of a
    # longer one is not), and how long recordings are kept after they end (then deleted, as telemetry is).
    REPLAY_DEFAULT_FRAMERATE = 10
    REPLAY_MAX_FRAMERATE = 30
    REPLAY_MAX_SECONDS = 3600
    REPLAY_MAX_BYTES = 1024 * 1024 * 1024
    REPLAY_RETENTION_SECONDS = 7 * 86400
    # The most a project's saved recordings take (until the retention deletes them): past it, a new recording is
    # refused (403 replay_budget_exceeded); one under way is kept whole. None: no bound.
    REPLAY_PROJECT_MAX_BYTES = 20 * 1024 * 1024 * 1024

    # Managed auth: how long a login flow may take, its HTTP timeout per request to the
    # site, where the hosted page is reached (None: PUBLIC_BASE_URL, else the host of the
    # request that started the flow), and how often each worker looks for due health checks (wsgi.py's
    # periodic loop; 0: never).
    AUTH_FLOW_LIFETIME_SECONDS = 300
    AUTH_FLOW_HTTP_TIMEOUT_SECONDS = 10
    AUTH_PUBLIC_BASE_URL = None
    AUTH_HEALTH_CHECK_POLL_SECONDS = 60

    # API keys. How long a rotated key keeps working unless the caller says otherwise.
    API_KEY_ROTATION_GRACE_DAYS = 7

    # The deprecated /projects routes (spec part 9): served with Deprecation and
    # Sunset headers until the sunset instant, then 410 Gone.
    PROJECTS_ROUTES_DEPRECATED_AT = "2026-05-24T00:00:00Z"
    PROJECTS_ROUTES_SUNSET_AT = "2026-11-24T00:00:00Z"

    # OpenAPI document and interactive docs (public, no key needed).
    API_TITLE = "Lantern"
    API_VERSION = "0.1.0"
    OPENAPI_VERSION = "3.0.3"
    OPENAPI_URL_PREFIX = "/"
    OPENAPI_JSON_PATH = "openapi.json"
    OPENAPI_SWAGGER_UI_PATH = "docs"
    # Where /docs loads Swagger UI's files from: a path here is served by Lantern itself from the
    # pinned flask-swagger-ui package (app/core/docs.py), so the docs work offline; a URL (a CDN) is
    # used as it is. No online validator badge: it would send the document's URL to swagger.io.
    OPENAPI_SWAGGER_UI_URL = "/docs/assets/"
    OPENAPI_SWAGGER_UI_CONFIG = {"validatorUrl": None}
    API_SPEC_OPTIONS = {
        "info": {"description": "Organization Management and Browser Automation API, self-hosted."},
        "components": {"securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearerAuth": []}],
    }
