"""client.credentials.* through the official SDK, strict validation, against the live server.

Credentials live in a project; most tests work in a project of their own
(`creds`, a client whose requests carry `X-Kernel-Project: <name>`).
"""
import base64
import hashlib
import time

import httpx
import kernel
import pyotp
import pytest
from kernel.types import Credential
from kernel.types.credential_totp_code_response import CredentialTotpCodeResponse

from tests.sdk.conftest import unique

USERNAME, PASSWORD = "ada@example.test", "s3cret-Pa55!"
DIGESTS = {"SHA1": hashlib.sha1, "SHA256": hashlib.sha256, "SHA512": hashlib.sha512}


class SiteTOTP(pyotp.TOTP):
    """pyotp refuses secrets under 112 bits; sites still hand out 80-bit (16 character) ones."""

    def byte_secret(self):
        return base64.b32decode(self.secret + "=" * (-len(self.secret) % 8), casefold=True)


@pytest.fixture
def creds(in_project):
    return in_project


def add_credential(client, *, name=None, domain="example.com", values=None, **params):
    return client.credentials.create(name=name or unique("login"), domain=domain,
                                     values={"username": USERNAME, "password": PASSWORD} if values is None else values,
                                     **params)


def counting_client(make_client, api_key, max_retries=2, **options):
    """A client that retries like the SDK's default, and a list of the requests it sent."""
    sent = []
    http_client = httpx.Client(event_hooks={"request": [lambda request: sent.append(request)]})
    return make_client(api_key, max_retries=max_retries, http_client=http_client, **options), sent


def ids(items):
    return [item.id for item in items]


def assert_current_code(code, expires_at, secret, before, after, *, algorithm="SHA1", digits=6, period=30):
    """`code` is the one `secret` yields in the window ending at `expires_at`, a window that
    was current at some instant between `before` and `after` (the request's start and end)."""
    totp = SiteTOTP(secret, digits=digits, digest=DIGESTS[algorithm], interval=period)
    assert expires_at.tzinfo is not None
    window_start = expires_at.timestamp() - period
    assert window_start == int(window_start) and int(window_start) % period == 0, expires_at
    assert window_start <= after and window_start + period > before, (expires_at, before, after)
    assert len(code) == digits and code.isdigit(), code
    assert code == totp.at(int(window_start))
    # The same code computed from the local clock: the current window or the next.
    assert code in {totp.at(before), totp.at(before + period)}


# --- create / retrieve ----------------------------------------------------------------------------

def test_create_shows_value_keys_but_never_values(creds):
    name = unique("example-login")
    raw = creds.credentials.with_raw_response.create(
        name=name, domain="example.com", values={"username": USERNAME, "password": PASSWORD})
    assert raw.http_response.status_code in (200, 201)
    created = raw.parse()
    assert isinstance(created, Credential)
    assert created.id and created.name == name and created.domain == "example.com"
    assert sorted(created.value_keys) == ["password", "username"]
    assert created.has_values is True and created.has_totp_secret is False
    assert created.sso_provider is None and created.totp_code is None and created.totp_code_expires_at is None
    assert created.updated_at >= created.created_at
    for text in (raw.http_response.text,):
        assert PASSWORD not in text and USERNAME not in text
    assert "values" not in raw.http_response.json()

    for ref in (created.id, name):
        raw = creds.credentials.with_raw_response.retrieve(ref)
        body = raw.http_response.json()
        assert PASSWORD not in raw.http_response.text and USERNAME not in raw.http_response.text
        assert "values" not in body and "totp_secret" not in body
        assert sorted(body["value_keys"]) == ["password", "username"]
        assert raw.parse() == created
    assert creds.credentials.retrieve(name) == created


def test_create_with_every_optional_field(creds):
    secret = pyotp.random_base32()
    before = time.time()
    created = add_credential(creds, sso_provider="google", totp_secret=secret, totp_algorithm="SHA256",
                             totp_digits=8, totp_period=60)
    after = time.time()
    assert created.sso_provider == "google"
    assert created.has_totp_secret is True
    assert (created.totp_algorithm, created.totp_digits, created.totp_period) == ("SHA256", 8, 60)
    assert_current_code(created.totp_code, created.totp_code_expires_at, secret, before, after,
                        algorithm="SHA256", digits=8, period=60)
    # The code is shown only in the response that set the secret.
    fetched = creds.credentials.retrieve(created.id)
    assert fetched.totp_code is None and fetched.totp_code_expires_at is None
    assert (fetched.has_totp_secret, fetched.totp_algorithm, fetched.totp_digits, fetched.totp_period) == (
        True, "SHA256", 8, 60)
    assert secret not in creds.credentials.with_raw_response.retrieve(created.id).http_response.text


def test_create_with_empty_values(creds):
    created = add_credential(creds, values={})
    assert created.has_values is False and created.value_keys == []


def test_a_pasted_url_is_reduced_to_its_host(creds):
    created = add_credential(creds, domain="https://Login.Example.com/path?x=1")
    assert created.domain == "login.example.com"


def test_names_with_spaces_and_unicode_work_in_paths(creds):
    name = unique("Zoë's login #1?")
    created = add_credential(creds, name=name)
    assert creds.credentials.retrieve(name).id == created.id
    assert creds.credentials.update(name, values={"pin": "1"}).id == created.id
    creds.credentials.delete(name)
    with pytest.raises(kernel.NotFoundError):
        creds.credentials.retrieve(created.id)


def test_a_name_with_a_slash_is_refused_because_it_could_not_address_the_credential(creds):
    with pytest.raises(kernel.BadRequestError) as caught:
        add_credential(creds, name=unique("team/github"))
    assert caught.value.body["details"][0]["field"] == "name"
    created = add_credential(creds, name=unique("team"))
    with pytest.raises(kernel.BadRequestError):
        creds.credentials.update(created.id, name="team/renamed")


@pytest.mark.parametrize("params", [
    {"domain": "not a domain"},
    {"domain": ""},
    {"name": "   "},
    {"values": {"username": 3}},
    {"totp_secret": "not base32!"},
    {"totp_secret": "ABCDEFGH"},  # too short
    {"totp_secret": "otpauth://hotp/x?secret=JBSWY3DPEHPK3PXP"},
    {"totp_secret": "JBSWY3DPEHPK3PXP", "totp_digits": 9},
    {"totp_secret": "JBSWY3DPEHPK3PXP", "totp_algorithm": "MD5"},
    {"totp_secret": "JBSWY3DPEHPK3PXP", "totp_period": 0},
], ids=["domain-spaces", "domain-empty", "blank-name", "non-string-value", "secret-not-base32",
        "secret-too-short", "hotp-uri", "digits-9", "algorithm-md5", "period-0"])
def test_invalid_create_is_a_bad_request(creds, params):
    with pytest.raises(kernel.BadRequestError) as caught:
        add_credential(creds, **params)
    assert caught.value.body["code"] == "bad_request"
    assert list(creds.credentials.list()) == []


def test_unknown_credential_is_not_found(creds):
    calls = (creds.credentials.retrieve, creds.credentials.delete, creds.credentials.totp_code,
             lambda ref: creds.credentials.update(ref, name=unique("x")))
    for call in calls:
        with pytest.raises(kernel.NotFoundError):
            call("no-such-credential")


# --- name conflicts -------------------------------------------------------------------------------

def test_duplicate_name_is_a_409_that_must_not_be_retried(sdk, creds, project, live_server, make_client):
    name = unique("taken")
    add_credential(creds, name=name)

    with pytest.raises(kernel.ConflictError) as caught:
        add_credential(creds, name=name, domain="other.example")
    assert caught.value.status_code == 409
    assert caught.value.response.headers.get("x-should-retry") == "false"
    assert caught.value.body["code"] == "credential_name_taken"

    other = add_credential(creds)
    with pytest.raises(kernel.ConflictError) as caught:
        creds.credentials.update(other.id, name=name, values={"extra": "x"})
    assert caught.value.response.headers.get("x-should-retry") == "false"
    unchanged = creds.credentials.retrieve(other.id)
    assert unchanged.name == other.name and sorted(unchanged.value_keys) == ["password", "username"]

    # With the SDK's default retries, the 409 is still sent exactly once.
    client, sent = counting_client(make_client, live_server.api_key, project=project.name)
    with pytest.raises(kernel.ConflictError):
        add_credential(client, name=name)
    assert len(sent) == 1

    # Renaming to its own name is no conflict.
    assert creds.credentials.update(other.id, name=other.name).name == other.name


# --- update ---------------------------------------------------------------------------------------

def test_update_removes_keys_then_merges_values(creds):
    created = add_credential(creds, values={"username": "ada", "password": "old", "pin": "1234"})

    raw = creds.credentials.with_raw_response.update(
        created.id, remove_value_keys=["pin", "password"], values={"password": "new-secret", "email": "ada@x.test"})
    updated = raw.parse()
    assert sorted(updated.value_keys) == ["email", "password", "username"]  # password removed, then re-added
    assert updated.has_values is True
    assert updated.updated_at >= created.updated_at and updated.created_at == created.created_at
    assert "new-secret" not in raw.http_response.text and "values" not in raw.http_response.json()
    assert creds.credentials.retrieve(created.id) == updated

    merged = creds.credentials.update(created.name, values={"username": "grace"})  # overwrite keeps the keys
    assert sorted(merged.value_keys) == ["email", "password", "username"]

    removed = creds.credentials.update(created.id, remove_value_keys=["email", "never-stored"])
    assert sorted(removed.value_keys) == ["password", "username"]

    emptied = creds.credentials.update(created.id, remove_value_keys=["password", "username"])
    assert emptied.value_keys == [] and emptied.has_values is False


def test_update_renames(creds):
    created = add_credential(creds)
    new_name = unique("renamed")
    renamed = creds.credentials.update(created.name, name=new_name)
    assert (renamed.id, renamed.name) == (created.id, new_name)
    assert creds.credentials.retrieve(new_name).id == created.id
    with pytest.raises(kernel.NotFoundError):
        creds.credentials.retrieve(created.name)


def test_update_with_an_empty_body_changes_nothing(creds):
    created = add_credential(creds, sso_provider="github")
    same = creds.credentials.update(created.id)
    assert (same.name, same.domain, same.sso_provider, same.value_keys, same.has_totp_secret) == (
        created.name, created.domain, "github", created.value_keys, False)


def test_sso_provider_is_set_and_cleared_with_null_or_empty(creds):
    created = add_credential(creds, sso_provider="google")
    assert creds.credentials.retrieve(created.id).sso_provider == "google"

    cleared = creds.credentials.update(created.id, sso_provider=None)  # sent as JSON null
    assert cleared.sso_provider is None
    assert creds.credentials.with_raw_response.retrieve(created.id).http_response.json().get("sso_provider") is None

    assert creds.credentials.update(created.id, sso_provider="microsoft").sso_provider == "microsoft"
    assert creds.credentials.update(created.id, sso_provider="").sso_provider is None
    assert creds.credentials.retrieve(created.id).sso_provider is None


def test_setting_a_totp_secret_shows_the_current_code(creds):
    created = add_credential(creds)
    assert created.has_totp_secret is False and created.totp_code is None

    secret = pyotp.random_base32()
    before = time.time()
    updated = creds.credentials.update(created.id, totp_secret=secret)
    after = time.time()
    assert updated.has_totp_secret is True
    assert (updated.totp_algorithm, updated.totp_digits, updated.totp_period) == ("SHA1", 6, 30)
    assert_current_code(updated.totp_code, updated.totp_code_expires_at, secret, before, after)

    # Updates that do not touch the secret do not show a code.
    renamed = creds.credentials.update(created.id, name=unique("renamed"))
    assert renamed.totp_code is None and renamed.totp_code_expires_at is None
    assert renamed.has_totp_secret is True
    body = creds.credentials.with_raw_response.retrieve(created.id).http_response.json()
    assert body.get("totp_code") is None and secret not in str(body)


def test_an_empty_totp_secret_clears_the_secret_and_its_metadata(creds):
    created = add_credential(creds, totp_secret=pyotp.random_base32(), totp_digits=8)
    assert created.has_totp_secret is True

    cleared = creds.credentials.update(created.id, totp_secret="")
    assert cleared.has_totp_secret is False
    assert (cleared.totp_algorithm, cleared.totp_digits, cleared.totp_period) == (None, None, None)
    assert cleared.totp_code is None
    with pytest.raises(kernel.BadRequestError):
        creds.credentials.totp_code(created.id)
    # Clearing again is harmless.
    assert creds.credentials.update(created.id, totp_secret="").has_totp_secret is False


def test_rotating_a_raw_secret_keeps_metadata_and_a_new_uri_resets_it(creds):
    created = add_credential(creds, totp_secret=pyotp.random_base32(), totp_algorithm="SHA512",
                             totp_digits=8, totp_period=45)

    secret = pyotp.random_base32()
    before = time.time()
    rotated = creds.credentials.update(created.id, totp_secret=secret)
    after = time.time()
    assert (rotated.totp_algorithm, rotated.totp_digits, rotated.totp_period) == ("SHA512", 8, 45)
    assert_current_code(rotated.totp_code, rotated.totp_code_expires_at, secret, before, after,
                        algorithm="SHA512", digits=8, period=45)

    uri_secret = pyotp.random_base32()
    reset = creds.credentials.update(created.id, totp_secret=f"otpauth://totp/Example:ada?secret={uri_secret}")
    assert (reset.totp_algorithm, reset.totp_digits, reset.totp_period) == ("SHA1", 6, 30)
    before = time.time()
    code = creds.credentials.totp_code(created.id)
    after = time.time()
    assert_current_code(code.code, code.expires_at, uri_secret, before, after)


def test_otpauth_uri_parameters_win_over_explicit_fields(creds):
    secret = pyotp.random_base32()
    uri = f"otpauth://totp/Example:ada?secret={secret}&issuer=Example&algorithm=SHA256&digits=8&period=60"
    created = add_credential(creds, totp_secret=uri, totp_algorithm="SHA1", totp_digits=6, totp_period=30)
    assert (created.totp_algorithm, created.totp_digits, created.totp_period) == ("SHA256", 8, 60)
    before = time.time()
    code = creds.credentials.totp_code(created.name)
    after = time.time()
    assert_current_code(code.code, code.expires_at, secret, before, after, algorithm="SHA256", digits=8, period=60)


def test_totp_metadata_without_a_secret_is_a_bad_request(creds):
    created = add_credential(creds)
    for params in ({"totp_digits": 8}, {"totp_algorithm": "SHA256"}, {"totp_period": 60}):
        with pytest.raises(kernel.BadRequestError):
            creds.credentials.update(created.id, **params)
    assert creds.credentials.retrieve(created.id).has_totp_secret is False


def test_a_refused_update_changes_nothing(creds):
    created = add_credential(creds, sso_provider="google")
    for params in ({"totp_secret": "not base32!"}, {"name": "  "}, {"totp_secret": pyotp.random_base32(),
                                                                   "totp_digits": 5}):
        with pytest.raises(kernel.BadRequestError):
            creds.credentials.update(created.id, values={"x": "y"}, sso_provider=None, **params)
    assert creds.credentials.retrieve(created.id) == created


# --- totp_code ------------------------------------------------------------------------------------

def test_totp_code_matches_pyotp(creds):
    secret = pyotp.random_base32()
    created = add_credential(creds, totp_secret=secret)
    for ref in (created.id, created.name):
        before = time.time()
        raw = creds.credentials.with_raw_response.totp_code(ref)
        after = time.time()
        assert raw.http_response.status_code == 200
        result = raw.parse()
        assert isinstance(result, CredentialTotpCodeResponse)
        assert len(result.code) == 6 and result.code.isdigit()
        assert_current_code(result.code, result.expires_at, secret, before, after)
        assert raw.http_response.json()["expires_at"].endswith("Z")


def test_totp_code_of_a_short_secret_with_spaces(creds):
    # 16 base32 characters, pasted the way sites display them.
    created = add_credential(creds, totp_secret="jbsw y3dp ehpk 3pxp")
    before = time.time()
    result = creds.credentials.totp_code(created.id)
    after = time.time()
    assert_current_code(result.code, result.expires_at, "JBSWY3DPEHPK3PXP", before, after)


def test_totp_code_without_a_secret_is_a_bad_request(creds):
    created = add_credential(creds)
    with pytest.raises(kernel.BadRequestError) as caught:
        creds.credentials.totp_code(created.id)
    assert caught.value.status_code == 400
    assert caught.value.body["code"] == "bad_request"
    assert "totp" in caught.value.body["message"].lower()


# --- delete ---------------------------------------------------------------------------------------

def test_delete_by_id_or_name(creds):
    by_id = add_credential(creds)
    by_name = add_credential(creds, totp_secret=pyotp.random_base32())
    assert creds.credentials.delete(by_id.id) is None
    assert creds.credentials.delete(by_name.name) is None
    for ref in (by_id.id, by_id.name, by_name.id, by_name.name):
        for call in (creds.credentials.retrieve, creds.credentials.delete, creds.credentials.totp_code):
            with pytest.raises(kernel.NotFoundError):
                call(ref)
    assert list(creds.credentials.list()) == []
    # The name is free again.
    assert add_credential(creds, name=by_id.name).id != by_id.id


# --- list -----------------------------------------------------------------------------------------

def test_list_omits_value_keys(creds):
    created = add_credential(creds, sso_provider="google", totp_secret=pyotp.random_base32())
    raw = creds.credentials.with_raw_response.list()
    body = raw.http_response.json()
    assert isinstance(body, list) and [c["id"] for c in body] == [created.id]
    assert "value_keys" not in body[0] and "values" not in body[0]
    assert "totp_code" not in body[0]
    assert PASSWORD not in raw.http_response.text
    [listed] = raw.parse()
    assert isinstance(listed, Credential)
    assert listed.value_keys is None
    assert (listed.name, listed.domain, listed.has_values, listed.has_totp_secret, listed.sso_provider) == (
        created.name, created.domain, True, True, "google")
    assert (listed.totp_algorithm, listed.totp_digits, listed.totp_period) == ("SHA1", 6, 30)


def test_list_filters_by_domain_and_query(creds):
    login = add_credential(creds, name=unique("work-login"), domain="https://Login.Example.com/path")
    shop = add_credential(creds, name=unique("shop"), domain="shop.example.com")
    other = add_credential(creds, name=unique("other"), domain="other.org")

    assert ids(creds.credentials.list()) == [login.id, shop.id, other.id]
    assert ids(creds.credentials.list(domain="login.example.com")) == [login.id]
    assert ids(creds.credentials.list(domain="LOGIN.example.com")) == [login.id]
    assert ids(creds.credentials.list(domain="example.com")) == []  # exact domain, not a suffix
    assert ids(creds.credentials.list(query="work-login")) == [login.id]  # name substring
    assert ids(creds.credentials.list(query="example.com")) == [login.id, shop.id]  # domain substring
    assert ids(creds.credentials.list(query="other")) == [other.id]
    assert ids(creds.credentials.list(query=shop.id)) == [shop.id]  # exact id
    assert ids(creds.credentials.list(query="nothing-like-this")) == []
    assert ids(creds.credentials.list(domain="shop.example.com", query="work")) == []
    assert ids(creds.credentials.list(domain="shop.example.com", query="shop")) == [shop.id]


def test_list_pages_with_the_auto_pager(creds, live_server, make_client, project):
    created = [add_credential(creds, name=f"c{i}-{unique()}") for i in range(7)]

    raw = creds.credentials.with_raw_response.list(limit=3)
    assert raw.http_response.headers["X-Has-More"] == "true"
    assert raw.http_response.headers["X-Next-Offset"] == "3"
    first = raw.parse()
    assert len(first.items) == 3 and first.has_next_page()
    last = creds.credentials.list(limit=3, offset=6)
    assert ids(last.items) == [created[6].id] and not last.has_next_page()

    client, sent = counting_client(make_client, live_server.api_key, max_retries=0, project=project.name)
    assert ids(client.credentials.list(limit=3)) == ids(created)  # oldest first, across three pages
    assert [dict(request.url.params) for request in sent] == [
        {"limit": "3"}, {"limit": "3", "offset": "3"}, {"limit": "3", "offset": "6"}]
    assert ids(creds.credentials.list(limit=100)) == ids(created)
    assert [len(page.items) for page in creds.credentials.list(limit=3).iter_pages()] == [3, 3, 1]
    assert ids(creds.credentials.list(limit=2, query="c")) == ids(created)  # filters survive paging


# --- projects -------------------------------------------------------------------------------------

def test_credentials_belong_to_their_project(sdk, creds, project):
    name = unique("shared-name")
    created = add_credential(creds, name=name)
    other_project = sdk.projects.create(name=unique("creds-other"))
    other = sdk.with_options(project=other_project.name)

    for client in (other, sdk):  # another project, and the organization's default project
        with pytest.raises(kernel.NotFoundError):
            client.credentials.retrieve(created.id)
        with pytest.raises(kernel.NotFoundError):
            client.credentials.retrieve(name)
        with pytest.raises(kernel.NotFoundError):
            client.credentials.update(created.id, name=unique("stolen"))
        with pytest.raises(kernel.NotFoundError):
            client.credentials.totp_code(created.id)
        with pytest.raises(kernel.NotFoundError):
            client.credentials.delete(created.id)
        assert created.id not in ids(client.credentials.list(query=created.id))

    # The same name is free in another project; by id or by name, each project sees its own.
    twin = add_credential(other, name=name, domain="twin.example")
    assert twin.id != created.id
    assert other.credentials.retrieve(name).id == twin.id
    assert creds.credentials.retrieve(name).id == created.id
    assert ids(other.credentials.list()) == [twin.id]
    assert ids(creds.credentials.list()) == [created.id]
    for options in ({"project_id": project.id}, {"project": project.id}):
        assert ids(sdk.with_options(**options).credentials.list()) == [created.id]


def test_a_project_scoped_key_works_in_its_project(sdk, creds, project, make_client):
    scoped = make_client(sdk.api_keys.create(name=unique("scoped"), project_id=project.id).key)
    created = add_credential(scoped)
    assert ids(creds.credentials.list()) == [created.id]
    assert scoped.credentials.retrieve(created.name) == creds.credentials.retrieve(created.name)
    assert created.id not in ids(sdk.credentials.list(query=created.id))

    other = sdk.projects.create(name=unique("scoped-other"))
    with pytest.raises(kernel.PermissionDeniedError):
        scoped.with_options(project=other.name).credentials.list()


def test_an_unknown_project_header_is_not_found(sdk):
    with pytest.raises(kernel.NotFoundError) as caught:
        sdk.with_options(project_id="no-such-project").credentials.list()
    assert caught.value.body["code"] == "project_not_found"


def test_a_project_with_credentials_is_not_empty(sdk, creds, project):
    created = add_credential(creds)
    with pytest.raises(kernel.ConflictError) as caught:
        sdk.projects.delete(project.id)
    assert caught.value.response.headers.get("x-should-retry") == "false"
    creds.credentials.delete(created.id)
    sdk.projects.delete(project.id)
    with pytest.raises(kernel.NotFoundError):
        sdk.projects.retrieve(project.id)
