"""Managed auth as Kernel's documentation shows it, through the SDK, and the profile it fills used by a real
browser: a partial credential (an email and a TOTP secret) on a login form asking for an email, a password and
then a code (#35 item 6)."""
import uuid

import pytest
from playwright.sync_api import sync_playwright

from tests.browsers.live.test_real_browsers import first_page
from tests.login_site import LoginSite
from tests.waiting import eventually


@pytest.fixture
def login_site():
    server = LoginSite().start()  # on a loopback port the test hosts' sandboxes may reach
    yield server
    server.stop()


def test_an_email_only_credential_logs_in_with_only_the_password_and_the_browser_is_signed_in(sdk, login_site):
    name, profile = f"dana-{uuid.uuid4().hex[:8]}", f"dana-{uuid.uuid4().hex[:8]}"
    sdk.credentials.create(name=name, domain="127.0.0.1", values={"email": "dana@example.test"},
                           totp_secret=login_site.totp_secret)
    auth = sdk.auth.connections.create(domain="127.0.0.1", profile_name=profile, credential={"name": name},
                                       login_url=f"{login_site.url}/login/email")
    sdk.auth.connections.login(auth.id)

    # The documentation's polling loop: only the password is pending, the email and the code come from the store.
    asked, seen = [], []

    def finished():
        state = sdk.auth.connections.retrieve(auth.id)
        seen.append(state)
        if state.flow_step == "AWAITING_INPUT" and state.discovered_fields and state.interaction_id not in asked:
            asked.append(state.interaction_id)
            assert [field.name for field in state.discovered_fields] == ["password"], state
            sdk.auth.connections.submit(auth.id, fields={"password": "dana-password"})
        return state.flow_status not in (None, "IN_PROGRESS")

    assert eventually(finished, 30, interval=0.1), seen[-1]
    assert (seen[-1].flow_status, seen[-1].status) == ("SUCCESS", "AUTHENTICATED"), seen[-1]
    assert len(asked) == 1
    assert ("POST", "/mfa/totp") in login_site.requests

    created = sdk.browsers.create(headless=True, profile={"name": profile})
    try:
        with sync_playwright() as playwright:
            page = first_page(playwright.chromium.connect_over_cdp(created.cdp_ws_url))
            page.goto(f"{login_site.url}/account")
            assert page.locator("main p").first.inner_text() == "Welcome, dana"
    finally:
        sdk.browsers.delete_by_id(created.session_id)


def test_a_script_that_always_sends_the_email_and_the_password_works_beside_an_email_only_credential(
        sdk, login_site):
    """The credential fills the email, but the script's own email wins (a wrong stored address is corrected)."""
    name, profile = f"dana-{uuid.uuid4().hex[:8]}", f"dana-{uuid.uuid4().hex[:8]}"
    sdk.credentials.create(name=name, domain="127.0.0.1", values={"email": "old-address@example.test"},
                           totp_secret=login_site.totp_secret)
    auth = sdk.auth.connections.create(domain="127.0.0.1", profile_name=profile, credential={"name": name},
                                       login_url=f"{login_site.url}/login/email")
    sdk.auth.connections.login(auth.id)

    state = state_when(sdk, auth.id, lambda s: s.flow_step == "AWAITING_INPUT" or s.flow_status != "IN_PROGRESS")
    assert [field.name for field in state.discovered_fields] == ["password"], state
    sdk.auth.connections.submit(auth.id, fields={"email": "dana@example.test", "password": "dana-password"})
    done = state_when(sdk, auth.id, lambda s: s.flow_status != "IN_PROGRESS")
    assert (done.flow_status, done.status) == ("SUCCESS", "AUTHENTICATED"), done
    assert list(login_site.sessions.values()) == ["dana"]


def state_when(sdk, auth_id, reached):
    """The connection once `reached(it)` (within 30 s), else as last seen, for the assertion's message."""
    seen = []

    def check():
        seen.append(sdk.auth.connections.retrieve(auth_id))
        return reached(seen[-1])

    eventually(check, 30, interval=0.1)
    return seen[-1]
