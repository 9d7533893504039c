"""client.auth.connections.* through the official SDK, strict validation, against the live server (contract 6.7).

Every test works in a project of its own (`auth`: the shared organization's client sending
`X-Kernel-Project: <name>`), so lists are exact; connections left behind are deleted
afterwards, which cancels any login flow still waiting for a person.

Flows log in to the test website (tests/login_site.py) on 127.0.0.1: carol has no MFA,
alice has an authenticator app (TOTP), bob picks SMS or the app. A person's side is
played with submit(); the flow is watched with follow() (read in a thread, so a stream
that never ends fails the test instead of hanging it) or by polling retrieve().
"""
import subprocess
import threading
import time
from datetime import datetime, timedelta, timezone
from urllib.parse import parse_qs, urlsplit

import httpx
import kernel
import pyotp
import pytest
from kernel.types.auth import (
    LoginResponse,
    ManagedAuth,
    ManagedAuthTimelineEvent,
    SubmitFieldsResponse,
)
from kernel.types.auth.connection_follow_response import ManagedAuthStateEvent

from tests.live_server import BIN, ROOT
from tests.sdk.conftest import unique
from tests.sdk.streams import WAIT, Reader
from tests.waiting import eventually

# Above the server's 15 s heartbeat interval, so an idle stream never trips the SDK's read timeout.
READ_TIMEOUT = 30.0
DOMAIN = "127.0.0.1"


@pytest.fixture
def auth(in_project):
    """The shared organization's client in a project of this test's own; its connections go afterwards."""
    yield in_project
    for connection in list(in_project.auth.connections.list(limit=100)):
        in_project.auth.connections.delete(connection.id)


@pytest.fixture
def streams(auth):
    """A client of the same project whose reads may wait for a heartbeat."""
    return auth.with_options(timeout=READ_TIMEOUT)


def new_connection(client, site=None, **params):
    """A connection to the test website (login_url set, so no discovery) for a profile of its own."""
    params.setdefault("profile_name", unique("profile"))
    params.setdefault("domain", DOMAIN)
    if site is not None:
        params.setdefault("login_url", f"{site.url}/login")
    return client.auth.connections.create(**params)


def ids(items):
    return [item.id for item in items]


def wait_for(client, connection_id, predicate, timeout=WAIT):
    """The connection record once predicate(record) holds."""
    record = None

    def reached():
        nonlocal record
        record = client.auth.connections.retrieve(connection_id)
        return predicate(record)

    assert eventually(reached, timeout, interval=0.05), \
        f"the connection never reached the expected state; last: {record}"
    return record


def finished(record):
    return record.flow_status not in (None, "IN_PROGRESS")


def prompt_after(interaction_id=None):
    """A predicate: the flow awaits input with a prompt other than `interaction_id` (or has ended)."""
    def ready(record):
        return finished(record) or (record.flow_step == "AWAITING_INPUT"
                                    and record.interaction_id not in (None, interaction_id))
    return ready


def field_ids(prompt):
    return {field.type: field.id for field in prompt.fields}


def follow(client, connection_id):
    return Reader(lambda: client.auth.connections.follow(connection_id))


def awaiting_input(frame):
    return frame.flow_step == "AWAITING_INPUT" and bool(frame.interaction_id)


def states(frames):
    return [(frame.flow_status, frame.flow_step) for frame in frames]


def counting_client(make_client, api_key, max_retries=2, **options):
    """A client that retries like the SDK's default, and a list of the requests it sent."""
    sent = []
    http_client = httpx.Client(event_hooks={"request": [lambda request: sent.append(request)]})
    return make_client(api_key, max_retries=max_retries, http_client=http_client, **options), sent


# The scheduler finds a connection's health check due only after its interval (>= 300 s);
# this makes it due now, in the server's database, so `flask auth check` runs it.
MAKE_DUE = """
import sys
from datetime import timedelta
from app import create_app
from app.auth_connections.models import AuthConnection
from app.core import clock
from app.core.db import db
with create_app().app_context(), db.connection_context():
    updated = (AuthConnection.update(next_check_at=clock.now() - timedelta(seconds=1))
               .where(AuthConnection.id == sys.argv[1]).execute())
assert updated == 1, updated
"""


def run_health_check(live_server, connection_id):
    subprocess.run([str(BIN / "python"), "-c", MAKE_DUE, connection_id], cwd=ROOT, env=live_server.env,
                   check=True, capture_output=True, timeout=60)
    return live_server.cli("auth", "check")


# --- create / retrieve ----------------------------------------------------------------------------

def test_create_with_defaults_creates_the_profile_and_retrieve_returns_it(auth, site):
    profile_name = unique("profile")
    raw = auth.auth.connections.with_raw_response.create(domain=DOMAIN, profile_name=profile_name,
                                                         login_url=f"{site.url}/login")
    assert raw.http_response.status_code == 201
    created = raw.parse()
    assert isinstance(created, ManagedAuth)
    assert created.id and (created.domain, created.profile_name) == (DOMAIN, profile_name)
    assert created.status == "NEEDS_AUTH" and created.login_url == f"{site.url}/login"
    assert (created.record_session, created.save_credentials, created.auto_reauth, created.health_checks) == (
        False, True, True, True)
    assert created.health_check_interval == 3600  # max(3600, the plan's minimum)
    assert created.allowed_domains == [] and created.credential is None
    assert (created.can_reauth, created.can_reauth_reason) == (False, "no_credential")
    # No flow yet: no flow state at all.
    assert created.flow_status is None and created.flow_step is None and created.hosted_url is None
    assert created.post_login_url is None and created.last_auth_at is None

    assert auth.profiles.retrieve(profile_name).name == profile_name  # created with the connection
    got = auth.auth.connections.retrieve(created.id)
    assert isinstance(got, ManagedAuth)
    assert got.to_dict() == created.to_dict()


def test_create_with_settings(auth, site):
    created = new_connection(auth, site, domain="WWW.Example.COM", allowed_domains=["www.Login.example.com",
                                                                                   "*.idp.test", "idp.test"],
                             auto_reauth=False, health_checks=False, health_check_interval=600,
                             record_session=True, save_credentials=False, browser={"region": "eu-west"})
    assert created.domain == "example.com"
    assert created.allowed_domains == ["idp.test", "login.example.com"]  # normalized, deduplicated
    assert (created.auto_reauth, created.health_checks, created.health_check_interval) == (False, False, 600)
    assert (created.record_session, created.save_credentials) == (True, False)
    assert created.browser.region == "eu-west"


def test_create_for_a_taken_profile_and_domain_is_a_409_sent_once(auth, site, project, live_server, make_client):
    first = new_connection(auth, site)

    client, sent = counting_client(make_client, live_server.api_key, project=project.name)
    started = time.monotonic()
    with pytest.raises(kernel.ConflictError) as caught:
        client.auth.connections.create(domain=DOMAIN, profile_name=first.profile_name)
    assert time.monotonic() - started < 1.0  # no retry back-off
    assert len(sent) == 1  # the SDK's default retries leave a 409 alone
    assert caught.value.status_code == 409
    assert caught.value.response.headers.get("x-should-retry") == "false"
    assert caught.value.body["code"] == "auth_connection_exists"

    # The same profile on another domain, or another profile on the same domain, is no conflict.
    other_domain = auth.auth.connections.create(domain="other.example", profile_name=first.profile_name)
    other_profile = new_connection(auth, site)
    assert sorted(ids(auth.auth.connections.list())) == sorted([first.id, other_domain.id, other_profile.id])


def test_concurrent_creates_for_a_new_profile_on_different_domains_all_succeed(auth):
    count = 8
    for _ in range(10):  # the race is lost most rounds on Postgres; stop at the first
        profile_name = unique("shared")
        results = [None] * count
        barrier = threading.Barrier(count)

        def create(index, profile_name=profile_name, results=results, barrier=barrier):
            barrier.wait()
            try:
                results[index] = auth.auth.connections.create(domain=f"d{index}.example", profile_name=profile_name)
            except kernel.APIStatusError as error:
                results[index] = error

        threads = [threading.Thread(target=create, args=(index,)) for index in range(count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=WAIT)
        failed = [(r.status_code, r.body) for r in results if isinstance(r, kernel.APIStatusError)]
        assert not failed, failed
        assert all(isinstance(r, ManagedAuth) for r in results)
        assert len(ids(auth.auth.connections.list(profile_name=profile_name, limit=100))) == count


def test_create_validation(auth):
    with pytest.raises(kernel.BadRequestError):
        auth.auth.connections.create(domain=DOMAIN, profile_name=unique("profile"), health_check_interval=60)
    with pytest.raises(kernel.BadRequestError):
        auth.auth.connections.create(domain=DOMAIN, profile_name=unique("profile"), health_check_interval=86401)
    with pytest.raises(kernel.NotFoundError) as caught:
        auth.auth.connections.create(domain=DOMAIN, profile_name=unique("profile"), credential={"name": "missing"})
    assert caught.value.body["code"] == "credential_not_found"
    assert list(auth.auth.connections.list()) == []


def test_unknown_connection_is_404_everywhere(auth):
    calls = [
        lambda: auth.auth.connections.retrieve("nope"),
        lambda: auth.auth.connections.update("nope", auto_reauth=False),
        lambda: auth.auth.connections.delete("nope"),
        lambda: auth.auth.connections.login("nope"),
        lambda: auth.auth.connections.submit("nope", sso_provider="google"),
        lambda: auth.auth.connections.timeline("nope"),
        lambda: auth.auth.connections.follow("nope"),
    ]
    for call in calls:
        with pytest.raises(kernel.NotFoundError) as caught:
            call()
        assert caught.value.body["code"] == "auth_connection_not_found"


def test_a_connection_of_another_project_is_not_found(auth, sdk, site):
    created = new_connection(auth, site)
    elsewhere = sdk.with_options(project=sdk.projects.create(name=unique("project")).name)
    with pytest.raises(kernel.NotFoundError):
        elsewhere.auth.connections.retrieve(created.id)
    assert created.id not in ids(elsewhere.auth.connections.list())


# --- update ---------------------------------------------------------------------------------------

def test_update_changes_only_what_is_given(auth, site):
    created = new_connection(auth, site, allowed_domains=["a.test", "b.test"], browser={"region": "eu-west"})

    updated = auth.auth.connections.update(created.id, health_check_interval=900, allowed_domains=["www.C.test"])
    assert isinstance(updated, ManagedAuth)
    assert updated.health_check_interval == 900
    assert updated.allowed_domains == ["c.test"]  # replaced, not merged
    assert updated.login_url == f"{site.url}/login" and updated.auto_reauth is True
    assert updated.browser.region == "eu-west"

    updated = auth.auth.connections.update(created.id, login_url="", auto_reauth=False, browser={"stealth": False})
    assert updated.login_url is None  # "" clears
    assert updated.auto_reauth is False
    assert (updated.browser.region, updated.browser.stealth) == ("eu-west", False)  # omitted sub-keys kept
    assert updated.health_check_interval == 900 and updated.allowed_domains == ["c.test"]

    updated = auth.auth.connections.update(created.id, allowed_domains=[], login_url=f"{site.url}/login")
    assert updated.allowed_domains == [] and updated.login_url == f"{site.url}/login"
    assert auth.auth.connections.retrieve(created.id).to_dict() == updated.to_dict()

    name = unique("login")
    auth.credentials.create(name=name, domain=DOMAIN, values={"username": "carol", "password": "carol-password"})
    updated = auth.auth.connections.update(created.id, credential={"name": name})
    assert updated.credential.name == name
    assert (updated.can_reauth, updated.can_reauth_reason) == (True, "has_credential")
    with pytest.raises(kernel.NotFoundError):
        auth.auth.connections.update(created.id, credential={"name": unique("missing")})

    with pytest.raises(kernel.BadRequestError):
        auth.auth.connections.update(created.id, health_check_interval=10)
    with pytest.raises(kernel.BadRequestError):
        auth.auth.connections.update(created.id, login_url="not a url")
    assert auth.auth.connections.retrieve(created.id).health_check_interval == 900


# --- list -----------------------------------------------------------------------------------------

def test_list_filters_and_pages(auth):
    first_profile, second_profile = unique("alpha"), unique("beta")
    created = [
        auth.auth.connections.create(domain="a.example", profile_name=first_profile),
        auth.auth.connections.create(domain="b.example", profile_name=first_profile),
        auth.auth.connections.create(domain="a.example", profile_name=second_profile),
    ]
    every = auth.auth.connections.list()
    assert all(isinstance(item, ManagedAuth) for item in every.items)
    assert ids(every) == ids(created)  # oldest first

    assert ids(auth.auth.connections.list(domain="a.example")) == ids([created[0], created[2]])
    assert ids(auth.auth.connections.list(domain="www.A.example")) == ids([created[0], created[2]])
    assert ids(auth.auth.connections.list(profile_name=first_profile)) == ids(created[:2])
    assert ids(auth.auth.connections.list(profile_name=first_profile, domain="b.example")) == [created[1].id]
    assert ids(auth.auth.connections.list(query="b.exam")) == [created[1].id]  # a domain's substring
    assert ids(auth.auth.connections.list(query=second_profile[-8:])) == [created[2].id]  # a profile's substring
    assert ids(auth.auth.connections.list(query=created[1].id)) == [created[1].id]  # an id
    assert ids(auth.auth.connections.list(query="nothing-matches")) == []
    assert ids(auth.auth.connections.list(profile_name="nobody")) == []

    page = auth.auth.connections.list(limit=2)
    assert ids(page.items) == ids(created[:2]) and page.has_next_page()
    assert ids(auth.auth.connections.list(limit=2)) == ids(created)  # auto-paginates over two pages
    assert [len(p.items) for p in auth.auth.connections.list(limit=2).iter_pages()] == [2, 1]
    assert ids(auth.auth.connections.list(limit=1, domain="a.example")) == ids([created[0], created[2]])
    last = auth.auth.connections.list(limit=2, offset=2)
    assert ids(last.items) == [created[2].id] and not last.has_next_page()


# --- delete ---------------------------------------------------------------------------------------

def test_delete(auth, site):
    created = new_connection(auth, site)
    assert auth.auth.connections.delete(created.id) is None
    with pytest.raises(kernel.NotFoundError):
        auth.auth.connections.retrieve(created.id)
    with pytest.raises(kernel.NotFoundError):
        auth.auth.connections.delete(created.id)
    assert ids(auth.auth.connections.list()) == []
    # The profile stays; the pair is free again.
    assert auth.profiles.retrieve(created.profile_name).name == created.profile_name
    again = auth.auth.connections.create(domain=DOMAIN, profile_name=created.profile_name)
    assert again.id != created.id


def test_delete_cancels_a_running_flow_and_ends_its_stream(auth, streams, site):
    created = new_connection(auth, site)
    auth.auth.connections.login(created.id)
    reader = follow(streams, created.id)
    reader.until(awaiting_input)

    auth.auth.connections.delete(created.id)
    rest = reader.rest()  # the stream ends by itself
    assert rest, "no frame after the delete"
    last = rest[-1]
    assert isinstance(last, ManagedAuthStateEvent)
    assert last.flow_status == "CANCELED"
    assert all(frame.flow_status == "IN_PROGRESS" for frame in rest[:-1])
    with pytest.raises(kernel.NotFoundError):
        auth.auth.connections.retrieve(created.id)


# --- login / hosted page --------------------------------------------------------------------------

def test_login_returns_a_hosted_url_that_needs_no_api_key(auth, site, live_server):
    created = new_connection(auth, site)
    before = datetime.now(timezone.utc)
    login = auth.auth.connections.login(created.id)
    assert isinstance(login, LoginResponse)
    assert login.id == created.id and login.flow_type == "LOGIN"
    assert before + timedelta(seconds=250) < login.flow_expires_at < before + timedelta(seconds=310)
    url = urlsplit(login.hosted_url)
    assert f"{url.scheme}://{url.netloc}" == live_server.base_url
    assert url.path.startswith("/auth/hosted/")
    assert parse_qs(url.query)["code"] == [login.handoff_code]
    assert login.live_view_url is None

    # A second login while the flow runs returns the same flow, with a new code; the first still works.
    again = auth.auth.connections.login(created.id, record_session=False, skill_mode="disabled")
    assert urlsplit(again.hosted_url).path == url.path and again.flow_expires_at == login.flow_expires_at
    assert again.handoff_code != login.handoff_code

    record = auth.auth.connections.retrieve(created.id)
    assert record.flow_status == "IN_PROGRESS" and record.flow_type == "LOGIN"
    assert record.hosted_url is None and record.flow_expires_at == login.flow_expires_at

    page = httpx.get(login.hosted_url, timeout=WAIT)  # no Authorization header
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert page.headers["cache-control"] == "no-store"
    wrong = httpx.get(f"{live_server.base_url}{url.path}?code=wrong-{login.handoff_code}", timeout=WAIT)
    assert wrong.status_code == 404
    assert httpx.get(f"{live_server.base_url}{url.path}", timeout=WAIT).status_code == 404  # no code at all

    # The person answers on the page (Lantern's hosted submit, authorised by the code alone).
    prompt = wait_for(auth, created.id, prompt_after())
    ids_ = field_ids(prompt)
    body = {"interaction_id": prompt.interaction_id,
            "field_values": {ids_["identifier"]: "carol", ids_["password"]: "carol-password"}}
    refused = httpx.post(f"{live_server.base_url}{url.path}/submit", params={"code": "wrong"}, json=body,
                         timeout=WAIT)
    assert refused.status_code == 404
    answered = httpx.post(f"{live_server.base_url}{url.path}/submit", params={"code": login.handoff_code},
                          json=body, timeout=WAIT)
    assert answered.status_code == 200 and answered.json() == {"accepted": True}
    done = wait_for(auth, created.id, finished)
    assert (done.flow_status, done.status) == ("SUCCESS", "AUTHENTICATED")


def test_the_hosted_page_reads_the_flow_state_with_its_code(auth, site, live_server):
    """What the page's script reads first (a Lantern extension, authorised by the code alone)."""
    created = new_connection(auth, site)
    login = auth.auth.connections.login(created.id)
    path = urlsplit(login.hosted_url).path
    assert httpx.get(f"{live_server.base_url}{path}/state", params={"code": "wrong"},
                     timeout=WAIT).status_code == 404
    state = httpx.get(f"{live_server.base_url}{path}/state", params={"code": login.handoff_code}, timeout=WAIT)
    assert state.status_code == 200, state.text
    assert state.json()["domain"] == DOMAIN
    assert (state.json()["event"], state.json()["flow_status"]) == ("managed_auth_state", "IN_PROGRESS")


# --- a person logs in: follow, submit -------------------------------------------------------------

def test_follow_a_manual_login_with_a_password_then_a_totp_code(auth, streams, site):
    created = new_connection(auth, site)
    auth.auth.connections.login(created.id)
    reader = follow(streams, created.id)

    frames = reader.until(awaiting_input)
    assert all(isinstance(frame, ManagedAuthStateEvent) for frame in frames)
    assert all(frame.event == "managed_auth_state" and frame.flow_type == "LOGIN" for frame in frames)
    assert all(frame.flow_status == "IN_PROGRESS" for frame in frames)
    prompt = frames[-1]
    assert prompt.hosted_url is None and prompt.timestamp.tzinfo is not None
    assert {field.type for field in prompt.fields} == {"identifier", "password"}
    assert all(field.reason == "missing" and field.ref for field in prompt.fields)
    assert {field.name for field in prompt.discovered_fields} == {"username", "password"}
    assert [button.provider for button in prompt.pending_sso_buttons] == ["google"]
    assert any(choice.type == "sso_provider" for choice in prompt.choices)
    assert prompt.website_error is None

    ids_ = field_ids(prompt)
    accepted = auth.auth.connections.submit(created.id, interaction_id=prompt.interaction_id, field_values={
        ids_["identifier"]: "alice", ids_["password"]: "alice-password"})
    assert isinstance(accepted, SubmitFieldsResponse) and accepted.accepted is True

    frames = reader.until(lambda frame: awaiting_input(frame) and frame.interaction_id != prompt.interaction_id)
    assert ("IN_PROGRESS", "SUBMITTING") in states(frames)
    mfa = frames[-1]
    assert [field.type for field in mfa.fields] == ["totp_code"]
    assert mfa.fields[0].input_mode == "numeric"
    assert [field.type for field in mfa.discovered_fields] == ["totp"]
    # The prompt's state is also what retrieve shows.
    record = auth.auth.connections.retrieve(created.id)
    assert (record.flow_step, record.interaction_id) == ("AWAITING_INPUT", mfa.interaction_id)
    assert [field.id for field in record.fields] == [field.id for field in mfa.fields]

    auth.auth.connections.submit(created.id, interaction_id=mfa.interaction_id,
                                 field_values={mfa.fields[0].id: pyotp.TOTP(site.totp_secret).now()})
    rest = reader.rest()  # ends by itself after SUCCESS
    assert states(rest)[-1] == ("SUCCESS", "COMPLETED")
    assert rest[-1].post_login_url == f"{site.url}/account"
    assert not rest[-1].fields and not rest[-1].interaction_id

    record = auth.auth.connections.retrieve(created.id)
    assert record.status == "AUTHENTICATED" and record.post_login_url == f"{site.url}/account"
    assert (record.flow_status, record.flow_step, record.flow_type) == ("SUCCESS", "COMPLETED", "LOGIN")
    assert record.hosted_url is None and record.interaction_id is None
    assert record.last_auth_at is not None and record.last_auth_check_at is not None
    # save_credentials (default true): what alice typed is kept for re-auth.
    assert record.credential.name == f"auth-{created.id}" and record.can_reauth is True
    assert len(site.sessions) == 1 and list(site.sessions.values()) == ["alice"]

    # Following a finished flow: its last state, then the end.
    assert states(follow(streams, created.id).rest()) == [("SUCCESS", "COMPLETED")]


def test_a_legacy_submission_then_a_choice_by_id_then_the_texted_code(auth, site):
    created = new_connection(auth, site)
    auth.auth.connections.login(created.id)
    first = wait_for(auth, created.id, prompt_after())
    assert first.flow_step == "AWAITING_INPUT"

    # Legacy: field names from discovered_fields, no interaction_id.
    assert {field.name for field in first.discovered_fields} == {"username", "password"}
    auth.auth.connections.submit(created.id, fields={"username": "bob", "password": "bob-password"})
    choice = wait_for(auth, created.id, prompt_after(first.interaction_id))
    assert choice.flow_step == "AWAITING_INPUT" and not choice.fields
    methods = {c.mfa_type: c for c in choice.choices if c.type == "mfa_method"}
    assert set(methods) == {"sms", "totp"}
    assert {option.type for option in choice.mfa_options} == {"sms", "totp"}

    auth.auth.connections.submit(created.id, interaction_id=choice.interaction_id,
                                 selected_choice_id=methods["sms"].id)
    code = wait_for(auth, created.id, prompt_after(choice.interaction_id))
    assert [field.type for field in code.fields] == ["code"]
    assert len(site.sms_codes) == 1
    auth.auth.connections.submit(created.id, interaction_id=code.interaction_id,
                                 field_values={code.fields[0].id: site.sms_codes[-1]})
    done = wait_for(auth, created.id, finished)
    assert (done.flow_status, done.status) == ("SUCCESS", "AUTHENTICATED")


def test_a_legacy_sso_provider_waits_for_an_external_action(auth, streams, site):
    created = new_connection(auth, site)
    auth.auth.connections.login(created.id)
    reader = follow(streams, created.id)
    prompt = reader.until(awaiting_input)[-1]
    button = prompt.pending_sso_buttons[0]
    assert (button.provider, button.label) == ("google", "Sign in with Google")

    assert auth.auth.connections.submit(created.id, sso_provider=button.provider).accepted is True
    frames = reader.until(lambda frame: frame.flow_step == "AWAITING_EXTERNAL_ACTION")
    external = frames[-1]
    assert external.flow_status == "IN_PROGRESS"
    assert "identity provider" in external.external_action_message
    assert external.interaction_id and external.interaction_id != prompt.interaction_id
    record = auth.auth.connections.retrieve(created.id)
    assert (record.flow_step, record.external_action_message) == ("AWAITING_EXTERNAL_ACTION",
                                                                  external.external_action_message)
    auth.auth.connections.delete(created.id)
    assert reader.rest()[-1].flow_status == "CANCELED"


def test_submit_is_checked_against_the_current_prompt(auth, site):
    created = new_connection(auth, site)
    with pytest.raises(kernel.ConflictError) as caught:
        auth.auth.connections.submit(created.id, interaction_id="x", field_values={"a": "b"})
    assert caught.value.body["code"] == "no_flow_in_progress"
    assert caught.value.response.headers.get("x-should-retry") == "false"

    auth.auth.connections.login(created.id)
    prompt = wait_for(auth, created.id, prompt_after())
    ids_ = field_ids(prompt)
    with pytest.raises(kernel.ConflictError) as caught:
        auth.auth.connections.submit(created.id, interaction_id="stale",
                                     field_values={ids_["identifier"]: "a", ids_["password"]: "b"})
    assert caught.value.body["code"] == "stale_interaction"
    with pytest.raises(kernel.BadRequestError):
        auth.auth.connections.submit(created.id, interaction_id=prompt.interaction_id, field_values={"nope": "x"})
    with pytest.raises(kernel.BadRequestError):
        auth.auth.connections.submit(created.id, field_values={ids_["identifier"]: "a"})  # no interaction_id
    with pytest.raises(kernel.BadRequestError):
        auth.auth.connections.submit(created.id, interaction_id=prompt.interaction_id, fields={"username": "a"})
    with pytest.raises(kernel.BadRequestError):
        auth.auth.connections.submit(created.id)
    # Nothing reached the flow: the prompt is unchanged.
    again = auth.auth.connections.retrieve(created.id)
    assert (again.flow_step, again.interaction_id) == ("AWAITING_INPUT", prompt.interaction_id)


def test_follow_a_connection_that_never_logged_in_ends_at_once(streams, site):
    created = new_connection(streams, site)
    assert follow(streams, created.id).rest() == []


# --- a stored credential logs in by itself --------------------------------------------------------

def test_a_stored_credential_with_a_totp_secret_logs_in_without_a_person(auth, streams, site):
    name = unique("alice")
    auth.credentials.create(name=name, domain=DOMAIN, values={"username": "alice", "password": "alice-password"},
                            totp_secret=site.totp_secret)
    created = new_connection(auth, site, credential={"name": name})
    assert created.credential.name == name
    assert (created.can_reauth, created.can_reauth_reason) == (True, "has_credential")

    auth.auth.connections.login(created.id)
    frames = follow(streams, created.id).rest()
    assert states(frames)[-1] == ("SUCCESS", "COMPLETED")
    assert "AWAITING_INPUT" not in [frame.flow_step for frame in frames]
    record = auth.auth.connections.retrieve(created.id)
    assert record.status == "AUTHENTICATED" and record.post_login_url == f"{site.url}/account"
    assert record.credential.name == name  # the stored credential stays the connection's
    assert list(site.sessions.values()) == ["alice"]
    assert ("POST", "/mfa/totp") in site.requests


# --- timeline -------------------------------------------------------------------------------------

def test_timeline_after_a_login_and_a_health_check(auth, site, live_server):
    name = unique("carol")
    auth.credentials.create(name=name, domain=DOMAIN, values={"username": "carol", "password": "carol-password"})
    created = new_connection(auth, site, credential={"name": name})
    assert list(auth.auth.connections.timeline(created.id)) == []

    auth.auth.connections.login(created.id)
    logged_in = wait_for(auth, created.id, finished)
    assert logged_in.flow_status == "SUCCESS"
    timeline = list(auth.auth.connections.timeline(created.id))
    assert all(isinstance(event, ManagedAuthTimelineEvent) for event in timeline)
    assert [(e.type, e.status, e.step) for e in timeline] == [("login", "SUCCESS", "COMPLETED")]
    login = timeline[0]
    assert login.timestamp <= login.completed_at and login.updated_at is not None

    run_health_check(live_server, created.id)
    timeline = list(auth.auth.connections.timeline(created.id))
    assert [(e.type, e.status) for e in timeline] == [("health_check", "AUTHENTICATED"), ("login", "SUCCESS")]
    check = timeline[0]
    assert check.previous_status == "AUTHENTICATED" and check.timestamp >= login.timestamp  # newest first
    assert timeline[1].id == login.id

    assert ids(auth.auth.connections.timeline(created.id, type="health_check")) == [check.id]
    assert ids(auth.auth.connections.timeline(created.id, type="login")) == [login.id]
    assert ids(auth.auth.connections.timeline(created.id, type="reauth")) == []
    assert [ids(page.items) for page in auth.auth.connections.timeline(created.id, limit=1).iter_pages()] == [
        [check.id], [login.id]]
    assert ids(auth.auth.connections.timeline(created.id, limit=1, offset=1).items) == [login.id]

    record = auth.auth.connections.retrieve(created.id)
    assert record.status == "AUTHENTICATED" and record.last_auth_check_at >= check.timestamp - timedelta(seconds=1)
