"""Login flows against the test website: manual, automatic, provider-backed, rejected input,
expiry, cancel, submit validation, the events stream, health checks and re-auth."""
import html
import json

import pyotp
import pytest

from app.auth_connections import health
from app.auth_connections.models import AuthConnection
from app.core import clock
from app.core.db import db
from tests.auth_connections.conftest import finished
from tests.invocations.conftest import read_frames


def start(client, connection_id):
    response = client.post(f"/auth/connections/{connection_id}/login", json={})
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def prompt_after(interaction_id=None):
    """A predicate: the flow awaits input with a prompt other than `interaction_id` (or has ended)."""
    def ready(record):
        return finished(record) or (record.get("flow_step") == "AWAITING_INPUT"
                                    and record.get("interaction_id") not in (None, interaction_id))
    return ready


def field_ids(record):
    return {field["type"]: field["id"] for field in record["fields"]}


def submit(client, connection_id, body):
    return client.post(f"/auth/connections/{connection_id}/submit", json=body)


def test_a_person_logs_in_with_mfa_and_the_cookies_land_in_the_profile(client, site, new_connection, wait_for):
    connection = new_connection()
    login = start(client, connection["id"])
    assert login["id"] == connection["id"] and login["flow_type"] == "LOGIN"
    assert login["hosted_url"].startswith("http://localhost/auth/hosted/")
    assert login["handoff_code"] in login["hosted_url"]
    record = wait_for(connection["id"], prompt_after())
    assert record["flow_status"] == "IN_PROGRESS" and record["flow_step"] == "AWAITING_INPUT"
    ids = field_ids(record)
    assert set(ids) == {"identifier", "password"}
    assert {f["name"] for f in record["discovered_fields"]} == {"username", "password"}
    assert [b["provider"] for b in record["pending_sso_buttons"]] == ["google"]
    assert any(c["type"] == "sso_provider" for c in record["choices"])

    accepted = submit(client, connection["id"], {"interaction_id": record["interaction_id"], "field_values": {
        ids["identifier"]: "alice", ids["password"]: "alice-password"}})
    assert accepted.status_code == 200 and accepted.get_json() == {"accepted": True}
    mfa = wait_for(connection["id"], prompt_after(record["interaction_id"]))
    code_field = mfa["fields"][0]
    assert code_field["type"] == "totp_code"
    submit(client, connection["id"], {"interaction_id": mfa["interaction_id"],
                                      "field_values": {code_field["id"]: pyotp.TOTP(site.totp_secret).now()}})
    done = wait_for(connection["id"], finished)
    assert done["flow_status"] == "SUCCESS" and done["flow_step"] == "COMPLETED"
    assert done["status"] == "AUTHENTICATED" and done["post_login_url"].endswith("/account")
    state = client.get(f"/profiles/{connection['profile_name']}/download").get_json()
    cookies = {c["name"]: c for c in state["cookies"]}
    assert cookies["sid"]["value"] in site.sessions and cookies["sid"]["domain"] == "127.0.0.1"
    # save_credentials (default true): what the person typed is kept for re-auth, as a credential.
    assert done["credential"] == {"name": f"auth-{connection['id']}"} and done["can_reauth"] is True


def test_a_stored_credential_with_a_totp_secret_logs_in_by_itself(client, site, new_connection, wait_for):
    client.post("/credentials", json={"name": "alice", "domain": "127.0.0.1", "totp_secret": site.totp_secret,
                                      "values": {"username": "alice", "password": "alice-password"}})
    connection = new_connection(credential={"name": "alice"})
    start(client, connection["id"])
    done = wait_for(connection["id"], finished)
    assert done["flow_status"] == "SUCCESS", done
    assert done["status"] == "AUTHENTICATED"


def test_a_provider_item_logs_in_by_path_and_by_domain(client, site, new_connection, wait_for, connect):
    vault = connect.add_vault("Team")
    connect.add_login(vault, "Example", [site.url], username="carol", password="carol-password")
    provider = client.post("/org/credential_providers", json={
        "name": "op", "provider_type": "onepassword", "token": connect.token, "url": connect.url}).get_json()
    by_path = new_connection(credential={"provider": "op", "path": "Team/Example"})
    start(client, by_path["id"])
    assert wait_for(by_path["id"], finished)["flow_status"] == "SUCCESS"
    by_domain = new_connection(profile_name="other", credential={"provider": provider["id"], "auto": True})
    start(client, by_domain["id"])
    assert wait_for(by_domain["id"], finished)["flow_status"] == "SUCCESS"


def test_a_wrong_password_is_shown_then_the_right_one_works(client, site, new_connection, wait_for):
    connection = new_connection()
    start(client, connection["id"])
    first = wait_for(connection["id"], prompt_after())
    ids = field_ids(first)
    submit(client, connection["id"], {"interaction_id": first["interaction_id"],
                                      "field_values": {ids["identifier"]: "carol", ids["password"]: "nope"}})
    rejected = wait_for(connection["id"], prompt_after(first["interaction_id"]))
    assert rejected["website_error"] == "Incorrect username or password."
    assert {f["reason"] for f in rejected["fields"]} == {"rejected"}
    ids = field_ids(rejected)
    submit(client, connection["id"], {"interaction_id": rejected["interaction_id"],
                                      "field_values": {ids["identifier"]: "carol", ids["password"]: "carol-password"}})
    assert wait_for(connection["id"], finished)["flow_status"] == "SUCCESS"


def test_a_method_choice_then_the_texted_code(client, site, new_connection, wait_for):
    connection = new_connection()
    start(client, connection["id"])
    first = wait_for(connection["id"], prompt_after())
    ids = field_ids(first)
    submit(client, connection["id"], {"fields": {"username": "bob", "password": "bob-password"}})  # legacy member
    choice = wait_for(connection["id"], prompt_after(first["interaction_id"]))
    assert {c["mfa_type"] for c in choice["choices"] if c["type"] == "mfa_method"} == {"sms", "totp"}
    assert {o["type"] for o in choice["mfa_options"]} == {"sms", "totp"}
    assert ids  # the first prompt had fields; this one has choices only
    submit(client, connection["id"], {"mfa_option_id": "sms"})  # legacy member
    code = wait_for(connection["id"], prompt_after(choice["interaction_id"]))
    assert code["fields"][0]["type"] == "code"
    submit(client, connection["id"], {"interaction_id": code["interaction_id"],
                                      "field_values": {code["fields"][0]["id"]: site.sms_codes[-1]}})
    assert wait_for(connection["id"], finished)["flow_status"] == "SUCCESS"


def test_sso_waits_for_an_external_action(client, site, new_connection, wait_for):
    connection = new_connection()
    start(client, connection["id"])
    first = wait_for(connection["id"], prompt_after())
    submit(client, connection["id"], {"sso_provider": "google"})
    external = wait_for(connection["id"], lambda r: r.get("flow_step") == "AWAITING_EXTERNAL_ACTION")
    assert "identity provider" in external["external_action_message"]
    assert first["interaction_id"] != external["interaction_id"]


def test_submit_is_checked_against_the_current_prompt(client, site, new_connection, wait_for):
    connection = new_connection()
    none_yet = submit(client, connection["id"], {"interaction_id": "x", "field_values": {"a": "b"}})
    assert none_yet.status_code == 409 and none_yet.get_json()["code"] == "no_flow_in_progress"
    start(client, connection["id"])
    record = wait_for(connection["id"], prompt_after())
    ids = field_ids(record)
    cases = [
        ({"interaction_id": "stale", "field_values": {ids["identifier"]: "a", ids["password"]: "b"}}, 409,
         "stale_interaction"),
        ({"interaction_id": record["interaction_id"], "field_values": {"nope": "x"}}, 400, "bad_request"),
        ({"field_values": {ids["identifier"]: "a"}}, 400, "bad_request"),  # canonical without interaction_id
        ({"interaction_id": record["interaction_id"], "selected_choice_id": "nope"}, 400, "bad_request"),
        ({"interaction_id": record["interaction_id"], "fields": {"username": "a"}}, 400, "bad_request"),  # mixed
        ({"sso_provider": "google", "sso_button_selector": "a.sso"}, 400, "bad_request"),
        ({}, 400, "bad_request"),
    ]
    for body, status, code in cases:
        response = submit(client, connection["id"], body)
        assert (response.status_code, response.get_json()["code"]) == (status, code), body
    # Nothing reached the runner: the prompt is unchanged.
    again = client.get(f"/auth/connections/{connection['id']}").get_json()
    assert again["interaction_id"] == record["interaction_id"] and again["flow_step"] == "AWAITING_INPUT"


def test_a_flow_expires(make_app, app, owner_key, site, new_connection, wait_for):
    from tests.conftest import client_for

    quick = client_for(make_app(AUTH_FLOW_LIFETIME_SECONDS=1, STREAM_POLL_SECONDS=0.05), owner_key.plaintext)
    connection = new_connection(using=quick)
    start(quick, connection["id"])
    done = wait_for(connection["id"], finished, using=quick)
    assert done["flow_status"] == "EXPIRED" and done["error_code"] == "flow_expired"
    assert "hosted_url" not in done


def test_deleting_the_connection_cancels_the_flow_and_ends_the_stream(client, site, new_connection, wait_for):
    connection = new_connection()
    start(client, connection["id"])
    wait_for(connection["id"], prompt_after())
    response = client.get(f"/auth/connections/{connection['id']}/events")
    assert client.delete(f"/auth/connections/{connection['id']}").status_code == 204
    frames = read_frames(response, timeout=10)
    assert frames[0][1]["flow_step"] == "AWAITING_INPUT"
    assert frames[-1][1]["flow_status"] == "CANCELED"
    assert client.get(f"/auth/connections/{connection['id']}").status_code == 404


def test_the_events_stream_sends_every_state_in_order_and_closes_after_the_last(
        client, site, new_connection, wait_for):
    connection = new_connection()
    start(client, connection["id"])
    record = wait_for(connection["id"], prompt_after())
    response = client.get(f"/auth/connections/{connection['id']}/events")
    ids = field_ids(record)
    submit(client, connection["id"], {"interaction_id": record["interaction_id"], "field_values": {
        ids["identifier"]: "carol", ids["password"]: "carol-password"}})
    frames = read_frames(response, timeout=10)
    states = [(data["flow_status"], data["flow_step"]) for _, data in frames]
    assert states[0] == ("IN_PROGRESS", "AWAITING_INPUT")
    assert ("IN_PROGRESS", "SUBMITTING") in states
    assert states[-1] == ("SUCCESS", "COMPLETED")
    event_ids = [event_id for event_id, _ in frames]
    assert event_ids == sorted(event_ids)
    assert all(data["event"] == "managed_auth_state" for _, data in frames)
    # A finished flow: one frame, its final state, then the stream closes.
    assert [d["flow_status"] for _, d in read_frames(client.get(f"/auth/connections/{connection['id']}/events"))] \
        == ["SUCCESS"]


def test_unknown_connection_is_404(client):
    for response in (client.get("/auth/connections/nope"), client.get("/auth/connections/nope/events"),
                     client.post("/auth/connections/nope/login", json={}),
                     client.post("/auth/connections/nope/submit", json={"sso_provider": "x"})):
        assert response.status_code == 404 and response.get_json()["code"] == "auth_connection_not_found"


def test_a_health_check_finds_the_session_gone_and_reauth_logs_in_again(app, client, site, new_connection, wait_for):
    client.post("/credentials", json={"name": "carol", "domain": "127.0.0.1",
                                      "values": {"username": "carol", "password": "carol-password"}})
    connection = new_connection(credential={"name": "carol"})
    start(client, connection["id"])
    first = wait_for(connection["id"], finished)
    assert first["status"] == "AUTHENTICATED", first

    def check():
        with app.test_request_context(), db.connection_context():
            row = AuthConnection.get_by_id(connection["id"])
            return health.check(row, timeout=5)

    assert check().status == "AUTHENTICATED"
    site.expire_sessions()
    result = check()
    assert (result.previous_status, result.status) == ("AUTHENTICATED", "NEEDS_AUTH")
    reauth = wait_for(connection["id"], lambda r: r.get("flow_type") == "REAUTH" and finished(r))
    assert reauth["flow_status"] == "SUCCESS" and reauth["status"] == "AUTHENTICATED"
    timeline = client.get(f"/auth/connections/{connection['id']}/timeline").get_json()
    assert [(e["type"], e["status"]) for e in timeline] == [
        ("reauth", "SUCCESS"), ("health_check", "NEEDS_AUTH"), ("health_check", "AUTHENTICATED"),
        ("login", "SUCCESS")]
    only_checks = client.get(f"/auth/connections/{connection['id']}/timeline", query_string={"type": "health_check"})
    assert [e["previous_status"] for e in only_checks.get_json()] == ["AUTHENTICATED", "AUTHENTICATED"]


def test_due_health_checks_run_once_per_interval(app, client, site, new_connection, wait_for):
    client.post("/credentials", json={"name": "carol", "domain": "127.0.0.1",
                                      "values": {"username": "carol", "password": "carol-password"}})
    connection = new_connection(credential={"name": "carol"}, health_check_interval=300)
    start(client, connection["id"])
    wait_for(connection["id"], finished)
    with app.test_request_context(), db.connection_context():
        assert health.run_due(timeout=5) == 0
        clock.freeze(clock.now())
        clock.advance(seconds=301)
        assert health.run_due(timeout=5) == 1
        assert health.run_due(timeout=5) == 0


@pytest.mark.parametrize("body", [{"credential": {"name": "missing"}}, {"credential": {"provider": "missing",
                                                                                         "auto": True}}])
def test_a_missing_credential_is_404(client, body):
    response = client.post("/auth/connections", json={"domain": "a.test", "profile_name": "p", **body})
    assert response.status_code == 404


def test_flow_state_is_never_json_with_secrets(client, site, new_connection, wait_for):
    connection = new_connection()
    start(client, connection["id"])
    record = wait_for(connection["id"], prompt_after())
    ids = field_ids(record)
    submit(client, connection["id"], {"interaction_id": record["interaction_id"], "field_values": {
        ids["identifier"]: "carol", ids["password"]: "carol-password"}})
    wait_for(connection["id"], finished)
    with db.connection_context():
        dumped = json.dumps([list(row) for row in db.execute_sql("SELECT * FROM login_flow").fetchall()],
                            default=str)
        dumped += json.dumps([list(row) for row in db.execute_sql("SELECT * FROM auth_event").fetchall()],
                             default=str)
    assert "carol-password" not in dumped


# -- review findings --------------------------------------------------------------------------

def test_a_wrong_stored_password_is_tried_once_then_a_person_decides(client, site, new_connection, wait_for):
    client.post("/credentials", json={"name": "stale", "domain": "127.0.0.1",
                                      "values": {"username": "carol", "password": "old-password"}})
    # The site's error is not marked up for us to read: the flow must not loop on it.
    site.routes[("POST", "/login")] = lambda req: (200, LOGIN_WITHOUT_ALERT, [])
    connection = new_connection(credential={"name": "stale"})
    start(client, connection["id"])
    record = wait_for(connection["id"], prompt_after())
    assert record["flow_step"] == "AWAITING_INPUT"
    assert site.requests.count(("POST", "/login")) == 1


LOGIN_WITHOUT_ALERT = ('<html><body><p class="notice">That did not work.</p><form method="post" action="/login">'
                       '<input name="username"><input name="password" type="password">'
                       '<button type="submit">Sign in</button></form></body></html>')


def test_a_flow_that_expires_while_the_site_answers_does_not_log_in(make_app, app, owner_key, site, wait_for):
    import time

    from tests.conftest import client_for

    quick = client_for(make_app(AUTH_FLOW_LIFETIME_SECONDS=1, STREAM_POLL_SECONDS=0.05), owner_key.plaintext)
    quick.post("/credentials", json={"name": "carol", "domain": "127.0.0.1",
                                     "values": {"username": "carol", "password": "carol-password"}})
    login = site.routes[("POST", "/login")]
    site.routes[("POST", "/login")] = lambda req: (time.sleep(1.5), login(req))[1]
    connection = quick.post("/auth/connections", json={
        "domain": "127.0.0.1", "profile_name": "slow", "login_url": f"{site.url}/login",
        "credential": {"name": "carol"}}).get_json()
    start(quick, connection["id"])
    done = wait_for(connection["id"], finished, using=quick)
    assert done["flow_status"] == "EXPIRED"
    time.sleep(1.0)  # the site answers meanwhile; the runner must not act on it
    after = quick.get(f"/auth/connections/{connection['id']}").get_json()
    assert after["status"] == "NEEDS_AUTH" and after["flow_status"] == "EXPIRED"
    assert quick.get("/profiles/slow/download").get_json()["cookies"] == []


def test_a_handoff_code_answers_only_for_its_own_flow(make_app, app, owner_key, site, wait_for):
    from tests.conftest import client_for

    quick = client_for(make_app(AUTH_FLOW_LIFETIME_SECONDS=1, STREAM_POLL_SECONDS=0.05), owner_key.plaintext)
    connection = quick.post("/auth/connections", json={"domain": "127.0.0.1", "profile_name": "p",
                                                       "login_url": f"{site.url}/login"}).get_json()
    first = start(quick, connection["id"])
    wait_for(connection["id"], finished, using=quick)  # expired
    start(quick, connection["id"])
    second_prompt = wait_for(connection["id"], prompt_after(), using=quick)
    old = first["hosted_url"].split("/auth/hosted/")[1]
    flow_id, code = old.split("?code=")
    answer = quick.post(f"/auth/hosted/{flow_id}/submit?code={code}", json={
        "interaction_id": second_prompt["interaction_id"], "fields": {"username": "x"}})
    assert answer.status_code in (400, 409)
    canonical = quick.post(f"/auth/hosted/{flow_id}/submit?code={code}", json={
        "interaction_id": second_prompt["interaction_id"],
        "field_values": {f["id"]: "x" for f in second_prompt["fields"]}})
    assert canonical.status_code == 409 and canonical.get_json()["code"] == "no_flow_in_progress"
    frames = read_frames(quick.get(f"/auth/hosted/{flow_id}/events?code={code}"), timeout=5)
    assert [data["flow_status"] for _, data in frames] == ["EXPIRED"]


def test_a_login_form_sending_the_password_in_the_url_is_not_submitted(client, site, new_connection, wait_for):
    site.routes[("GET", "/login")] = lambda req: (200, (
        '<html><body><form action="/login"><input name="username"><input name="password" type="password">'
        '<button>Sign in</button></form></body></html>'), [])
    connection = new_connection()
    start(client, connection["id"])
    record = wait_for(connection["id"], prompt_after())
    ids = field_ids(record)
    submit(client, connection["id"], {"interaction_id": record["interaction_id"], "field_values": {
        ids["identifier"]: "carol", ids["password"]: "carol-password"}})
    done = wait_for(connection["id"], finished)
    assert (done["flow_status"], done["error_code"]) == ("FAILED", "password_in_url")
    assert not any("carol-password" in path for path in site.paths)


def test_a_health_check_of_an_unavailable_site_keeps_the_status(app, client, site, new_connection, wait_for):
    client.post("/credentials", json={"name": "carol", "domain": "127.0.0.1",
                                      "values": {"username": "carol", "password": "carol-password"}})
    connection = new_connection(credential={"name": "carol"})
    start(client, connection["id"])
    wait_for(connection["id"], finished)
    site.routes[("GET", "/account")] = lambda req: (503, "<html><body>Down for maintenance</body></html>", [])
    with app.test_request_context(), db.connection_context():
        result = health.check(AuthConnection.get_by_id(connection["id"]), timeout=5)
    assert (result.status, result.error_code) == ("AUTHENTICATED", "site_unavailable")


def test_a_domain_that_names_no_host_is_400(client):
    response = client.post("/auth/connections", json={"domain": "...", "profile_name": "p"})
    assert response.status_code == 400 and response.get_json()["details"][0]["field"] == "domain"


def test_sso_only_pages_offer_each_choice_once(client, site, new_connection, wait_for):
    site.routes[("GET", "/login")] = lambda req: (200, (
        '<html><body><h1>Sign in</h1><a data-provider="google" href="/sso/google">Sign in with Google</a>'
        '<a data-provider="okta" href="/sso/okta">Sign in with Okta</a></body></html>'), [])
    connection = new_connection()
    start(client, connection["id"])
    record = wait_for(connection["id"], prompt_after())
    ids = [choice["id"] for choice in record["choices"]]
    assert sorted(ids) == sorted(set(ids)) and len(ids) == 2


# -- a credential's values fill the form's fields by meaning (#35 item 6) ---------------------

def test_an_email_only_credential_leaves_only_the_password_pending(client, site, new_connection, wait_for):
    """Kernel's partial-credential example: the email and the TOTP code come from the credential, the
    legacy `fields: {"password": ...}` is all a person submits."""
    client.post("/credentials", json={"name": "dana", "domain": "127.0.0.1", "totp_secret": site.totp_secret,
                                      "values": {"email": "dana@example.test"}})
    connection = new_connection(credential={"name": "dana"}, login_url=f"{site.url}/login/email")
    start(client, connection["id"])
    record = wait_for(connection["id"], prompt_after())
    assert [(f["type"], f["ref"], f["required"]) for f in record["fields"]] == [("password", "password", True)]
    assert [f["name"] for f in record["discovered_fields"]] == ["password"]
    accepted = submit(client, connection["id"], {"fields": {"password": "dana-password"}})
    assert accepted.status_code == 200, accepted.get_json()
    done = wait_for(connection["id"], finished)
    assert (done["flow_status"], done["status"]) == ("SUCCESS", "AUTHENTICATED"), done
    assert list(site.sessions.values()) == ["dana"]
    assert ("POST", "/mfa/totp") in site.requests  # the code came from the stored secret
    assert done["credential"] == {"name": "dana"}  # the typed password was not stored into it


def test_an_email_fills_an_email_or_username_field(client, site, new_connection, wait_for):
    site.users["alice@example.test"] = site.users["alice"]
    client.post("/credentials", json={"name": "alice", "domain": "127.0.0.1", "totp_secret": site.totp_secret,
                                      "values": {"email": "alice@example.test"}})
    connection = new_connection(credential={"name": "alice"})
    start(client, connection["id"])
    record = wait_for(connection["id"], prompt_after())
    assert [f["type"] for f in record["fields"]] == ["password"]
    submit(client, connection["id"], {"interaction_id": record["interaction_id"],
                                      "field_values": {record["fields"][0]["id"]: "alice-password"}})
    assert wait_for(connection["id"], finished)["flow_status"] == "SUCCESS"
    assert list(site.sessions.values()) == ["alice@example.test"]


def test_a_rejected_password_asks_again_with_the_stored_email_optional(client, site, new_connection, wait_for):
    client.post("/credentials", json={"name": "dana", "domain": "127.0.0.1", "totp_secret": site.totp_secret,
                                      "values": {"email": "dana@example.test"}})
    connection = new_connection(credential={"name": "dana"}, login_url=f"{site.url}/login/email")
    start(client, connection["id"])
    first = wait_for(connection["id"], prompt_after())
    submit(client, connection["id"], {"fields": {"password": "wrong"}})
    again = wait_for(connection["id"], prompt_after(first["interaction_id"]))
    assert again["website_error"] == "Incorrect email address or password."
    # The stored email may have been what was wrong: a person may type another, or leave it to the credential.
    shown = {f["type"]: f for f in again["fields"]}
    assert (shown["identifier"]["required"], shown["password"]["required"]) == (False, True)
    assert shown["identifier"]["hint"]
    assert {f["name"]: f["required"] for f in again["discovered_fields"]} == {"email": False, "password": True}
    submit(client, connection["id"], {"interaction_id": again["interaction_id"],
                                      "field_values": {shown["identifier"]["id"]: "",
                                                       shown["password"]["id"]: "dana-password"}})
    assert wait_for(connection["id"], finished)["flow_status"] == "SUCCESS"
    assert list(site.sessions.values()) == ["dana"]


@pytest.mark.parametrize(("username", "pending"), [("dana@example.test", []), ("dana", ["identifier"])])
def test_a_username_fills_an_email_field_only_when_it_is_an_email_address(
        client, site, new_connection, wait_for, username, pending):
    client.post("/credentials", json={"name": "dana", "domain": "127.0.0.1", "totp_secret": site.totp_secret,
                                      "values": {"username": username, "password": "dana-password"}})
    connection = new_connection(credential={"name": "dana"}, login_url=f"{site.url}/login/email")
    start(client, connection["id"])
    record = wait_for(connection["id"], prompt_after())
    if pending:
        assert [f["type"] for f in record["fields"]] == pending
        submit(client, connection["id"], {"fields": {"email": "dana@example.test"}})
    done = wait_for(connection["id"], finished)
    assert done["flow_status"] == "SUCCESS", done
    assert list(site.sessions.values()) == ["dana"]


def test_legacy_fields_are_matched_by_meaning_when_no_input_has_that_name(client, site, new_connection, wait_for):
    site.routes[("GET", "/login")] = lambda req: (200, (
        '<html><body><form method="post" action="/login"><input type="hidden" name="csrf" value="' + site.csrf
        + '"><label>Email <input name="login" type="email"></label><label>Password <input name="pass" '
        'type="password"></label><button type="submit">Sign in</button></form></body></html>'), [])
    login = site.routes[("POST", "/login")]
    site.routes[("POST", "/login")] = lambda req: (
        req.form.update(username=req.form.get("login"), password=req.form.get("pass")), login(req))[1]
    site.users["carol@example.test"] = site.users["carol"]
    connection = new_connection()
    start(client, connection["id"])
    record = wait_for(connection["id"], prompt_after())
    assert sorted(f["name"] for f in record["discovered_fields"]) == ["login", "pass"]
    both = submit(client, connection["id"], {"fields": {"email": "a", "username": "b", "password": "c"}})
    assert both.status_code == 400 and "login" in both.get_json()["message"]  # two names for one field
    assert submit(client, connection["id"], {"fields": {"email": "carol@example.test",
                                                        "password": "carol-password"}}).status_code == 200
    assert wait_for(connection["id"], finished)["flow_status"] == "SUCCESS"


def test_a_single_email_or_username_field_then_the_password_page(client, site, new_connection, wait_for):
    """A login in two steps: the stored email answers the first page by itself, a person the second."""
    site.routes[("GET", "/login")] = lambda req: (200, (
        '<html><body><form method="post" action="/login/next"><label for="id">Email or username</label>'
        '<input id="id" name="identifier" autocomplete="username"><button type="submit">Next</button>'
        '</form></body></html>'), [])
    site.routes[("POST", "/login/next")] = lambda req: (200, (
        '<html><body><form method="post" action="/login"><input type="hidden" name="csrf" value="' + site.csrf
        + '"><input type="hidden" name="username" value="' + html.escape(req.form.get("identifier", ""))
        + '"><label>Password <input type="password" name="password"></label><button type="submit">Sign in'
        '</button></form></body></html>'), [])
    site.users["carol@example.test"] = site.users["carol"]
    client.post("/credentials", json={"name": "carol", "domain": "127.0.0.1",
                                      "values": {"email": "carol@example.test"}})
    connection = new_connection(credential={"name": "carol"})
    start(client, connection["id"])
    record = wait_for(connection["id"], prompt_after())
    assert [f["type"] for f in record["fields"]] == ["password"]
    submit(client, connection["id"], {"fields": {"password": "carol-password"}})
    assert wait_for(connection["id"], finished)["flow_status"] == "SUCCESS"
    assert list(site.sessions.values()) == ["carol@example.test"]


# -- review of #35 item 6: what a stored value may fill, and what a person is asked again -----------------

def form_page(site, inputs, method="post", action="/login"):
    """A login route's answer: a form of `inputs` (HTML) with the site's CSRF token."""
    return lambda req: (200, (
        f'<html><body><form method="{method}" action="{action}"><input type="hidden" name="csrf" '
        f'value="{site.csrf}">{inputs}<button type="submit">Sign in</button></form></body></html>'), [])


def test_a_text_input_named_password_never_gets_the_stored_password(client, site, new_connection, wait_for):
    """A visible text input named after a credential key ("password") is not the password field."""
    site.routes[("GET", "/login")] = form_page(site, (
        '<label>Username <input name="username"></label><label>Password <input name="pw" type="password"></label>'
        '<label>Display name, shown on your public profile <input name="password"></label>'))
    sent = []
    site.routes[("POST", "/login")] = lambda req: (sent.append(dict(req.form)), (200, "<p>Welcome</p>", []))[1]
    client.post("/credentials", json={"name": "carol", "domain": "127.0.0.1",
                                      "values": {"username": "carol", "password": "carol-password"}})
    connection = new_connection(credential={"name": "carol"})
    start(client, connection["id"])
    assert wait_for(connection["id"], finished)["flow_status"] == "SUCCESS"
    assert [(form["username"], form["pw"], form["password"]) for form in sent] == [("carol", "carol-password", "")]


def test_an_identifier_form_sent_by_get_never_carries_the_stored_password(client, site, new_connection, wait_for):
    """An input named "password" labelled "Email" on a GET form takes the email; the password stays out of URLs."""
    site.routes[("GET", "/login")] = lambda req: (200, (
        '<html><body><form method="get" action="/next"><label>Email <input name="password"></label>'
        '<button type="submit">Next</button></form></body></html>'), [])
    site.routes[("GET", "/next")] = lambda req: (200, "<p>Welcome</p>", [])
    client.post("/credentials", json={"name": "carol", "domain": "127.0.0.1",
                                      "values": {"email": "carol@example.test", "password": "carol-password"}})
    connection = new_connection(credential={"name": "carol"})
    start(client, connection["id"])
    assert wait_for(connection["id"], finished)["flow_status"] == "SUCCESS"
    assert "/next?password=carol%40example.test" in site.paths
    assert not any("carol-password" in path for path in site.paths)


def test_a_login_saved_with_a_phone_number_logs_in_again_by_itself(client, site, new_connection, wait_for):
    """save_credentials keeps what a person typed as `username`; a phone number there fills a tel field."""
    site.routes[("GET", "/login")] = form_page(site, (
        '<label>Mobile number <input name="phone" type="tel"></label>'
        '<label>Password <input name="password" type="password"></label>'))
    login = site.routes[("POST", "/login")]
    site.routes[("POST", "/login")] = lambda req: (req.form.update(username=req.form.get("phone", "")), login(req))[1]
    site.users["+15550100"] = site.users["carol"]
    connection = new_connection()
    start(client, connection["id"])
    wait_for(connection["id"], prompt_after())
    submit(client, connection["id"], {"fields": {"phone": "+15550100", "password": "carol-password"}})
    assert wait_for(connection["id"], finished)["credential"] == {"name": f"auth-{connection['id']}"}

    site.expire_sessions()
    start(client, connection["id"])
    done = wait_for(connection["id"], finished)
    assert done["flow_status"] == "SUCCESS", done
    assert site.requests.count(("POST", "/login")) == 2


@pytest.mark.parametrize("label", ["Email or login", "Email or member ID", "Email address or login name"])
def test_a_username_fills_a_field_asking_for_an_email_or_a_login(client, site, new_connection, wait_for, label):
    site.routes[("GET", "/login")] = form_page(site, (
        f'<label>{label} <input name="who"></label><label>Password <input name="password" type="password"></label>'))
    login = site.routes[("POST", "/login")]
    site.routes[("POST", "/login")] = lambda req: (req.form.update(username=req.form.get("who", "")), login(req))[1]
    client.post("/credentials", json={"name": "carol", "domain": "127.0.0.1",
                                      "values": {"username": "carol", "password": "carol-password"}})
    connection = new_connection(credential={"name": "carol"})
    start(client, connection["id"])
    assert wait_for(connection["id"], finished)["flow_status"] == "SUCCESS"
    assert list(site.sessions.values()) == ["carol"]


def test_the_username_is_the_most_specific_key_whatever_their_order(client, site, new_connection, wait_for):
    """An account number is not a username: it fills only an input named after it."""
    client.post("/credentials", json={"name": "carol", "domain": "127.0.0.1", "values": {
        "account": "12345", "handle": "@carol", "user": "carol", "password": "carol-password"}})
    connection = new_connection(credential={"name": "carol"})
    start(client, connection["id"])
    assert wait_for(connection["id"], finished)["flow_status"] == "SUCCESS"
    assert list(site.sessions.values()) == ["carol"]


def test_a_refused_stored_password_is_asked_for_and_never_sent_again_unasked(client, site, new_connection, wait_for):
    client.post("/credentials", json={"name": "stale", "domain": "127.0.0.1",
                                      "values": {"username": "carol", "password": "old-password"}})
    connection = new_connection(credential={"name": "stale"})
    start(client, connection["id"])
    again = wait_for(connection["id"], prompt_after())
    assert again["website_error"] == "Incorrect username or password."
    shown = {f["type"]: f for f in again["fields"]}
    assert (shown["identifier"]["required"], "hint" in shown["identifier"]) == (False, True)
    assert (shown["password"]["required"], "hint" in shown["password"]) == (True, False)
    assert {f["name"]: f["required"] for f in again["discovered_fields"]} == {"username": False, "password": True}
    empty = submit(client, connection["id"], {"fields": {}})  # pressing Continue with nothing typed
    assert empty.status_code == 400 and "password" in empty.get_json()["message"]
    assert site.requests.count(("POST", "/login")) == 1
    submit(client, connection["id"], {"fields": {"password": "carol-password"}})
    assert wait_for(connection["id"], finished)["flow_status"] == "SUCCESS"
    assert list(site.sessions.values()) == ["carol"]


def test_a_script_may_send_a_field_the_credential_fills_and_its_value_wins(client, site, new_connection, wait_for):
    """A script that always sends the email and the password keeps working beside a partial credential."""
    site.users["carol@example.test"] = site.users["carol"]
    client.post("/credentials", json={"name": "carol", "domain": "127.0.0.1",
                                      "values": {"email": "old-address@example.test"}})
    connection = new_connection(credential={"name": "carol"})
    start(client, connection["id"])
    record = wait_for(connection["id"], prompt_after())
    assert [f["type"] for f in record["fields"]] == ["password"]
    answer = submit(client, connection["id"], {"fields": {"email": "carol@example.test", "password": "carol-password"}})
    assert answer.status_code == 200, answer.get_json()
    assert wait_for(connection["id"], finished)["flow_status"] == "SUCCESS"
    assert list(site.sessions.values()) == ["carol@example.test"]


def test_a_texted_code_is_not_answered_from_the_authenticator_secret(client, site, new_connection, wait_for):
    client.post("/credentials", json={"name": "erin", "domain": "127.0.0.1", "totp_secret": site.totp_secret,
                                      "values": {"username": "erin", "password": "erin-password"}})
    connection = new_connection(credential={"name": "erin"})
    start(client, connection["id"])
    record = wait_for(connection["id"], prompt_after())
    assert [(f["type"], f["required"], "hint" in f) for f in record["fields"]] == [("code", True, False)]
    assert ("POST", "/mfa/sms") not in site.requests
    submit(client, connection["id"], {"fields": {"otp": site.sms_codes[-1]}})
    assert wait_for(connection["id"], finished)["flow_status"] == "SUCCESS"
    assert list(site.sessions.values()) == ["erin"]
