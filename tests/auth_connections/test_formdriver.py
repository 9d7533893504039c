"""The HTTP form login driver against the login site on 127.0.0.1."""
import socket

import pyotp
import pytest

from app.auth_connections.formdriver import FormLogin, LoginError
from tests.login_site import LoginSite


@pytest.fixture
def site():
    server = LoginSite().start()
    yield server
    server.stop()


def driver_for(site, **options):
    return FormLogin(allowed_hosts={"127.0.0.1"}, timeout=5, **options)


def sign_in(site, user, password=None):
    driver = driver_for(site)
    driver.open(site.url + "/login")
    page = driver.submit({"username": user, "password": password or site.users[user]["password"]})
    return driver, page


def test_login_page_fields_and_sso(site):
    driver = driver_for(site)
    page = driver.open(site.url + "/login")
    assert page.kind == "form" and page.url == site.url + "/login" and page.website_error is None
    assert [(f.id, f.name, f.type, f.label, f.required, f.html_type) for f in page.fields] == [
        ("username", "username", "identifier", "Email or username", True, "text"),
        ("password", "password", "password", "Password", True, "password")]
    assert [f.selector for f in page.fields] == ["#username", "#password"]
    assert [(c.id, c.type, c.label, c.mfa_type) for c in page.sso] == [
        ("sso:google", "sso_provider", "Sign in with Google", None)]
    assert page.sso[0].selector == 'a[data-provider="google"]'
    assert driver.open(site.url + "/login") == page  # same page, same ids


def test_open_follows_the_login_link_of_a_home_page(site):
    page = driver_for(site).open(site.url + "/")
    assert page.kind == "form" and page.url == site.url + "/login"


def test_carol_signs_in_without_mfa(site):
    driver, page = sign_in(site, "carol")
    assert page.kind == "success" and page.url == site.url + "/account"
    assert ("POST", "/login") in site.requests
    cookies = {c["name"]: c for c in driver.cookies()}
    assert cookies["sid"]["value"] in site.sessions
    assert cookies["sid"] | {"value": "x"} == {
        "name": "sid", "value": "x", "domain": "127.0.0.1", "path": "/", "expires": -1, "httpOnly": True,
        "secure": False, "sameSite": "Lax"}
    assert driver.check(site.url + "/account").kind == "success"


def test_wrong_password_shows_the_form_again_with_the_site_error(site):
    driver, page = sign_in(site, "carol", "not-it")
    assert page.kind == "form" and [f.id for f in page.fields] == ["username", "password"]
    assert page.website_error == "Incorrect username or password."
    assert driver.submit({"username": "nobody", "password": "x"}).website_error == "Incorrect username or password."
    page = driver.submit({"username": "carol", "password": site.users["carol"]["password"]})
    assert page.kind == "success"


def test_alice_enters_her_authenticator_code(site):
    driver, page = sign_in(site, "alice")
    assert page.kind == "form" and page.url == site.url + "/mfa/totp"
    [code] = page.fields
    assert (code.id, code.type, code.html_type, code.input_mode) == ("otp", "totp_code", "totp", "numeric")
    assert "authenticator app" in code.label
    page = driver.submit({"otp": "000000" if pyotp.TOTP(site.totp_secret).now() != "000000" else "111111"})
    assert page.kind == "form" and page.website_error == "That code is not valid. Try again."
    assert driver.submit({"otp": pyotp.TOTP(site.totp_secret).now()}).kind == "success"
    assert driver.check(site.url + "/account").kind == "success"


def test_bob_chooses_sms(site):
    driver, page = sign_in(site, "bob")
    assert page.kind == "choice" and page.url == site.url + "/mfa/choose" and page.fields == []
    assert [(c.id, c.type, c.label, c.mfa_type, c.description) for c in page.choices] == [
        ("method-sms", "mfa_method", "Text message (SMS) to ***-**42", "sms", "***-**42"),
        ("method-totp", "mfa_method", "Authenticator app", "totp", None)]
    page = driver.choose("method-sms")
    assert page.kind == "form" and page.url == site.url + "/mfa/sms"
    assert [(f.id, f.type, f.html_type) for f in page.fields] == [("otp", "code", "code")]
    assert driver.submit({"otp": site.sms_codes[-1]}).kind == "success"
    assert {c["name"] for c in driver.cookies()} >= {"sid"}


def test_bob_chooses_the_authenticator_app(site):
    driver, _ = sign_in(site, "bob")
    page = driver.choose("method-totp")
    assert page.kind == "form" and [f.type for f in page.fields] == ["totp_code"]
    assert site.sms_codes == []
    assert driver.submit({"otp": pyotp.TOTP(site.totp_secret).now()}).kind == "success"


def test_sso_choice_leads_to_an_external_step(site):
    driver = driver_for(site)
    driver.open(site.url + "/login")
    page = driver.choose("sso:google")
    assert page.kind == "external" and page.url == site.url + "/sso/google"
    assert "identity provider" in page.message and page.fields == [] and page.choices == []


def test_expired_session_fails_the_check(site):
    driver, _ = sign_in(site, "carol")
    site.expire_sessions()
    page = driver.check(site.url + "/account")
    assert page.kind == "form" and page.url == site.url + "/login?next=/account"


def test_cookies_round_trip_into_a_new_driver(site):
    driver, _ = sign_in(site, "carol")
    saved = driver.cookies()
    fresh = driver_for(site)
    assert fresh.check(site.url + "/account").kind == "form"
    fresh.load_cookies(saved)
    assert fresh.cookies() == saved
    assert fresh.check(site.url + "/account").kind == "success"


def test_hosts_outside_the_allowed_ones_are_refused(site):
    with pytest.raises(LoginError) as refused:
        FormLogin(allowed_hosts={"example.com"}).open(site.url + "/login")
    assert refused.value.code == "host_not_allowed" and "127.0.0.1" in str(refused.value)
    driver = FormLogin(allowed_hosts={"*.127.0.0.1", "example.com"})  # normalized: "127.0.0.1"
    assert driver.open(site.url + "/login").kind == "form"
    assert FormLogin()._allowed("anything.test")
    assert FormLogin(allowed_hosts={"example.com"})._allowed("login.example.com")
    assert not FormLogin(allowed_hosts={"example.com"})._allowed("badexample.com")


def test_a_redirect_to_another_host_is_refused(site):
    site.routes[("GET", "/elsewhere")] = lambda req: (302, "", [("Location", "http://evil.test/login")])
    with pytest.raises(LoginError) as refused:
        driver_for(site).open(site.url + "/elsewhere")
    assert refused.value.code == "host_not_allowed"


def test_redirect_loops_stop(site):
    site.routes[("GET", "/loop")] = lambda req: (302, "", [("Location", "/loop")])
    with pytest.raises(LoginError) as looped:
        driver_for(site, max_redirects=3).open(site.url + "/loop")
    assert looped.value.code == "too_many_redirects"
    assert site.requests.count(("GET", "/loop")) == 4


def test_unreachable_site():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(LoginError) as failed:
        FormLogin(timeout=2).open(f"http://127.0.0.1:{port}/login")
    assert failed.value.code == "unreachable"


def test_values_never_appear_in_errors(site):
    driver = driver_for(site)
    driver.open(site.url + "/login")
    with pytest.raises(LoginError) as missing:
        driver.submit({"username": "carol-secret-name"})
    assert missing.value.code == "missing_fields" and "password" in str(missing.value)
    assert "carol-secret-name" not in str(missing.value)
    with pytest.raises(LoginError) as unknown:
        driver.choose("method-sms")
    assert unknown.value.code == "unknown_choice"


def test_submit_needs_a_form(site):
    driver, _ = sign_in(site, "bob")
    with pytest.raises(LoginError) as refused:
        driver.submit({"otp": "123456"})
    assert refused.value.code == "invalid_state"


def serve(site, path, body, status=200):
    """Add a page to the site; returns its URL."""
    site.routes[("GET", path)] = lambda req: (status, f"<html><body>{body}</body></html>", [])
    return site.url + path


def test_identifier_first_step_and_radio_methods(site):
    driver = driver_for(site)
    page = driver.open(serve(site, "/step1", """<form method="get" action="/step2">
        <input type="hidden" name="state" value="s1"><label for="e">Email address</label>
        <input id="e" name="email" type="email"><input type="submit" value="Next"></form>"""))
    assert [(f.id, f.type, f.html_type, f.input_mode) for f in page.fields] == [
        ("email", "identifier", "email", "email")]
    radios = """<p>Choose how to get your verification code</p><form method="post" action="/send">
        <label><input type="radio" name="via" value="email" checked> Email to j***@example.com</label>
        <label><input type="radio" name="via" value="call"> Call ***-**42</label>
        <button>Continue</button> <button type="submit" name="cancel" value="1">Cancel</button></form>"""
    serve(site, "/step2", radios)
    page = driver.submit({"email": "someone@example.com"})
    assert site.requests[-1] == ("GET", "/step2?state=s1&email=someone%40example.com")
    assert page.kind == "choice"
    assert [(c.id, c.mfa_type, c.description) for c in page.choices] == [
        ("via-email", "email", "j***@example.com"), ("via-call", "call", "***-**42")]
    posted = []
    site.routes[("POST", "/send")] = lambda req: posted.append(req.form) or (302, "", [("Location", "/mfa/totp")])
    assert driver.choose("via-call").kind == "form"  # /mfa/totp without an MFA under way: the login form
    assert posted == [{"via": "call"}]


def test_no_form_sends_a_password_in_its_url(site):
    """Neither a stored password (never_in_url) nor one typed into a password input earlier in the same login."""
    next_step = '<form method="get" action="/next"><label>Email <input name="password"></label><button>Next</button>'
    driver = driver_for(site, never_in_url=["stored-secret"])
    driver.open(serve(site, "/step", next_step + "</form>"))
    with pytest.raises(LoginError) as refused:
        driver.submit({"password": "my stored-secret"})
    assert refused.value.code == "password_in_url"

    driver = driver_for(site)
    site.routes[("POST", "/first")] = lambda req: (200, f"<html><body>{next_step}</form></body></html>", [])
    driver.open(serve(site, "/first", '<form method="post" action="/first"><input name="user">'
                                      '<input name="pass" type="password"><button>Next</button></form>'))
    assert driver.submit({"user": "dana", "pass": "typed-secret"}).url == site.url + "/first"
    with pytest.raises(LoginError) as refused:
        driver.submit({"password": "typed-secret"})
    assert refused.value.code == "password_in_url"
    assert not any(path.startswith("/next") for path in site.paths)
    assert driver.submit({"password": "dana@example.test"}).url == site.url + "/next?password=dana%40example.test"


def test_hidden_inputs_search_boxes_and_own_form_sso_buttons(site):
    page = driver_for(site).open(serve(site, "/mixed", """
        <form action="/search"><input name="q" placeholder="Search"></form>
        <form method="post" action="/sso"><button name="provider" value="ms">Continue with Microsoft</button></form>
        <form method="post" action="/login"><div style="display:none"><input name="trap" type="text"></div>
        <input name="user" autocomplete="username"><input name="pass" type="password">
        <button>Log in</button></form>"""))
    assert page.kind == "form" and [f.id for f in page.fields] == ["user", "pass"]
    assert [(c.id, c.label, c.selector) for c in page.sso] == [
        ("sso:microsoft", "Continue with Microsoft", 'button[name="provider"][value="ms"]')]
    assert driver_for(site).check(serve(site, "/home", '<form action="/s"><input name="q"></form>')).kind == "success"


def test_pages_without_a_login_form(site):
    driver = driver_for(site)
    assert driver.open(serve(site, "/nothing", "<p>Hello</p>")).kind == "error"
    page = driver.check(serve(site, "/locked", '<p class="error-text">Your account is locked.</p>'))
    assert (page.kind, page.website_error, page.message) == ("error", "Your account is locked.",
                                                             "Your account is locked.")
    page = driver.check(serve(site, "/gone", "<h1>Oops</h1>", status=500))
    assert (page.kind, page.status, page.message) == ("error", 500, "The site answered HTTP 500.")
    page = driver.check(serve(site, "/push", "<h1>Check your phone</h1><p>Approve the sign-in request.</p>"))
    assert (page.kind, page.message) == ("external", "Check your phone: Approve the sign-in request.")
    page = driver.open(serve(site, "/only-sso", '<a href="/sso/google">Continue with Google</a>'))
    assert page.kind == "choice" and [c.id for c in page.choices] == ["sso:google"]
    assert driver.choose("sso:google").kind == "external"
