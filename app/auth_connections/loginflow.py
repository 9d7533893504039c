"""Login flows: start, submit, cancel, expire, and the runner that drives a login driver.

A flow is IN_PROGRESS while its runner works: DISCOVERING (reading the login page),
AWAITING_INPUT (a prompt for a person: fields and choices, with an interaction_id),
SUBMITTING (an answer is on its way to the site), AWAITING_EXTERNAL_ACTION (the
person must act elsewhere, e.g. at an identity provider), and ends SUCCESS
(COMPLETED: cookies saved to the profile), FAILED, EXPIRED or CANCELED.

The runner is a thread (a greenlet under gunicorn's gevent worker) started by the
request that starts the flow; it never runs inside a request. Answers arrive through
the database (LoginFlow.submission, encrypted), so a submit served by any worker
reaches it; the flow's channel wakes it at once in the same worker, otherwise within
STREAM_POLL_SECONDS. Every state change is recorded as an AuthEvent (what the
events stream replays) and announced on the connection's channel.
"""
import json
import logging
import secrets
import threading
from datetime import timedelta
from urllib.parse import urlsplit

from flask import current_app

from app import streams
from app.auth_connections import credentials as login_credentials
from app.auth_connections import meanings
from app.auth_connections.formdriver import FormLogin, LoginError
from app.auth_connections.models import (
    AUTHENTICATED,
    AWAITING_EXTERNAL_ACTION,
    AWAITING_INPUT,
    CANCELED,
    COMPLETED,
    DISCOVERING,
    EXPIRED,
    FAILED,
    IN_PROGRESS,
    LEFT_OUT,
    LOGIN,
    PROMPT_KEYS,
    SUBMITTING,
    SUCCESS,
    AuthConnection,
    AuthEvent,
    LoginFlow,
)
from app.core import clock, crypto
from app.core.db import db, exclusive
from app.core.errors import bad_request, conflict
from app.core.ids import new_id
from app.core.settings import settings
from app.orgs.models import hash_key
from app.profiles.models import save_profile_state
from app.streams.follow import wait_for

logger = logging.getLogger(__name__)
# Legacy discovered_fields types by canonical field type (the SDK's DiscoveredField enum).
LEGACY_FIELD_TYPES = {"password": "password", "code": "code", "totp_code": "totp", "text": "text"}
LEGACY_MFA_TYPES = {"sms", "call", "email", "totp", "push", "password", "switch"}
STORED_HINT = "Filled from the stored credential when left empty."
# Handoff codes that stay valid per flow: every login call hands out one, a person may hold any.
MAX_HANDOFF_CODES = 20
ENDED = object()  # what waiting for an answer found instead: the flow ended


# -- state ------------------------------------------------------------------------------------

def state_event(flow):
    """The managed_auth_state frame of a flow as it stands (contract 6.7)."""
    event = {"event": "managed_auth_state", "timestamp": clock.isoformat(flow.updated_at),
             "flow_status": flow.status, "flow_step": flow.step, "flow_type": flow.flow_type}
    if not flow.is_terminal:
        event.update(flow.prompt_lists)
        if flow.interaction_id:
            event["interaction_id"] = flow.interaction_id
    for key in ("website_error", "error_code", "error_message", "external_action_message", "post_login_url"):
        if getattr(flow, key):
            event[key] = getattr(flow, key)
    return event


def record(flow, **changes):
    """Apply `changes` to the flow, store it with its state event; call inside a transaction."""
    for key, value in changes.items():
        setattr(flow, key, value)
    flow.updated_at = clock.now()
    if flow.is_terminal and flow.completed_at is None:
        flow.completed_at = flow.updated_at
    flow.save()
    AuthEvent.create(connection=flow.connection_id, flow=flow.id, timestamp=flow.updated_at,
                     snapshot=json.dumps(state_event(flow)))


def announce(connection_id):
    streams.announce(AuthConnection.subject_of(connection_id))


# -- what requests do -------------------------------------------------------------------------

def running_flow(connection):
    """The connection's flow in progress (expired first if its time ran out), or None."""
    flow = (LoginFlow.select().where((LoginFlow.connection == connection.id) & (LoginFlow.status == IN_PROGRESS))
            .order_by(LoginFlow.started_at.desc()).first())
    if flow is not None and flow.is_overdue:
        expire(flow)
        return None
    return flow


def start(connection, flow_type=LOGIN):
    """Start a flow (or return the one in progress: one per connection) and launch its runner."""
    with exclusive(connection):
        flow = running_flow(connection)
        if flow is not None:
            return flow
        now = clock.now()
        flow = LoginFlow(id=new_id(), connection=connection.id, flow_type=flow_type, status=IN_PROGRESS,
                         step=DISCOVERING, started_at=now,
                         expires_at=now + timedelta(seconds=settings().auth_flow_lifetime_seconds))
        flow.save(force_insert=True)
        record(flow)
    announce(connection.id)
    launch(flow)
    return flow


def hand_off(flow, base_url):
    """(hosted_url, handoff_code): a new code for the flow's hosted page, for the caller alone.

    Only the code's hash is stored, so a code can be shown once, never again; each call
    hands out another, and the newest MAX_HANDOFF_CODES of them keep working.
    """
    code = secrets.token_urlsafe(24)
    with exclusive(flow):
        current = LoginFlow.get_by_id(flow.id)
        hashes = (current.handoff_hash_list + [hash_key(code)])[-MAX_HANDOFF_CODES:]
        LoginFlow.update(handoff_hashes=json.dumps(hashes)).where(LoginFlow.id == flow.id).execute()
    return f"{base_url.rstrip('/')}/auth/hosted/{flow.id}?code={code}", code


def launch(flow):
    """Run the flow's runner in the background, with this app."""
    app = current_app._get_current_object()
    runner = Runner(app, flow.id, flow.connection_id)
    threading.Thread(target=runner.run, name=f"login-flow-{flow.id}", daemon=True).start()


def expire(flow):
    with exclusive(flow):
        current = LoginFlow.get_by_id(flow.id)
        if current.is_terminal:
            return current
        record(current, status=EXPIRED, error_code="flow_expired",
               error_message="The login flow ran out of time.", submission=None)
    announce(current.connection_id)
    return current


def cancel(connection):
    """End the connection's running flow as CANCELED (the runner stops at its next look)."""
    flow = running_flow(connection)
    if flow is None:
        return
    with exclusive(flow):
        current = LoginFlow.get_by_id(flow.id)
        if not current.is_terminal:
            record(current, status=CANCELED, error_code="flow_canceled",
                   error_message="The login flow was canceled.", submission=None)
    announce(connection.id)


def submit(connection, body, *, flow_id=None):
    """Check an answer against the current prompt and hand it to the runner; 4xx when it cannot apply.

    With `flow_id` (the hosted page), only that flow takes it.
    """
    flow = running_flow(connection)
    if flow is None or flow_id not in (None, flow.id):
        raise conflict("no_flow_in_progress", "No login flow is in progress; start one with /login.")
    answer = answer_for(flow, body)
    with exclusive(flow):
        current = LoginFlow.get_by_id(flow.id)
        if current.step not in (AWAITING_INPUT, AWAITING_EXTERNAL_ACTION) or current.is_terminal:
            raise conflict("flow_not_awaiting_input",
                           f"The login flow is {current.status} / {current.step}, not waiting for input.")
        if current.interaction_id != flow.interaction_id:
            raise stale_interaction(current)
        record(current, step=SUBMITTING, submission=crypto.encrypt(json.dumps(answer)), website_error=None)
    announce(connection.id)


def stale_interaction(flow):
    return conflict("stale_interaction", f"interaction_id does not match the current prompt "
                    f"({flow.interaction_id}); read the connection again.")


def answer_for(flow, body):
    """The runner's answer for a submit body: {"values": {field id: value}} or {"choice": choice id}."""
    prompt = flow.prompt_lists
    canonical = {k for k in ("interaction_id", "field_values", "selected_choice_id") if k in body}
    legacy = {k for k in ("fields", "mfa_option_id", "sign_in_option_id", "sso_button_selector", "sso_provider")
              if k in body}
    if canonical and legacy:
        raise bad_request("Use either the canonical members (interaction_id with field_values or "
                          "selected_choice_id) or the legacy ones, not both.")
    if not canonical and not legacy:
        raise bad_request("Give field_values or selected_choice_id (with interaction_id).")
    fields = {f["id"]: f for f in prompt.get("fields", [])}
    left_out = flow.fields_left_out
    choices = {c["id"]: c for c in prompt.get("choices", [])}
    if canonical:
        if not body.get("interaction_id"):
            raise bad_request("interaction_id is required with field_values or selected_choice_id.",
                              field="interaction_id")
        if body["interaction_id"] != flow.interaction_id:
            raise stale_interaction(flow)
        if ("field_values" in body) == ("selected_choice_id" in body):
            raise bad_request("Give field_values or selected_choice_id, not both.", field="field_values")
        if "selected_choice_id" in body:
            return {"choice": known(body["selected_choice_id"], choices, "selected_choice_id")}
        return {"values": field_values(body["field_values"], fields, left_out)}
    if "fields" in body:
        return {"values": field_values(body["fields"], fields, left_out, member="fields")}
    if "mfa_option_id" in body:
        matches = [c["id"] for c in choices.values() if c.get("mfa_type") == body["mfa_option_id"]
                   and c["type"] == "mfa_method"]
        return {"choice": known(matches[0] if matches else body["mfa_option_id"], choices, "mfa_option_id")}
    if "sign_in_option_id" in body:
        return {"choice": known(body["sign_in_option_id"], choices, "sign_in_option_id")}
    if body.get("sso_button_selector") and body.get("sso_provider"):
        raise bad_request("Give sso_button_selector or sso_provider, not both.", field="sso_provider")
    member = "sso_button_selector" if "sso_button_selector" in body else "sso_provider"
    wanted = body[member]
    matches = [c["id"] for c in choices.values() if c["type"] == "sso_provider"
               and wanted in (c.get("observed_selector"), sso_provider(c["id"]))]
    return {"choice": known(matches[0] if matches else wanted, choices, member)}


def known(choice_id, choices, member):
    if choice_id not in choices:
        raise bad_request(f"{choice_id!r} is not one of the current choices.", field=member)
    return choice_id


def field_values(values, fields, left_out=(), member="field_values"):
    """{field id: value} for submitted values keyed by a field's id, its input's name or its meaning.

    `fields`: the prompt's, by id; `left_out`: the form's other fields, which the stored credential fills and a
    key may still name: its value is sent instead of the stored one (a script sending every field works).
    """
    if not fields:
        raise bad_request("The current prompt has no fields; pick one of its choices.", field=member)
    keys_of = {}
    for key in values:
        keys_of.setdefault(meanings.field_for_key(key, [*fields.values(), *left_out]), []).append(key)
    unknown = sorted(keys_of.pop(None, []))
    if unknown:
        raise bad_request(f"Unknown field(s) {', '.join(unknown)}; the prompt asks for {', '.join(fields)}.",
                          field=member)
    twice = {field_id: keys for field_id, keys in keys_of.items() if len(keys) > 1}
    if twice:
        field_id, keys = sorted(twice.items())[0]
        raise bad_request(f"{', '.join(sorted(keys))} all name the field {field_id}; give one.", field=member)
    resolved = {field_id: values[keys[0]] for field_id, keys in keys_of.items()}
    missing = sorted(fid for fid, f in fields.items() if f.get("required") and not resolved.get(fid))
    if missing:
        raise bad_request(f"Missing value(s) for {', '.join(missing)}.", field=member)
    if not all(isinstance(v, str) for v in resolved.values()):
        raise bad_request("Field values are strings.", field=member)
    return resolved


# -- prompts ----------------------------------------------------------------------------------

def prompt_of(page, left_to_store=frozenset(), asked_again=False):
    """The canonical and legacy prompt lists for a driver page (contract 6.7 nested models), and beside them
    (LEFT_OUT, never shown) the fields the prompt leaves out.

    `left_to_store`: ids of the fields the stored credential fills when a person leaves them. They are left out
    of the prompt, or, `asked_again` (the site asks again after an answer that used them), shown optional with a
    hint: left empty, the stored value is sent.
    """
    reason = "rejected" if page.website_error else "missing"
    asked = [f for f in page.fields if asked_again or f.id not in left_to_store]
    required = {f.id: f.required and f.id not in left_to_store for f in asked}
    hints = {f.id: {"hint": STORED_HINT} if f.id in left_to_store else {} for f in asked}
    fields = [{"id": f.id, "ref": f.name, "type": f.type, "label": f.label, "required": required[f.id],
               "reason": reason, "observed_selector": f.selector, **hints[f.id],
               **({"input_mode": "numeric"} if f.type in ("code", "totp_code") else {})} for f in asked]
    legacy_fields = [{"name": f.name, "label": f.label, "selector": f.selector, "required": required[f.id],
                      **hints[f.id],
                      "type": "email" if f.html_type == "email" else LEGACY_FIELD_TYPES.get(f.type, "text"),
                      **({"placeholder": f.placeholder} if f.placeholder else {})} for f in asked]
    offered = {c.id: c for c in list(page.choices) + list(page.sso)}  # SSO buttons may be both
    choices = [{"id": c.id, "type": c.type, "label": c.label, "observed_selector": c.selector,
                **({"mfa_type": c.mfa_type} if c.mfa_type else {}),
                **({"description": c.description} if c.description else {})}
               for c in offered.values()]
    mfa_options = [{"type": c.mfa_type, "label": c.label, **({"description": c.description} if c.description else {})}
                   for c in page.choices if c.type == "mfa_method" and c.mfa_type in LEGACY_MFA_TYPES]
    sign_in = [{"id": c.id, "label": c.label} for c in page.choices if c.type == "sign_in_method"]
    sso = [{"selector": c.selector or c.id, "provider": sso_provider(c.id), "label": c.label} for c in page.sso]
    left_out = [{"id": f.id, "ref": f.name, "type": f.type} for f in page.fields
                if not asked_again and f.id in left_to_store]
    return {**dict(zip(PROMPT_KEYS, (fields, choices, legacy_fields, mfa_options, sign_in, sso), strict=True)),
            LEFT_OUT: left_out}


def sso_provider(choice_id):
    """The provider an SSO choice id names (the driver's ids are "sso:<provider>")."""
    return choice_id.split(":", 1)[-1]


# -- the runner -------------------------------------------------------------------------------

def field_types(page):
    """What a form page asks for, to know the site asks again: the types of its fields."""
    return tuple(sorted(field.type for field in page.fields))


def fields_left_to_store(page, filled, asked_again):
    """Ids of the fields a person may leave to the stored credential: all it fills; once the site asks again,
    only identifiers, so a password or code it may just have refused is never sent again without being typed."""
    return {f.id for f in page.fields if f.id in filled and (not asked_again or f.type == "identifier")}


class FlowGone(Exception):
    """The flow's row is gone (its connection was deleted)."""


class Runner:
    """Drives one flow from its first page to a terminal state (in a thread of its own)."""

    def __init__(self, app, flow_id, connection_id):
        self.app = app
        self.flow_id = flow_id
        self.connection_id = connection_id
        self.answered_from_store = set()  # kinds of page the stored login answered, alone or with a person
        self.typed = {}

    def run(self):
        with self.app.app_context():
            try:
                self._run()
            except FlowGone:
                pass  # its connection was deleted: nothing left to update
            except Exception:  # noqa: BLE001 - a runner must end its flow whatever happens
                logger.exception("login flow %s failed unexpectedly", self.flow_id)
                try:
                    self.finish(FAILED, error_code="internal_error",
                                error_message="The login flow failed unexpectedly.")
                except FlowGone:
                    pass
            finally:
                if not db.is_closed():
                    db.close()

    def _run(self):
        with db.connection_context():
            connection = AuthConnection.get_or_none(AuthConnection.id == self.connection_id)
            if connection is None:
                raise FlowGone()
            try:
                self.login = login_credentials.usable_login(connection)
            except login_credentials.CredentialError as error:
                self.login = None
                logger.info("flow %s goes on without a stored credential: %s", self.flow_id, error)
        self.connection = connection
        config = settings(self.app)
        self.driver = FormLogin(allowed_hosts=login_credentials.allowed_hosts(connection),
                                timeout=config.auth_flow_http_timeout_seconds,
                                never_in_url=self.login.passwords if self.login is not None else ())
        try:
            page = self.driver.open(login_credentials.login_url(connection))
            while page is not None:
                page = self.step(page)
        except LoginError as error:
            self.finish(FAILED, error_code=error.code, error_message=str(error))

    def step(self, page):
        """Act on one page; the next page, or None once the flow is over."""
        if page.kind == "success":
            self.succeed(page)
            return None
        if page.kind == "error":
            self.finish(FAILED, error_code="login_page_unusable", error_message=page.message or "No login form found.")
            return None
        filled = self.login.fill(page.fields) if self.login is not None and page.kind == "form" else {}
        automatic = None if page.kind == "external" else self.automatic_answer(page, filled)
        if automatic is not None:
            if not self.update(step=SUBMITTING, prompt=json.dumps({}), interaction_id=None, website_error=None):
                return None
            return self.apply(page, automatic)
        asked_again = field_types(page) in self.answered_from_store
        if filled:
            self.answered_from_store.add(field_types(page))
        left_to_store = fields_left_to_store(page, set(filled), asked_again)
        prompt = prompt_of(page, left_to_store, asked_again)
        step = AWAITING_EXTERNAL_ACTION if page.kind == "external" else AWAITING_INPUT
        if not self.update(step=step, prompt=json.dumps(prompt), interaction_id=new_id(),
                           website_error=page.website_error,
                           external_action_message=page.message if page.kind == "external" else None):
            return None
        answer = self.wait_for_answer()
        if answer is None:
            return None
        return self.apply(page, answer, left_to_store)

    def automatic_answer(self, page, filled):
        """What the stored login answers on this page by itself, or None (a person is asked).

        `filled` is what it fills of a form's fields; the form is sent without a person when that
        is every required field. Each kind of page (the set of field types asked for, or a method
        choice) is answered from the store once: if the site asks again, whether or not it shows
        an error we can read, a person decides, so a wrong stored password is never retried in a loop.
        """
        login = self.login
        if login is None:
            return None
        if page.kind == "choice":
            totp = [c for c in page.choices if c.mfa_type == "totp"]
            if not (login.one_time_code and totp) or "choice" in self.answered_from_store:
                return None
            self.answered_from_store.add("choice")
            return {"choice": totp[0].id}
        complete = all(field.id in filled for field in page.fields if field.required)
        if not filled or not complete or field_types(page) in self.answered_from_store:
            return None
        self.answered_from_store.add(field_types(page))
        return {"values": filled}

    def apply(self, page, answer, left_to_store=None):
        """Send an answer: the stored login's own, or a person's (`left_to_store` given: the ids of the fields
        the stored login fills when the person leaves them empty)."""
        if "choice" in answer:
            return self.driver.choose(answer["choice"])
        values = answer["values"]
        if left_to_store is not None:
            typed = {field_id: value for field_id, value in values.items() if value}
            # What a person typed for the identifier and password, to store if the login succeeds.
            for field in page.fields:
                if field.type in ("identifier", "password") and field.id in typed:
                    self.typed[field.type] = typed[field.id]
            # Read now: a one-time code from the prompt's time may have expired.
            stored = {} if self.login is None else self.login.fill([f for f in page.fields if f.id in left_to_store])
            values = {**stored, **typed}
        return self.driver.submit(values)

    def wait_for_answer(self):
        """The person's answer once submitted; None when the flow ended meanwhile (expired, canceled)."""

        def answered():
            with db.connection_context():
                flow = self.flow()
                if flow.is_terminal:
                    return ENDED
                if flow.is_overdue:
                    expire(flow)
                    return ENDED
                answer = flow.pending_submission()
                if answer is not None:
                    LoginFlow.update(submission=None).where(LoginFlow.id == flow.id).execute()
                return answer

        answer = wait_for(AuthConnection.subject_of(self.connection_id), answered, limit_seconds=None,
                          poll_seconds=settings(self.app).stream_poll_seconds)
        if answer is None:  # the server is stopping
            # This runner will not come back with the worker: end the flow so a new one can start.
            self.finish(FAILED, error_code="server_restarting",
                        error_message="The server restarted during the login flow; start it again.")
        return None if answer is ENDED else answer

    def update(self, **changes):
        """Record a state change unless the flow ended meanwhile; True if recorded."""
        with db.connection_context():
            with exclusive(LoginFlow(id=self.flow_id)):
                flow = self.flow()
                if flow.is_terminal:
                    return False
                if flow.is_overdue:
                    record(flow, status=EXPIRED, error_code="flow_expired",
                           error_message="The login flow ran out of time.", submission=None)
                    recorded = False
                else:
                    record(flow, **changes)
                    recorded = True
            announce(self.connection_id)
        return recorded

    def finish(self, status, **changes):
        """End the flow (its step stays where it failed); False if it had ended already."""
        return self.update(status=status, submission=None, **changes)

    def flow(self):
        flow = LoginFlow.get_or_none(LoginFlow.id == self.flow_id)
        if flow is None:
            raise FlowGone()
        return flow

    def succeed(self, page):
        """Save the site's cookies to the profile and mark the connection authenticated, in one
        transaction with SUCCESS, and only if the flow is still running (not expired, canceled
        or deleted meanwhile)."""
        connection = self.connection
        # Without the query: a site that sent form values in the URL must not leave them here.
        landed = urlsplit(page.url)._replace(query="", fragment="").geturl()
        with db.connection_context():
            with exclusive(LoginFlow(id=self.flow_id)):
                flow = self.flow()
                if flow.is_terminal:
                    return
                if flow.is_overdue:
                    record(flow, status=EXPIRED, error_code="flow_expired",
                           error_message="The login flow ran out of time.", submission=None)
                else:
                    save_profile_state(connection.profile_id, {"cookies": self.driver.cookies(), "origins": []})
                    login_credentials.remember(connection, self.typed)
                    now = clock.now()
                    interval = connection.health_check_interval
                    AuthConnection.update(
                        status=AUTHENTICATED, post_login_url=landed, last_auth_at=now, last_auth_check_at=now,
                        next_check_at=now + timedelta(seconds=interval) if connection.health_checks else None,
                        updated_at=now,
                    ).where(AuthConnection.id == connection.id).execute()
                    record(flow, status=SUCCESS, step=COMPLETED, post_login_url=landed, prompt=json.dumps({}),
                           interaction_id=None, website_error=None, submission=None)
            announce(self.connection_id)
