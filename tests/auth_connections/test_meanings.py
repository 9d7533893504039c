"""The rule that matches a credential's values, a submit's keys and a login form's fields by meaning."""
import pytest

from app.auth_connections.formdriver import FieldSpec, FormLogin
from app.auth_connections.meanings import (
    CODE,
    EMAIL,
    PASSWORD,
    PHONE,
    USERNAME,
    Stored,
    field_for_key,
    identifier_kinds,
    key_meaning,
    words,
)


def identifier(accepts=(USERNAME, EMAIL, PHONE), name="login", label="Login"):
    return FieldSpec(id=name, name=name, type="identifier", label=label, accepts=accepts)


PASSWORD_FIELD = FieldSpec(id="pass", name="pass", type="password", label="Password")
CODE_FIELD = FieldSpec(id="otp", name="otp", type="totp_code", label="Code from your authenticator app")


@pytest.mark.parametrize(("html_type", "autocomplete", "hints", "kinds"), [
    ("email", None, "username", (EMAIL,)),  # the browser would take nothing but an address
    ("text", "section-login email", "", (EMAIL,)),
    ("tel", None, "", (PHONE,)),
    ("text", "username", "username Email or username", (USERNAME, EMAIL)),
    ("text", "username", "userLoginId Email or mobile number", (EMAIL, PHONE)),
    ("text", None, "user_name Username", (USERNAME,)),
    ("text", "username", "login Login", (USERNAME, EMAIL, PHONE)),  # names no kind: any
    ("text", None, "j_id_4", (USERNAME, EMAIL, PHONE)),
])
def test_what_an_identifier_field_takes(html_type, autocomplete, hints, kinds):
    assert identifier_kinds(html_type, autocomplete, words(hints)) == kinds


@pytest.mark.parametrize(("key", "meaning"), [
    ("email", EMAIL), ("E-mail", EMAIL), ("emailAddress", EMAIL), ("email_address", EMAIL),
    ("username", USERNAME), ("user_name", USERNAME), ("userId", USERNAME), ("login", USERNAME),
    ("phone_number", PHONE), ("password", PASSWORD), ("pwd", PASSWORD), ("Password", PASSWORD),
    ("otp", CODE), ("mfa_code", CODE), ("one-time code", CODE), ("totp", CODE),
    ("company_id", None), ("remember", None),
])
def test_what_a_key_means(key, meaning):
    assert key_meaning(key) == meaning


def test_an_email_and_a_totp_secret_fill_all_but_the_password():
    stored = Stored({"email": "dana@example.test"}, one_time_code=lambda: "123456")
    assert stored.fill([identifier(accepts=(EMAIL,)), PASSWORD_FIELD]) == {"login": "dana@example.test"}
    assert stored.fill([CODE_FIELD]) == {"otp": "123456"}
    assert Stored({"email": "dana@example.test"}).fill([CODE_FIELD]) == {}  # no secret, no code


def test_a_username_fills_an_email_field_only_when_it_is_an_address():
    email_field = identifier(accepts=(EMAIL,))
    assert Stored({"username": "dana@example.test"}).fill([email_field]) == {"login": "dana@example.test"}
    assert Stored({"username": "dana"}).fill([email_field]) == {}
    assert Stored({"login": "dana@example.test"}).fill([email_field]) == {"login": "dana@example.test"}
    # An address stored as the email wins over a username that is one too.
    both = Stored({"username": "old@example.test", "email": "dana@example.test"})
    assert both.fill([email_field]) == {"login": "dana@example.test"}


def test_an_email_never_fills_a_field_asking_for_a_username_only():
    assert Stored({"email": "dana@example.test"}).fill([identifier(accepts=(USERNAME,))]) == {}


def test_a_field_taking_either_gets_the_username_first():
    field = identifier(accepts=(USERNAME, EMAIL))
    assert Stored({"email": "dana@example.test", "username": "dana"}).fill([field]) == {"login": "dana"}
    assert Stored({"email": "dana@example.test"}).fill([field]) == {"login": "dana@example.test"}
    assert Stored({"phone": "+15550100"}).fill([field]) == {}


def test_other_values_fill_the_field_of_their_name_and_a_name_wins_over_a_meaning():
    company = FieldSpec(id="companyId", name="companyId", type="text", label="Company")
    labelled = FieldSpec(id="field-3", name="", type="text", label="Company ID")
    assert Stored({"company_id": "42"}).fill([company, labelled]) == {"companyId": "42", "field-3": "42"}
    named = identifier(accepts=(EMAIL,), name="login")
    assert Stored({"login": "dana", "email": "dana@example.test"}).fill([named]) == {"login": "dana"}
    assert Stored({"email": "", "password": "pw"}).fill([identifier(), PASSWORD_FIELD]) == {"pass": "pw"}


def test_a_submitted_key_finds_its_field_by_id_name_or_meaning():
    fields = [{"id": "login-2", "ref": "login", "type": "identifier"},
              {"id": "pass", "ref": "pass", "type": "password"}]
    assert [field_for_key(key, fields) for key in ("login-2", "login", "email", "username", "password", "pwd",
                                                   "otp", "company")] == [
        "login-2", "login-2", "login-2", "login-2", "pass", "pass", None, None]
    assert field_for_key("code", [{"id": "otp", "ref": "otp", "type": "totp_code"}]) == "otp"
    two = [{"id": "a", "ref": "a", "type": "text"}, {"id": "b", "ref": "b", "type": "text"}]
    assert field_for_key("email", two) is None


def test_the_driver_says_what_the_test_site_fields_take(site):
    driver = FormLogin(allowed_hosts={"127.0.0.1"}, timeout=5)
    assert [f.accepts for f in driver.open(site.url + "/login").fields] == [(USERNAME, EMAIL), ()]
    assert [f.accepts for f in driver.open(site.url + "/login/email").fields] == [(EMAIL,), ()]
