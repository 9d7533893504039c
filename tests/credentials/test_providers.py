"""Credential providers against a 1Password Connect look-alike on 127.0.0.1."""
import logging

import pytest

from app.core import clock, settings
from app.core.db import db
from app.credentials import providers
from app.credentials.models import CredentialProvider
from tests.conftest import client_for, scoped_client


@pytest.fixture
def provider(client, connect):
    def make(**fields):
        body = {"name": "1p", "provider_type": "onepassword", "token": connect.token, "url": connect.url, **fields}
        response = client.post("/org/credential_providers", json=body)
        assert response.status_code == 201, response.get_json()
        return response.get_json()
    return make


def test_create_get_list_update_delete(client, provider, connect):
    created = provider(name="  Team vault  ")
    assert created["name"] == "Team vault"
    assert (created["enabled"], created["priority"], created["provider_type"]) == (True, 0, "onepassword")
    assert "token" not in created and connect.token not in str(created)
    assert client.get(f"/org/credential_providers/{created['id']}").get_json() == created
    assert [p["id"] for p in client.get("/org/credential_providers?query=TEAM").get_json()] == [created["id"]]
    by_id = client.get(f"/org/credential_providers?query={created['id']}").get_json()
    assert [p["id"] for p in by_id] == [created["id"]]
    assert client.get("/org/credential_providers?query=nothing").get_json() == []
    updated = client.patch(f"/org/credential_providers/{created['id']}",
                           json={"enabled": False, "priority": 5, "name": "renamed"}).get_json()
    assert (updated["enabled"], updated["priority"], updated["name"]) == (False, 5, "renamed")
    assert client.delete(f"/org/credential_providers/{created['id']}").status_code == 204
    assert client.get(f"/org/credential_providers/{created['id']}").status_code == 404


def test_provider_types_and_validation(client, provider):
    assert provider(name="spec", provider_type="vendorpassword")["provider_type"] == "vendorpassword"
    response = client.post("/org/credential_providers", json={"name": "x", "provider_type": "bitwarden", "token": "t"})
    assert response.status_code == 400
    assert "onepassword, vendorpassword" in response.get_json()["details"][0]["message"]
    valid = {"name": "x", "provider_type": "onepassword", "token": "t"}
    for body in ({"provider_type": "onepassword", "token": "t"}, {**valid, "name": " "},
                 {"name": "x", "provider_type": "onepassword"}, {**valid, "token": ""},
                 {**valid, "url": "ftp://x"}, {**valid, "enabled": "yes"}):
        assert client.post("/org/credential_providers", json=body).status_code == 400, body
    duplicate = client.post("/org/credential_providers", json={**valid, "name": "spec"})
    assert duplicate.status_code == 409 and duplicate.headers["x-should-retry"] == "false"


def test_paging_and_order_by_priority(client, provider):
    late = provider(name="late", priority=10)
    early = provider(name="early", priority=1)
    page = client.get("/org/credential_providers?limit=1")
    assert [p["id"] for p in page.get_json()] == [early["id"]] and page.headers["X-Has-More"] == "true"
    assert [p["id"] for p in client.get("/org/credential_providers?offset=1").get_json()] == [late["id"]]


def test_test_reports_vaults_or_a_readable_error(client, provider, connect, closed_port_url):
    connect.add_vault("Private")
    ok = provider(name="ok")
    result = client.post(f"/org/credential_providers/{ok['id']}/test", data="", content_type="application/json")
    assert result.status_code == 200
    assert result.get_json()["success"] is True
    assert [v["name"] for v in result.get_json()["vaults"]] == ["Private"]

    wrong = provider(name="wrong", token="not-the-token")
    body = client.post(f"/org/credential_providers/{wrong['id']}/test").get_json()
    assert (body["success"], body["vaults"]) == (False, [])
    assert "401" in body["error"]

    gone = provider(name="gone", url=closed_port_url)
    body = client.post(f"/org/credential_providers/{gone['id']}/test").get_json()
    assert body["success"] is False and "Could not reach" in body["error"]


def test_a_slow_provider_is_bounded_by_the_configured_timeout(app, client, provider, connect):
    settings.change(app, CREDENTIAL_PROVIDER_TIMEOUT_SECONDS=0.2)
    connect.delay = 1.0
    slow = provider(name="slow")
    body = client.post(f"/org/credential_providers/{slow['id']}/test").get_json()
    assert body["success"] is False and "timed out" in body["error"]


def test_items_are_paths_with_urls_and_cached_for_the_ttl(client, provider, connect):
    vault = connect.add_vault("Work")
    connect.add_login(vault, "GitHub", ["https://github.com/login"])
    connect.add_login(vault, "Notes", [])
    created = provider(cache_ttl_seconds=60)
    clock.freeze(clock.now())
    first = client.get(f"/org/credential_providers/{created['id']}/items").get_json()["items"]
    assert sorted((i["path"], tuple(i["urls"])) for i in first) == [
        ("Work/GitHub", ("https://github.com/login",)), ("Work/Notes", ())]
    assert all(i["vault_id"] == vault and i["vault_name"] == "Work" for i in first)
    calls = len(connect.paths)
    clock.advance(seconds=59)
    assert client.get(f"/org/credential_providers/{created['id']}/items").get_json()["items"] == first
    assert len(connect.paths) == calls, "answered from the cache"
    clock.advance(seconds=2)
    client.get(f"/org/credential_providers/{created['id']}/items")
    assert len(connect.paths) > calls, "refetched after the TTL"


def test_changing_the_token_drops_the_cache(client, provider, connect):
    connect.add_vault("Work")
    created = provider(cache_ttl_seconds=3600)
    client.get(f"/org/credential_providers/{created['id']}/items")
    client.patch(f"/org/credential_providers/{created['id']}", json={"token": "revoked"})
    response = client.get(f"/org/credential_providers/{created['id']}/items")
    assert response.status_code == 502
    assert response.get_json()["code"] == "credential_provider_error"
    assert response.get_json()["inner_error"]["code"] == "unauthorized"


def test_project_scoped_keys_cannot_change_providers(app, client, provider):
    created = provider()
    project = client.post("/org/projects", json={"name": "p"}).get_json()
    scoped = scoped_client(app, client, project["id"])
    assert scoped.get(f"/org/credential_providers/{created['id']}").status_code == 200
    new = {"name": "x", "provider_type": "onepassword", "token": "t"}
    assert scoped.post("/org/credential_providers", json=new).status_code == 403
    assert scoped.patch(f"/org/credential_providers/{created['id']}", json={"priority": 1}).status_code == 403
    assert scoped.delete(f"/org/credential_providers/{created['id']}").status_code == 403


def test_providers_of_other_organizations_are_invisible(app, client, provider, make_org):
    created = provider()
    other = client_for(app, make_org("Other", "o@o.test").plaintext)
    assert other.get(f"/org/credential_providers/{created['id']}").status_code == 404
    assert other.get("/org/credential_providers").get_json() == []


def test_default_url_comes_from_configuration(app, client, connect):
    settings.change(app, ONEPASSWORD_CONNECT_URL=connect.url)
    created = client.post("/org/credential_providers", json={
        "name": "default-url", "provider_type": "onepassword", "token": connect.token}).get_json()
    assert created["url"] is None
    assert client.post(f"/org/credential_providers/{created['id']}/test").get_json()["success"] is True


class TestAutomaticLookup:
    @pytest.fixture
    def lookup(self, app, owner_key):
        def find(domain):
            with app.test_request_context(), db.connection_context():
                return providers.find_login(owner_key.org_id, domain)
        return find

    def test_first_enabled_provider_by_priority_wins(self, provider, connect, lookup, closed_port_url):
        vault = connect.add_vault("V")
        connect.add_login(vault, "Example", ["https://example.com"], username="from-connect")
        provider(name="unreachable", url=closed_port_url, priority=0)
        provider(name="second", priority=2)
        provider(name="disabled", priority=1, enabled=False)
        login = lookup("example.com")
        assert (login.username, login.password, login.provider.name) == ("from-connect", "pw", "second")
        assert login.item["path"] == "V/Example"

    def test_exact_host_beats_parent_domain_and_ties_are_ambiguous(self, provider, connect, lookup):
        vault = connect.add_vault("V")
        connect.add_login(vault, "Parent", ["https://example.com"], username="parent")
        connect.add_login(vault, "Exact", ["https://login.example.com/signin"], username="exact", otp="otpauth://totp/x?secret=JBSWY3DPEHPK3PXP")
        provider()
        exact = lookup("https://login.example.com/")
        assert (exact.username, exact.totp_secret) == ("exact", "otpauth://totp/x?secret=JBSWY3DPEHPK3PXP")
        assert lookup("shop.example.com").username == "parent"
        assert lookup("www.example.com").username == "parent"
        assert lookup("example.org") is None
        connect.add_login(vault, "Parent again", ["https://www.example.com/"], username="twin")
        providers._item_cache.clear()
        with pytest.raises(providers.AmbiguousLogin) as caught:
            lookup("shop.example.com")
        assert sorted(i["path"] for i in caught.value.items) == ["V/Parent", "V/Parent again"]

    def test_no_providers_means_no_login(self, lookup):
        assert lookup("example.com") is None


def test_redirects_are_refused_so_the_token_goes_nowhere_else(client, provider, connect):
    from tests.fakes import FakeConnect

    elsewhere = FakeConnect(token=connect.token).start()
    try:
        connect.redirect_to = elsewhere.url
        created = provider()
        body = client.post(f"/org/credential_providers/{created['id']}/test").get_json()
        assert body["success"] is False and "redirect" in body["error"]
        assert elsewhere.paths == []
    finally:
        elsewhere.stop()


@pytest.mark.parametrize("answer", [{"not": "a list"}, [1, 2], [{"name": "no id"}], b"null", b"[{\"id\": "])
def test_answers_of_the_wrong_shape_are_reported_not_500(client, provider, connect, answer):
    connect.vaults_body = answer
    created = provider()
    body = client.post(f"/org/credential_providers/{created['id']}/test").get_json()
    assert body["success"] is False and "not" in body["error"]
    items = client.get(f"/org/credential_providers/{created['id']}/items")
    assert items.status_code == 502 and items.get_json()["inner_error"]["code"] == "bad_response"


def test_url_rules(client, provider):
    base = {"name": "u", "provider_type": "onepassword", "token": "t"}
    for url in ("http://user:pw@connect.test:8080", "http://x.test/" + "a" * 260):
        assert client.post("/org/credential_providers", json={**base, "url": url}).status_code == 400, url


def test_query_is_case_and_accent_insensitive_on_every_database(client, provider):
    created = provider(name="ZOË's vault")
    assert [p["id"] for p in client.get("/org/credential_providers?query=zoe").get_json()] == [created["id"]]
    assert client.post("/org/credential_providers", json={
        "name": "zoë's VAULT", "provider_type": "onepassword", "token": "t"}).status_code == 409


def test_lookup_ignores_items_that_are_not_logins(provider, connect, app, owner_key):
    vault = connect.add_vault("V")
    note = connect.add_login(vault, "A note", ["https://example.com"])
    connect.vaults[vault]["items"][note]["category"] = "SECURE_NOTE"
    provider()
    with app.test_request_context(), db.connection_context():
        assert providers.find_login(owner_key.org_id, "example.com") is None


def test_items_are_cached_for_300_seconds_by_default(client, provider, connect):
    connect.add_vault("Work")
    created = provider()
    clock.freeze(clock.now())
    client.get(f"/org/credential_providers/{created['id']}/items")
    calls = len(connect.paths)
    clock.advance(seconds=299)
    client.get(f"/org/credential_providers/{created['id']}/items")
    assert len(connect.paths) == calls
    clock.advance(seconds=2)
    client.get(f"/org/credential_providers/{created['id']}/items")
    assert len(connect.paths) > calls


SENTINEL = "sentinel-4f7c2a"
UNSENDABLE_TOKENS = [f"{SENTINEL}\n", f"{SENTINEL}\r\nX-Injected: 1", f" {SENTINEL}", f"{SENTINEL} token",
                     f"{SENTINEL}-\u2603", f"{SENTINEL}-\u00e9"]


@pytest.mark.parametrize("token", UNSENDABLE_TOKENS)
def test_a_token_a_header_cannot_carry_is_refused_without_echoing_it(client, provider, token):
    created = client.post("/org/credential_providers", json={"name": "bad", "provider_type": "onepassword",
                                                             "token": token})
    assert created.status_code == 400
    assert [d["field"] for d in created.get_json()["details"]] == ["token"]
    assert SENTINEL not in created.get_data(as_text=True)
    existing = provider()
    updated = client.patch(f"/org/credential_providers/{existing['id']}", json={"token": token})
    assert updated.status_code == 400 and [d["field"] for d in updated.get_json()["details"]] == ["token"]


@pytest.mark.parametrize("token", UNSENDABLE_TOKENS)
def test_a_stored_unsendable_token_fails_cleanly_and_stays_out_of_the_logs(app, client, owner_key, connect, caplog,
                                                                          token):
    """Rows written before tokens were validated may hold anything: answer without a 500 or the token in a log."""
    caplog.set_level(logging.DEBUG)
    with app.test_request_context(), db.connection_context():
        stored = CredentialProvider(org=owner_key.org_id, name="old", provider_type="onepassword", url=connect.url)
        stored.token = token
        stored.save_unique(force_insert=True)
    tested = client.post(f"/org/credential_providers/{stored.id}/test")
    assert tested.status_code == 200 and tested.get_json()["success"] is False
    items = client.get(f"/org/credential_providers/{stored.id}/items")
    assert items.status_code == 502 and items.get_json()["inner_error"]["code"] == "unauthorized"
    assert connect.paths == [], "the token never left"
    for response in (tested, items):
        assert SENTINEL not in response.get_data(as_text=True)
    assert SENTINEL not in caplog.text
    assert not any(SENTINEL in record.getMessage() for record in caplog.records)
