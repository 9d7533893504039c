"""A managed auth connection (a profile kept logged in to a domain), its login flows,
the flows' state events, and health checks."""
import hmac
import json

from peewee import AutoField, BooleanField, CharField, ForeignKeyField, IntegerField, TextField

from app.core import clock, crypto
from app.core.compiled import CompiledQuery
from app.core.crypto import CiphertextField
from app.core.db import BaseModel, UtcDateTimeField
from app.core.errors import not_found
from app.core.ids import new_id
from app.orgs.models import Project, hash_key
from app.orgs.resources import active_resource_counter
from app.profiles.models import Profile

AUTHENTICATED, NEEDS_AUTH = "AUTHENTICATED", "NEEDS_AUTH"
LOGIN, REAUTH = "LOGIN", "REAUTH"
IN_PROGRESS, SUCCESS, FAILED, EXPIRED, CANCELED = "IN_PROGRESS", "SUCCESS", "FAILED", "EXPIRED", "CANCELED"
TERMINAL = {SUCCESS, FAILED, EXPIRED, CANCELED}
DISCOVERING, AWAITING_INPUT, AWAITING_EXTERNAL_ACTION, SUBMITTING, COMPLETED = (
    "DISCOVERING", "AWAITING_INPUT", "AWAITING_EXTERNAL_ACTION", "SUBMITTING", "COMPLETED")
PROMPT_KEYS = ("fields", "choices", "discovered_fields", "mfa_options", "sign_in_options", "pending_sso_buttons")
LEFT_OUT = "left_out"  # beside PROMPT_KEYS in a flow's stored prompt, never shown


class AuthConnection(BaseModel):
    id = CharField(primary_key=True, default=new_id)
    project = ForeignKeyField(Project, backref="auth_connections", on_delete="CASCADE")
    # One connection per profile and domain (a unique index).
    profile = ForeignKeyField(Profile, backref="auth_connections", on_delete="CASCADE")
    domain = CharField()
    allowed_domains = TextField(default="[]")
    auto_reauth = BooleanField(default=True)
    health_checks = BooleanField(default=True)
    health_check_interval = IntegerField()
    login_url = TextField(null=True)
    credential = TextField(null=True)  # {"name"} | {"provider", "path"} | {"provider", "auto": true}, as JSON
    record_session = BooleanField(default=False)
    save_credentials = BooleanField(default=True)
    browser = TextField(default="{}")
    status = CharField(default=NEEDS_AUTH)
    post_login_url = TextField(null=True)
    last_auth_at = UtcDateTimeField(null=True)
    last_auth_check_at = UtcDateTimeField(null=True)
    # When the next health check is due (None: checks off, or nothing to check yet).
    next_check_at = UtcDateTimeField(null=True, index=True)
    created_at = UtcDateTimeField(default=clock.now)
    updated_at = UtcDateTimeField(default=clock.now)

    @classmethod
    def lookup(cls, project, connection_id):
        connection = _connection_in_project.first(project.id, connection_id)
        if connection is None:
            raise not_found(f"Auth connection {connection_id!r} not found.", code="auth_connection_not_found")
        return connection

    @property
    def subject(self):
        """The channel flow changes of this connection are announced on."""
        return self.subject_of(self.id)

    @staticmethod
    def subject_of(connection_id):
        return f"auth:{connection_id}"

    @property
    def allowed_domain_list(self):
        return json.loads(self.allowed_domains)

    @property
    def credential_ref(self):
        return json.loads(self.credential) if self.credential else None

    @property
    def browser_config(self):
        return json.loads(self.browser)

    def current_flow(self):
        """The newest flow (running or not), or None."""
        return (LoginFlow.select().where(LoginFlow.connection == self.id)
                .order_by(LoginFlow.started_at.desc(), LoginFlow.id.desc()).first())


_connection_in_project = CompiledQuery(
    lambda project_id, connection_id: AuthConnection.select(AuthConnection, Profile).join(Profile)
    .where((AuthConnection.project == project_id) & (AuthConnection.id == connection_id)))


class LoginFlow(BaseModel):
    """One login or re-auth attempt: a state machine run by app.auth_connections.loginflow."""

    id = CharField(primary_key=True, default=new_id)
    connection = ForeignKeyField(AuthConnection, backref="flows", on_delete="CASCADE")
    flow_type = CharField()
    status = CharField(default=IN_PROGRESS, index=True)
    step = CharField(default=DISCOVERING)
    # What a person must provide now: the canonical and legacy prompt lists, as JSON.
    prompt = TextField(default="{}")
    interaction_id = CharField(null=True)
    website_error = TextField(null=True)
    error_code = CharField(null=True)
    error_message = TextField(null=True)
    external_action_message = TextField(null=True)
    post_login_url = TextField(null=True)
    # SHA-256 of every handoff code a login call handed out for this flow (JSON list, newest last):
    # a code authorises the flow's hosted page (no API key there). The codes themselves, and so the
    # hosted URL, are only ever in the login response.
    handoff_hashes = TextField(default="[]")
    # A person's answer waiting for the runner (may hold a password): encrypted.
    submission = CiphertextField(null=True)
    expires_at = UtcDateTimeField()
    started_at = UtcDateTimeField(default=clock.now)
    updated_at = UtcDateTimeField(default=clock.now)
    completed_at = UtcDateTimeField(null=True)

    @property
    def is_terminal(self):
        return self.status in TERMINAL

    @property
    def is_overdue(self):
        return not self.is_terminal and clock.now() >= self.expires_at

    @property
    def prompt_lists(self):
        """The prompt as the API shows it (PROMPT_KEYS)."""
        prompt = json.loads(self.prompt)
        return {key: prompt[key] for key in PROMPT_KEYS if key in prompt}

    @property
    def fields_left_out(self):
        """The form's fields the prompt leaves out, the stored credential filling them ({id, ref, type}): a
        submit may still name them, to send its own value instead."""
        return json.loads(self.prompt).get(LEFT_OUT, [])

    @property
    def handoff_hash_list(self):
        return json.loads(self.handoff_hashes)

    def accepts_handoff(self, code):
        """Whether `code` is one of the handoff codes handed out for this flow."""
        presented = hash_key(code)
        return any(hmac.compare_digest(presented, known) for known in self.handoff_hash_list)

    def pending_submission(self):
        return json.loads(crypto.decrypt(self.submission)) if self.submission else None


class AuthEvent(BaseModel):
    """A managed_auth_state frame as it was sent; the auto-increment id is the SSE id."""

    id = AutoField()
    connection = ForeignKeyField(AuthConnection, backref="events", on_delete="CASCADE")
    flow = ForeignKeyField(LoginFlow, backref="events", on_delete="CASCADE")
    timestamp = UtcDateTimeField(default=clock.now)
    snapshot = TextField()

    def data(self):
        return json.loads(self.snapshot)


class HealthCheck(BaseModel):
    id = CharField(primary_key=True, default=new_id)
    connection = ForeignKeyField(AuthConnection, backref="health_checks_done", on_delete="CASCADE")
    status = CharField()
    previous_status = CharField()
    checked_at = UtcDateTimeField(default=clock.now)
    error_code = CharField(null=True)
    error_message = TextField(null=True)


@active_resource_counter("auth_connections")
def project_connections(project):
    return AuthConnection.select().where(AuthConnection.project == project.id).count()
