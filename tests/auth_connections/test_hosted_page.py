"""A person signs in through the hosted login page, in real headless Chromium, against the live server.

The server is gunicorn + gevent on a private database (tests/live_server.py), as in production;
the website is tests/login_site.py. The test starts a login through the API, opens the
hosted_url in Chromium (tests/chromium.py, over the DevTools protocol), and does what a
person does: finds each field by its label, clicks into it and types, clicks the buttons.
The outcome is then read through the API: the connection is AUTHENTICATED and the
profile holds the website's session cookie.
"""
import json
import uuid
from urllib.parse import parse_qsl, urlencode, urlsplit

import httpx
import pyotp
import pytest

from tests.chromium import Browser, CdpError, find_chromium
from tests.live_server import serve_with_organization

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium: neither $CHROMIUM nor any of chromium, chromium-browser, google-chrome "
                             "is on PATH (`make install-test` as root on Debian installs the chromium package)")

SIGNED_IN = "You are signed in"

class FormRefused(AssertionError):
    """The browser's own form validation kept Continue from sending the answer."""


class PageRequestFailed(AssertionError):
    """One of the page's own requests (/state, /events, /submit) was answered with an error."""


def check_page_requests(page):
    """Fail at once, rather than wait for what cannot come, when the page's own requests were refused."""
    failed = [f"{r.get('method')} {urlsplit(r['url']).path} -> {r.get('status', r.get('failed'))}"
              for r in page.requests.values()
              if r.get("type") != "Document" and "/auth/hosted/" in r.get("url", "")
              # (An events stream the page closes once the flow ends counts as failed, after its 200.)
              and (r.get("status", 200) >= 400 or ("failed" in r and "status" not in r))]
    if failed:
        raise PageRequestFailed(f"the page's requests failed: {failed}; {page.diagnosis()}")


@pytest.fixture(scope="module")
def lantern(tmp_path_factory):
    """The real server (gunicorn + gevent, one worker) on a private database, and an organization's owner key."""
    with serve_with_organization(tmp_path_factory.mktemp("hosted_page_server"), "Hosted page") as served:
        yield served


@pytest.fixture(scope="module")
def api(lantern):
    with httpx.Client(base_url=lantern.base_url, headers={"Authorization": f"Bearer {lantern.api_key}"},
                      timeout=15) as client:
        yield client


@pytest.fixture(scope="module")
def browser():
    with Browser(CHROMIUM) as chromium:
        yield chromium


@pytest.fixture
def page(browser):
    tab = browser.new_page()
    yield tab
    tab.close()


def start_login(api, site):
    """A new connection to the test website (a profile of its own) and its login started: (connection, hosted_url)."""
    response = api.post("/auth/connections", json={
        "domain": "127.0.0.1", "profile_name": f"person-{uuid.uuid4().hex[:8]}", "login_url": f"{site.url}/login"})
    assert response.status_code == 201, response.text
    connection = response.json()
    login = api.post(f"/auth/connections/{connection['id']}/login", json={})
    assert login.status_code == 200, login.text
    hosted_url = login.json()["hosted_url"]
    # The host comes from the API request's Host header: the server Chromium can reach.
    assert hosted_url.startswith(f"{str(api.base_url).rstrip('/')}/auth/hosted/"), hosted_url
    return connection, hosted_url


# What the page shows a person: the visible fields (label, name, type, value, validity) and buttons.
SHOWN = """(() => {
  const visible = (e) => e.checkVisibility();
  const form = document.getElementById("fields");
  const fields = form ? [...form.querySelectorAll("input")].filter(visible).map((i) => ({
    label: i.labels[0] ? i.labels[0].textContent : "", name: i.name, type: i.type, value: i.value,
    invalid: i.value !== "" && !i.checkValidity(), message: i.validationMessage})) : [];
  const buttons = [...document.querySelectorAll("button")].filter(visible).map((b) => b.textContent);
  const status = document.getElementById("status");
  const error = document.getElementById("error");
  return {fields, buttons, status: status ? status.textContent : "",
          error: error && !error.hidden ? error.textContent : ""};
})()"""


def shown(page):
    return page.evaluate(SHOWN)


def last_state(page):
    """The newest flow state the page's events stream delivered (None before the first)."""
    states = [json.loads(data) for data in page.sse_messages]
    states = [s for s in states if s.get("event") == "managed_auth_state"]
    return states[-1] if states else None


def wait_for_fields(page, labels, timeout=15.0):
    """Wait until the page shows exactly the fields labelled `labels` and the events stream has delivered
    that prompt (the page renders each state it receives: typing before that could be wiped out);
    {label: CSS selector of its input}."""
    def ready():
        check_page_requests(page)
        now, state = shown(page), last_state(page)
        if sorted(f["label"] for f in now["fields"]) != sorted(labels) or not state:
            return None
        if sorted(f["id"] for f in state.get("fields", [])) != sorted(f["name"] for f in now["fields"]):
            return None
        return {f["label"]: f'#fields input[name="{f["name"]}"]' for f in now["fields"]}
    return page.wait_for_value(ready, what=f"the fields {labels}", timeout=timeout)


def wait_for_button(page, label, timeout=15.0):
    """Wait until the page shows a choice button labelled `label`; its CSS selector."""
    def ready():
        check_page_requests(page)
        found = page.evaluate(f"""[...document.querySelectorAll("#choices button[data-choice]")]
            .filter((b) => b.checkVisibility() && b.textContent === {json.dumps(label)})
            .map((b) => b.dataset.choice)""")
        return f'#choices button[data-choice="{found[0]}"]' if found else None
    return page.wait_for_value(ready, what=f"the button {label!r}", timeout=timeout)


def fill_in(page, values):
    """Type each value into the field with that label, as a person does; then check the fields hold them."""
    selectors = wait_for_fields(page, list(values))
    for label, value in values.items():
        page.type(selectors[label], value)
    typed = {f["label"]: f["value"] for f in shown(page)["fields"]}
    assert typed == values, f"the fields lost what was typed; {page.diagnosis()}"


def press_continue(page):
    """Click Continue; fail at once, with the browser's message, if the browser refuses the form."""
    submits = sum(1 for r in page.requests.values() if r.get("method") == "POST" and "/submit" in r.get("url", ""))
    page.click("#fields button[type=submit]")

    def sent():
        check_page_requests(page)
        refused = [(f["label"], f["type"], f["message"]) for f in shown(page)["fields"] if f["invalid"]]
        if refused:
            raise FormRefused(f"the browser refused the form: {refused}; {page.diagnosis()}")
        done = [r for r in page.requests.values() if r.get("method") == "POST" and "/submit" in r.get("url", "")]
        return len(done) > submits and all("status" in r or "failed" in r for r in done)
    page.wait_for_value(sent, what="the answer to be sent")
    answers = [r for r in page.requests.values() if r.get("method") == "POST" and "/submit" in r.get("url", "")]
    assert answers[-1].get("status") == 200, f"/submit answered {answers[-1]}; {page.diagnosis()}"


def assert_signed_in(api, site, page, connection, user):
    """The page said so, nothing went wrong in it, and the API agrees: authenticated, the cookie kept."""
    page.wait_for_value(lambda: check_page_requests(page) or SIGNED_IN in page.evaluate("document.body.innerText"),
                        what=repr(SIGNED_IN))
    # (The browser's own GET /favicon.ico is answered 401 like any unauthenticated API path: not the page's.)
    errors = [c for c in page.console if c.startswith("error") and "/favicon.ico" not in c]
    assert page.exceptions == [] and errors == [], page.diagnosis()
    record = api.get(f"/auth/connections/{connection['id']}").json()
    assert (record["status"], record["flow_status"], record["flow_step"]) == ("AUTHENTICATED", "SUCCESS",
                                                                             "COMPLETED"), record
    download = api.get(f"/profiles/{connection['profile_name']}/download")
    assert download.status_code == 200, download.text
    cookies = {c["name"]: c for c in download.json()["cookies"]}
    assert "sid" in cookies, cookies
    assert cookies["sid"]["domain"] == "127.0.0.1"
    assert site.sessions.get(cookies["sid"]["value"]) == user


def sign_in_with_totp(api, site, page, username):
    connection, hosted_url = start_login(api, site)
    page.navigate(hosted_url)
    fill_in(page, {"Email or username": username, "Password": site.users[username]["password"]})
    press_continue(page)
    fill_in(page, {"Code from your authenticator app": pyotp.TOTP(site.totp_secret).now()})
    press_continue(page)
    assert_signed_in(api, site, page, connection, username)


def test_a_person_signs_in_with_a_username_and_an_authenticator_code(api, site, page):
    sign_in_with_totp(api, site, page, "alice")


def test_a_person_signs_in_with_an_email_address_and_an_authenticator_code(api, site, page):
    site.users["alice@example.test"] = site.users["alice"]
    sign_in_with_totp(api, site, page, "alice@example.test")


def test_a_person_picks_the_authenticator_app_then_types_its_code(api, site, page):
    site.users["bob@example.test"] = site.users["bob"]
    connection, hosted_url = start_login(api, site)
    page.navigate(hosted_url)
    fill_in(page, {"Email or username": "bob@example.test", "Password": "bob-password"})
    press_continue(page)
    page.click(wait_for_button(page, "Authenticator app"))
    fill_in(page, {"Code from your authenticator app": pyotp.TOTP(site.totp_secret).now()})
    press_continue(page)
    assert_signed_in(api, site, page, connection, "bob@example.test")
    assert site.sms_codes == []  # no text message was asked for


def test_a_wrong_code_opens_no_page(api, site, page):
    _, hosted_url = start_login(api, site)
    parts = urlsplit(hosted_url)
    code = dict(parse_qsl(parts.query))["code"]
    wrong_code = ("y" if code[0] == "x" else "x") + code[1:]  # one character off
    wrong = parts._replace(query=urlencode({"code": wrong_code})).geturl()
    page.navigate(wrong)
    page.wait_for("document.readyState === 'complete'", what="the answer to load")
    documents = [r for r in page.requests.values() if r.get("type") == "Document"]
    assert [(r["url"], r.get("status")) for r in documents] == [(wrong, 404)], page.diagnosis()
    assert page.evaluate("document.getElementById('fields')") is None  # no sign-in form
    assert json.loads(page.evaluate("document.body.innerText"))["code"] == "login_page_not_found"
    with pytest.raises(CdpError):  # nothing to type into
        page.center_of("input")


def test_with_an_email_only_credential_a_person_types_only_the_password(api, site, page):
    """The credential fills the email and the authenticator code (#35 item 6); after a wrong password the
    page asks again, the stored email shown optional, and the password alone still signs in."""
    name = f"dana-{uuid.uuid4().hex[:8]}"
    created = api.post("/credentials", json={"name": name, "domain": "127.0.0.1", "totp_secret": site.totp_secret,
                                             "values": {"email": "dana@example.test"}})
    assert created.status_code == 201, created.text
    connection = api.post("/auth/connections", json={
        "domain": "127.0.0.1", "profile_name": f"person-{uuid.uuid4().hex[:8]}",
        "login_url": f"{site.url}/login/email", "credential": {"name": name}}).json()
    login = api.post(f"/auth/connections/{connection['id']}/login", json={})
    assert login.status_code == 200, login.text
    page.navigate(login.json()["hosted_url"])
    fill_in(page, {"Password": "not-dana-password"})
    press_continue(page)

    selectors = wait_for_fields(page, ["Email address", "Password"])
    now = shown(page)
    assert now["error"] == "Incorrect email address or password."
    assert page.evaluate(f"document.querySelector({json.dumps(selectors['Email address'])}).required") is False
    assert "stored credential" in page.evaluate("document.getElementById('fields').innerText")
    page.type(selectors["Password"], "dana-password")
    press_continue(page)
    assert_signed_in(api, site, page, connection, "dana")
    assert ("POST", "/mfa/totp") in site.requests  # the code came from the credential
