"""The rule that matches a credential's values, a submit's keys and a login form's fields by meaning."""
import pytest

from app.auth_connections.formdriver import FieldSpec, FormLogin
from app.auth_connections.meanings import (
    CODE,
    EMAIL,
    PASSWORD,
    PHONE,
    USERNAME,
    CredentialValues,
    field_for_key,
    identifier_kinds,
    key_meaning,
    words,
)


def identifier(accepts=(USERNAME, EMAIL, PHONE), name="login", label="Login"):
    return FieldSpec(id=name, name=name, type="identifier", label=label, accepts=accepts)


PASSWORD_FIELD = FieldSpec(id="pass", name="pass", type="password", label="Password")
CODE_FIELD = FieldSpec(id="otp", name="otp", type="totp_code", label="Code from your authenticator app")


@pytest.mark.parametrize(("html_type", "autocomplete", "name", "label", "kinds"), [
    ("email", None, "username", "", (EMAIL,)),  # the browser would take nothing but an address
    ("text", "section-login email", "", "", (EMAIL,)),
    ("tel", None, "", "", (PHONE,)),
    ("text", "username", "username", "Email or username", (USERNAME, EMAIL)),
    ("text", "username", "userLoginId", "Email or mobile number", (EMAIL, PHONE)),
    ("text", None, "user_name", "Username", (USERNAME,)),
    ("text", "username", "login", "Login", (USERNAME, EMAIL, PHONE)),  # names no kind: any
    ("text", None, "j_id_4", "", (USERNAME, EMAIL, PHONE)),
    # A general word a person reads adds a username, after the kinds named (an email first when both are stored).
    ("text", None, "id", "Email or login", (EMAIL, USERNAME)),
    ("text", None, "id", "Email or member ID", (EMAIL, USERNAME)),
    ("text", None, "id", "Email address or login name", (EMAIL, USERNAME)),
    ("text", None, "id", "Customer number or mobile", (PHONE, USERNAME)),
    # ... not one that qualifies the kind, nor an input's name.
    ("text", None, "id", "Login email", (EMAIL,)),
    ("text", None, "id", "Account email or phone", (EMAIL, PHONE)),
    ("text", None, "loginEmail", "Email", (EMAIL,)),
])
def test_what_an_identifier_field_takes(html_type, autocomplete, name, label, kinds):
    assert identifier_kinds(html_type, autocomplete, words(name), words(label)) == kinds


@pytest.mark.parametrize(("key", "meaning"), [
    ("email", EMAIL), ("E-mail", EMAIL), ("emailAddress", EMAIL), ("email_address", EMAIL),
    ("username", USERNAME), ("user_name", USERNAME), ("userId", USERNAME), ("login", USERNAME),
    ("phone_number", PHONE), ("password", PASSWORD), ("pwd", PASSWORD), ("Password", PASSWORD),
    ("otp", CODE), ("mfa_code", CODE), ("one-time code", CODE), ("totp", CODE),
    ("company_id", None), ("remember", None), ("account", None), ("account_id", None), ("accountNumber", None),
])
def test_what_a_key_means(key, meaning):
    assert key_meaning(key) == meaning


def test_an_email_and_a_totp_secret_fill_all_but_the_password():
    stored = CredentialValues({"email": "dana@example.test"}, one_time_code=lambda: "123456")
    assert stored.fill([identifier(accepts=(EMAIL,)), PASSWORD_FIELD]) == {"login": "dana@example.test"}
    assert stored.fill([CODE_FIELD]) == {"otp": "123456"}
    assert CredentialValues({"email": "dana@example.test"}).fill([CODE_FIELD]) == {}  # no secret, no code


def test_a_username_fills_an_email_field_only_when_it_is_an_address():
    email_field = identifier(accepts=(EMAIL,))
    assert CredentialValues({"username": "dana@example.test"}).fill([email_field]) == {"login": "dana@example.test"}
    assert CredentialValues({"username": "dana"}).fill([email_field]) == {}
    assert CredentialValues({"login": "dana@example.test"}).fill([email_field]) == {"login": "dana@example.test"}
    # An address stored as the email wins over a username that is one too.
    both = CredentialValues({"username": "old@example.test", "email": "dana@example.test"})
    assert both.fill([email_field]) == {"login": "dana@example.test"}


def test_an_email_never_fills_a_field_asking_for_a_username_only():
    assert CredentialValues({"email": "dana@example.test"}).fill([identifier(accepts=(USERNAME,))]) == {}


def test_a_field_taking_either_gets_the_username_first():
    field = identifier(accepts=(USERNAME, EMAIL))
    assert CredentialValues({"email": "dana@example.test", "username": "dana"}).fill([field]) == {"login": "dana"}
    assert CredentialValues({"email": "dana@example.test"}).fill([field]) == {"login": "dana@example.test"}
    assert CredentialValues({"phone": "+15550100"}).fill([field]) == {}


def test_other_values_fill_the_field_of_their_name_and_a_name_wins_over_a_meaning_that_fits():
    company = FieldSpec(id="companyId", name="companyId", type="text", label="Company")
    labelled = FieldSpec(id="field-3", name="", type="text", label="Company ID")
    assert CredentialValues({"company_id": "42"}).fill([company, labelled]) == {"companyId": "42", "field-3": "42"}
    named = identifier(accepts=(EMAIL,), name="login")
    both = {"login": "old@example.test", "email": "dana@example.test"}
    assert CredentialValues(both).fill([named]) == {"login": "old@example.test"}
    # A username is no address: the field's name does not make it one.
    assert CredentialValues({"login": "dana", "email": "dana@example.test"}).fill([named]) == {
        "login": "dana@example.test"}
    assert CredentialValues({"email": "", "password": "pw"}).fill([identifier(), PASSWORD_FIELD]) == {"pass": "pw"}


@pytest.mark.parametrize("field", [
    FieldSpec(id="password", name="password", type="text", label="Display name, shown on your public profile"),
    FieldSpec(id="field-2", name="", type="text", label="Password"),
    identifier(name="password", label="Email"),
    FieldSpec(id="password", name="password", type="code", label="Code"),
])
def test_a_password_goes_only_into_a_password_input_whatever_the_field_is_named(field):
    assert CredentialValues({"password": "pw"}).fill([field]) == {}
    assert CredentialValues({"password": "pw", "email": "dana@example.test"}).fill([field]).get(field.id) != "pw"


def test_a_stored_code_goes_only_into_a_code_field():
    named_otp = FieldSpec(id="otp", name="otp", type="text", label="Nickname")
    assert CredentialValues({"otp": "123456"}).fill([named_otp]) == {}
    assert CredentialValues({"otp": "123456"}).fill([CODE_FIELD]) == {"otp": "123456"}


def test_a_username_that_is_a_phone_number_fills_a_phone_field():
    tel = identifier(accepts=(PHONE,), name="phone")
    assert CredentialValues({"username": "+1 (555) 010-0100"}).fill([tel]) == {"phone": "+1 (555) 010-0100"}
    assert CredentialValues({"username": "dana"}).fill([tel]) == {}
    assert CredentialValues({"username": "+15550100", "mobile": "+15550199"}).fill([tel]) == {"phone": "+15550199"}
    email_or_mobile = identifier(accepts=(EMAIL, PHONE), name="id")
    assert CredentialValues({"username": "+15550100"}).fill([email_or_mobile]) == {"id": "+15550100"}


@pytest.mark.parametrize("values", [
    {"account": "12345", "handle": "@dana", "login": "dana-login", "username": "dana"},
    {"username": "dana", "login": "dana-login", "handle": "@dana", "account": "12345"},
])
def test_the_most_specific_key_is_the_username_whatever_the_order(values):
    values = dict(values)
    username = identifier(accepts=(USERNAME,), name="who", label="Username")
    assert CredentialValues(values).fill([username]) == {"who": "dana"}
    del values["username"]
    assert CredentialValues(values).fill([username]) == {"who": "dana-login"}
    del values["login"]
    assert CredentialValues(values).fill([username]) == {"who": "@dana"}
    assert CredentialValues({"account": "12345"}).fill([username]) == {}
    account = FieldSpec(id="account", name="account", type="text", label="Account number")
    assert CredentialValues({"account": "12345"}).fill([account]) == {"account": "12345"}


def test_a_code_the_site_sent_is_not_answered_from_the_authenticator():
    sent = FieldSpec(id="otp", name="otp", type="code", label="Verification code", sent_by_site=True)
    unknown = FieldSpec(id="otp", name="otp", type="code", label="Verification code")
    assert CredentialValues({}, one_time_code=lambda: "123456").fill([sent]) == {}
    # A code field that says nothing of where its code comes from may be the authenticator's.
    assert CredentialValues({}, one_time_code=lambda: "123456").fill([unknown]) == {"otp": "123456"}


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


@pytest.mark.parametrize(("user", "code_type", "sent_by_site"), [("erin", "code", True), ("alice", "totp_code", False)])
def test_the_driver_says_which_code_the_site_sent(site, user, code_type, sent_by_site):
    driver = FormLogin(allowed_hosts={"127.0.0.1"}, timeout=5)
    driver.open(site.url + "/login")
    [code] = driver.submit({"username": user, "password": site.users[user]["password"]}).fields
    assert (code.type, code.sent_by_site) == (code_type, sent_by_site)
