"""A browser session, its tags, its archived telemetry, its log lines and its recordings."""
import json
from datetime import timedelta

from peewee import (
    BigAutoField,
    BigIntegerField,
    BooleanField,
    CharField,
    ForeignKeyField,
    IntegerField,
    TextField,
)

from app.core import clock
from app.core.blobs import BlobRefField
from app.core.crypto import CiphertextField
from app.core.db import BaseModel, UtcDateTimeField, matching
from app.core.errors import not_found
from app.core.ids import new_id
from app.orgs.models import Project
from app.orgs.resources import active_resource_counter
from app.profiles.models import Profile
from lantern_wire import control
from lantern_wire.hosts import (
    ENDED_BY_BROWSER_EXIT,
    ENDED_BY_HOST_RESTART,
    ENDED_BY_HOST_STOP,
    ENDED_BY_OOM,
)

# The viewport of a session created without one: what its record shows and what its pages measure.
DEFAULT_VIEWPORT = control.DEFAULT_VIEWPORT.model_dump()
# Why a session ended: the record's end_reason (a Lantern field beside deleted_at).
ENDED_BY_REQUEST, ENDED_BY_TIMEOUT = "deleted", "timeout"
# ...its browser host stopped heart-beating (or its credential was revoked); its browser failed to start;
# and the reasons a host reports (lantern_wire.hosts: restarted, stopped, browser exited, out of memory).
ENDED_BY_HOST_LOST, ENDED_BY_LAUNCH_FAILURE = "host_lost", "launch_failed"
END_REASONS = (ENDED_BY_REQUEST, ENDED_BY_TIMEOUT, ENDED_BY_HOST_LOST, ENDED_BY_HOST_RESTART, ENDED_BY_HOST_STOP,
               ENDED_BY_LAUNCH_FAILURE, ENDED_BY_BROWSER_EXIT, ENDED_BY_OOM)


class BrowserHost(BaseModel):
    """A browser host (browserhost/, `python -m browserhost`): it owns the Chromium processes of the
    sessions placed on it. It is added with a credential (`flask browsers hosts add NAME`), registers
    with it at each start and heart-beats; a host whose heartbeat is older than
    BROWSER_HOST_TIMEOUT_SECONDS is lost: it gets no new session and its sessions end. A revoked
    host's credential opens nothing."""

    id = CharField(primary_key=True, default=new_id)
    name = CharField(unique=True)
    # Where workers reach its control API and CDP relay (http://address:port).
    address = CharField()
    # What it registered it can take, and the operator's ceiling on it (`hosts limit`), or None.
    capacity = IntegerField()
    max_browsers = IntegerField(null=True)
    # Headful sessions need Xvfb on the host.
    headful = BooleanField(default=False)
    # Why it takes no session although it runs (Chromium missing), or None.
    unavailable_reason = TextField(null=True)
    started_at = UtcDateTimeField(default=clock.now)
    heartbeat_at = UtcDateTimeField(default=clock.now)
    # SHA-256 of its credential (lantern_wire.hosts.credential_hash); the key the app calls it with,
    # encrypted; when its credential was revoked.
    credential_hash = CharField(null=True, unique=True)
    control_key = CiphertextField(null=True)
    revoked_at = UtcDateTimeField(null=True)

    @property
    def browsers_allowed(self):
        """How many browsers at once it is given: what it registered, at most the operator's ceiling (a host
        machine taken over could register any capacity to draw new sessions, with their profiles)."""
        return self.capacity if self.max_browsers is None else min(self.capacity, self.max_browsers)

    @classmethod
    def live(cls, timeout_seconds):
        return cls.select().where((cls.heartbeat_at > clock.now() - timedelta(seconds=timeout_seconds))
                                  & cls.revoked_at.is_null())


class BrowserSession(BaseModel):
    """One browser: the record clients see plus what its driver and streams need.

    `settings` holds the create request's browser options as given (viewport,
    location, network, chrome_policy, ...): the driver reads them to configure the
    browser, and the record echoes them. Columns are what queries filter on.
    """

    id = CharField(primary_key=True, default=new_id)
    project = ForeignKeyField(Project, backref="browser_sessions", on_delete="CASCADE")
    # Unique among the project's active sessions (a partial unique index).
    name = CharField(null=True)
    invocation_id = CharField(null=True, index=True)
    profile = ForeignKeyField(Profile, null=True, on_delete="SET NULL")
    profile_save_changes = BooleanField(default=False)
    headless = BooleanField(default=False)
    stealth = BooleanField(default=False)
    memory = CharField()
    region = CharField()
    timeout_seconds = IntegerField()
    settings = TextField(default="{}")
    telemetry_enabled = BooleanField(default=False)
    driver = CharField()
    cdp_ws_url = TextField()
    # The CDP URL's token (host driver): random per session, encrypted so the record can show it, and
    # its SHA-256 hash, which the relay checks (app/browsers/hosts.py).
    cdp_token = CiphertextField(null=True)
    cdp_token_hash = CharField(null=True)
    webdriver_ws_url = TextField()
    live_view_url = TextField(null=True)
    created_at = UtcDateTimeField(default=clock.now)
    # Activity (API calls naming the session, ingest) pushes idle_deadline forward;
    # a session still active at its idle_deadline has timed out.
    last_active_at = UtcDateTimeField(default=clock.now)
    idle_deadline = UtcDateTimeField()
    deleted_at = UtcDateTimeField(null=True)
    end_reason = CharField(null=True)
    # The newest telemetry seq handed out; seqs are assigned under this row's lock.
    last_seq = BigIntegerField(default=0)
    # Events accepted but not kept (telemetry off, or their category off).
    telemetry_dropped = BigIntegerField(default=0)
    # The highest telemetry ts archived so far (the newest archive row's ts_high).
    telemetry_ts_high = BigIntegerField(default=0)
    # The size of its archived events (their JSON), held to TELEMETRY_ARCHIVE_SESSION_MAX_BYTES.
    telemetry_bytes = BigIntegerField(default=0)
    # The newest report batch of its host applied (lantern_wire.hosts): a batch sent again is not applied twice.
    host_batch = BigIntegerField(default=0)
    # The browser host running this session's Chromium (host driver only).
    host = ForeignKeyField(BrowserHost, null=True, backref="sessions", on_delete="SET NULL")

    @classmethod
    def lookup(cls, project, id_or_name, *, include_deleted=False):
        """The session with this id (ended ones too when `include_deleted`), else the active one
        with this name; 404 otherwise."""
        by_id = matching(cls, "project", "id", null=() if include_deleted else ("deleted_at",))
        session = (by_id.first(project.id, id_or_name)
                   or matching(cls, "project", "name", null=("deleted_at",)).first(project.id, id_or_name))
        if session is None:
            raise cls.missing(id_or_name)
        return session

    @staticmethod
    def missing(id_or_name):
        return not_found(f"Browser session {id_or_name!r} not found.", code="browser_not_found")

    @classmethod
    def active(cls):
        return cls.select().where(cls.deleted_at.is_null())

    @property
    def is_active(self):
        return self.deleted_at is None

    @property
    def is_idle_too_long(self):
        return self.is_active and clock.now() >= self.idle_deadline

    def deadline_from(self, moment):
        return moment + timedelta(seconds=self.timeout_seconds)

    @property
    def options(self):
        return json.loads(self.settings)

    @property
    def telemetry_subject(self):
        """The in-memory telemetry buffer of this session (streams.telemetry_buffers)."""
        return f"telemetry:{self.id}"

    @property
    def logs_subject(self):
        """The wake-up channel of every log stream of this session."""
        return f"browser-logs:{self.id}"


class BrowserTag(BaseModel):
    """One tag of a session, as a row so `tags[key]=value` filters run in SQL on every database."""

    session = ForeignKeyField(BrowserSession, backref="tag_rows", on_delete="CASCADE")
    key = CharField()
    value = CharField()

    class Meta:
        indexes = ((("session", "key"), True), (("key", "value"), False))


class TelemetryEvent(BaseModel):
    """The archive behind GET /browsers/{id}/telemetry/events.

    `id` is the paging cursor (X-Next-Offset): within a session it rises with seq,
    because seqs are handed out and rows inserted in one transaction holding the
    session row.
    """

    id = BigAutoField()
    session = ForeignKeyField(BrowserSession, backref="telemetry_events", on_delete="CASCADE", index=False)
    seq = BigIntegerField()
    ts = BigIntegerField()  # Unix microseconds, from the event
    # The highest ts of the session's events up to this one, in id order: it never falls as id rises,
    # so windows of ts map to ranges of id (app/browsers/telemetry.py page()); ts < ts_high: it came late.
    ts_high = BigIntegerField(default=0)
    category = CharField()
    type = CharField()
    body = TextField()  # the event as JSON, ready to wrap in an envelope
    received_at = UtcDateTimeField(default=clock.now, index=True)

    class Meta:
        # (session, ts_high, id) finds where a since/until window starts and ends; (session, category, id)
        # serves filtered pages. Also (m0010): telemetry_event_late on (session, id) WHERE ts < ts_high.
        indexes = ((("session", "seq"), True), (("session", "id"), False), (("session", "ts_high", "id"), False),
                   (("session", "category", "id"), False))


class BrowserLogLine(BaseModel):
    """A line of one log of a session: a file (`source` path) or a supervised process."""

    id = BigAutoField()
    session = ForeignKeyField(BrowserSession, backref="log_lines", on_delete="CASCADE", index=False)
    source = CharField()  # "path" or "supervisor"
    log_name = TextField()  # the file path or the process name
    timestamp = UtcDateTimeField()
    message = TextField()
    received_at = UtcDateTimeField(default=clock.now, index=True)

    class Meta:
        indexes = ((("session", "source", "log_name", "id"), False),)


@active_resource_counter("browser_sessions")
def active_sessions_of_project(project):
    return BrowserSession.active().where(BrowserSession.project == project.id).count()


class Replay(BaseModel):
    """A recording of a session's screen (app/browsers/replays.py): made on its host, kept as a blob."""

    RECORDING, SAVING, SAVED, FAILED = "recording", "saving", "saved", "failed"

    id = CharField(primary_key=True, default=new_id)
    session = ForeignKeyField(BrowserSession, backref="replays", on_delete="CASCADE")
    status = CharField(default=RECORDING)
    framerate = IntegerField()
    max_duration_seconds = IntegerField()
    started_at = UtcDateTimeField(default=clock.now)
    finished_at = UtcDateTimeField(null=True)
    size_bytes = BigIntegerField(null=True)
    video = BlobRefField(null=True)
    error = TextField(null=True)

    class Meta:
        indexes = ((("session", "started_at"), False),)
