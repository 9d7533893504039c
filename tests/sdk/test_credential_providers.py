"""client.credential_providers.* through the official SDK, strict validation, against the live server.

The server reaches a 1Password Connect look-alike started in this process on
127.0.0.1 through the provider's `url` (a Lantern extension, sent with extra_body).
"""
import httpx
import kernel
import pytest
from kernel.types import CredentialProvider, CredentialProviderTestResult
from kernel.types.credential_provider_list_items_response import CredentialProviderListItemsResponse

from tests.sdk.conftest import unique


@pytest.fixture
def org(new_org):
    """A brand-new organization of its own: its provider list holds only what the test adds."""
    return new_org()


def add_provider(client, connect, *, name=None, token=None, url=None, **params):
    return client.credential_providers.create(
        name=name or unique("1p"), provider_type="onepassword",
        token=token if token is not None else connect.token,
        extra_body={"url": url or connect.url}, **params)


def counting_client(make_client, api_key, max_retries=2):
    """A client that retries like the SDK's default, and a list of the requests it sent."""
    sent = []
    http_client = httpx.Client(event_hooks={"request": [lambda request: sent.append(request)]})
    return make_client(api_key, max_retries=max_retries, http_client=http_client), sent


def ids(items):
    return [item.id for item in items]


# --- create / retrieve ----------------------------------------------------------------------------

def test_create_and_retrieve_never_return_the_token(sdk, connect):
    name = unique("Team vault")
    created = add_provider(sdk, connect, name=f"  {name}  ", cache_ttl_seconds=120)

    assert isinstance(created, CredentialProvider)
    assert created.id and created.name == name  # trimmed
    assert (created.provider_type, created.enabled, created.priority) == ("onepassword", True, 0)
    assert created.updated_at >= created.created_at

    raw = sdk.credential_providers.with_raw_response.retrieve(created.id)
    assert raw.http_response.status_code == 200
    body = raw.http_response.json()
    assert connect.token not in raw.http_response.text
    assert "token" not in body and "cache_ttl_seconds" not in body
    assert raw.parse() == created
    assert sdk.credential_providers.retrieve(created.id) == created


def test_create_response_body_omits_the_token(sdk, connect):
    raw = sdk.credential_providers.with_raw_response.create(
        name=unique("raw"), provider_type="onepassword", token=connect.token, extra_body={"url": connect.url})
    assert raw.http_response.status_code in (200, 201)
    assert connect.token not in raw.http_response.text
    assert "token" not in raw.http_response.json()
    assert isinstance(raw.parse(), CredentialProvider)


@pytest.mark.parametrize("params", [
    {"name": "   "},
    {"name": ""},
    {"token": ""},
    {"provider_type": "bitwarden"},
    {"cache_ttl_seconds": -1},
], ids=["blank-name", "empty-name", "empty-token", "unknown-type", "negative-ttl"])
def test_invalid_create_is_a_bad_request(sdk, params):
    body = {"name": unique("bad"), "provider_type": "onepassword", "token": "t", **params}
    with pytest.raises(kernel.BadRequestError) as caught:
        sdk.credential_providers.create(**body)
    assert caught.value.body["code"] == "bad_request"


def test_an_invalid_url_is_a_bad_request(sdk):
    with pytest.raises(kernel.BadRequestError):
        sdk.credential_providers.create(name=unique("ftp"), provider_type="onepassword", token="t",
                                        extra_body={"url": "ftp://example.test"})


def test_unknown_provider_is_not_found(sdk):
    calls = (sdk.credential_providers.retrieve, sdk.credential_providers.delete,
             sdk.credential_providers.test, sdk.credential_providers.list_items,
             lambda provider_id: sdk.credential_providers.update(provider_id, priority=1))
    for call in calls:
        with pytest.raises(kernel.NotFoundError):
            call("no-such-provider")


# --- name conflicts -------------------------------------------------------------------------------

def test_name_conflict_is_a_409_that_must_not_be_retried(sdk, org, connect, live_server, make_client):
    name = unique("Taken")
    add_provider(sdk, connect, name=name)

    for duplicate in (name, f"  {name} "):
        with pytest.raises(kernel.ConflictError) as caught:
            add_provider(sdk, connect, name=duplicate)
        assert caught.value.status_code == 409
        assert caught.value.response.headers.get("x-should-retry") == "false"
        assert caught.value.body["code"]

    other = add_provider(sdk, connect)
    with pytest.raises(kernel.ConflictError) as caught:
        sdk.credential_providers.update(other.id, name=name)
    assert caught.value.response.headers.get("x-should-retry") == "false"
    assert sdk.credential_providers.retrieve(other.id).name == other.name

    # With the SDK's default retries, the 409 is still sent exactly once.
    client, sent = counting_client(make_client, live_server.api_key)
    with pytest.raises(kernel.ConflictError):
        add_provider(client, connect, name=name)
    assert len(sent) == 1

    # Names are unique per organization only.
    assert add_provider(org, connect, name=name).name == name
    # Renaming a provider to its own name is no conflict.
    assert sdk.credential_providers.update(other.id, name=other.name).name == other.name


# --- update ---------------------------------------------------------------------------------------

def test_update_changes_only_the_given_fields(sdk, connect):
    created = add_provider(sdk, connect)
    new_name = unique("renamed")

    updated = sdk.credential_providers.update(created.id, enabled=False, priority=5, name=f" {new_name} ",
                                              cache_ttl_seconds=60)
    assert (updated.id, updated.enabled, updated.priority, updated.name) == (created.id, False, 5, new_name)
    assert updated.provider_type == "onepassword"
    assert updated.created_at == created.created_at
    assert updated.updated_at >= created.updated_at
    assert sdk.credential_providers.retrieve(created.id) == updated

    assert sdk.credential_providers.update(created.id, priority=-3).priority == -3
    again = sdk.credential_providers.update(created.id, enabled=True)
    assert (again.enabled, again.priority, again.name) == (True, -3, new_name)

    unchanged = sdk.credential_providers.update(created.id)  # empty body
    assert (unchanged.enabled, unchanged.priority, unchanged.name) == (True, -3, new_name)


def test_invalid_update_is_a_bad_request_and_changes_nothing(sdk, connect):
    created = add_provider(sdk, connect)
    for params in ({"name": "  "}, {"token": ""}, {"cache_ttl_seconds": 86401}):
        with pytest.raises(kernel.BadRequestError):
            sdk.credential_providers.update(created.id, priority=9, **params)
    assert sdk.credential_providers.retrieve(created.id) == created


def test_rotating_the_token_and_url_takes_effect(sdk, connect, closed_port_url):
    connect.add_vault("Work")
    created = add_provider(sdk, connect, token="stale-token", cache_ttl_seconds=3600)
    assert sdk.credential_providers.test(created.id).success is False

    raw = sdk.credential_providers.with_raw_response.update(created.id, token=connect.token)
    assert connect.token not in raw.http_response.text and "token" not in raw.http_response.json()
    assert sdk.credential_providers.test(created.id).success is True
    assert [i.vault_name for i in sdk.credential_providers.list_items(created.id).items] == []

    sdk.credential_providers.update(created.id, extra_body={"url": closed_port_url})
    result = sdk.credential_providers.test(created.id)
    assert result.success is False and "Could not reach" in result.error

    sdk.credential_providers.update(created.id, extra_body={"url": connect.url})
    assert sdk.credential_providers.test(created.id).success is True


# --- delete ---------------------------------------------------------------------------------------

def test_delete_removes_the_provider(sdk, connect):
    created = add_provider(sdk, connect)
    assert sdk.credential_providers.delete(created.id) is None
    for call in (sdk.credential_providers.retrieve, sdk.credential_providers.test,
                 sdk.credential_providers.list_items, sdk.credential_providers.delete):
        with pytest.raises(kernel.NotFoundError):
            call(created.id)
    assert created.id not in ids(sdk.credential_providers.list(query=created.id))
    # The name is free again.
    assert add_provider(sdk, connect, name=created.name).id != created.id


# --- list -----------------------------------------------------------------------------------------

def test_list_filters_by_name_substring_or_exact_id(org, connect):
    tag = unique("Team")
    team = add_provider(org, connect, name=f"{tag} vault")
    personal = add_provider(org, connect, name=unique("personal"))

    assert all(isinstance(p, CredentialProvider) for p in org.credential_providers.list())
    assert set(ids(org.credential_providers.list())) == {team.id, personal.id}
    assert ids(org.credential_providers.list(query=tag)) == [team.id]
    assert ids(org.credential_providers.list(query=tag.upper())) == [team.id]  # case-insensitive
    assert ids(org.credential_providers.list(query=personal.id)) == [personal.id]
    assert ids(org.credential_providers.list(query=personal.id[:-1] + "?")) == []
    assert list(org.credential_providers.list(query="nothing-like-this")) == []


def test_list_orders_by_priority(org, connect):
    late = add_provider(org, connect, name=unique("late"))
    org.credential_providers.update(late.id, priority=10)
    early = add_provider(org, connect, name=unique("early"))
    org.credential_providers.update(early.id, priority=1)
    middle = add_provider(org, connect, name=unique("middle"))
    org.credential_providers.update(middle.id, priority=5)
    assert ids(org.credential_providers.list()) == [early.id, middle.id, late.id]


def test_list_pages_with_the_auto_pager(org, connect, live_server, make_client):
    created = [add_provider(org, connect, name=f"p{i}-{unique()}") for i in range(7)]

    first = org.credential_providers.list(limit=3)
    assert len(first.items) == 3 and first.has_next_page()
    raw = org.credential_providers.with_raw_response.list(limit=3)
    assert raw.http_response.headers["X-Has-More"] == "true"
    assert raw.http_response.headers["X-Next-Offset"] == "3"
    last = org.credential_providers.list(limit=3, offset=6)
    assert len(last.items) == 1 and not last.has_next_page()

    everything = ids(org.credential_providers.list(limit=100))
    assert sorted(everything) == sorted(ids(created))
    paged = ids(org.credential_providers.list(limit=3))  # the auto-pager follows X-Next-Offset
    assert paged == everything
    pages = list(org.credential_providers.list(limit=3).iter_pages())
    assert [len(page.items) for page in pages] == [3, 3, 1]


def test_providers_belong_to_their_organization(sdk, org, connect):
    mine = add_provider(sdk, connect)
    with pytest.raises(kernel.NotFoundError):
        org.credential_providers.retrieve(mine.id)
    with pytest.raises(kernel.NotFoundError):
        org.credential_providers.test(mine.id)
    with pytest.raises(kernel.NotFoundError):
        org.credential_providers.delete(mine.id)
    assert list(org.credential_providers.list()) == []
    assert list(org.credential_providers.list(query=mine.id)) == []
    assert sdk.credential_providers.retrieve(mine.id) == mine


def test_project_scoped_keys_may_read_but_not_change_providers(sdk, connect, make_client):
    created = add_provider(sdk, connect)
    project = sdk.projects.create(name=unique("providers-project"))
    scoped = make_client(sdk.api_keys.create(name=unique("scoped"), project_id=project.id).key)

    assert scoped.credential_providers.retrieve(created.id) == created
    assert created.id in ids(scoped.credential_providers.list(query=created.id))
    for call in (lambda: add_provider(scoped, connect),
                 lambda: scoped.credential_providers.update(created.id, priority=1),
                 lambda: scoped.credential_providers.delete(created.id)):
        with pytest.raises(kernel.PermissionDeniedError):
            call()
    assert sdk.credential_providers.retrieve(created.id) == created


# --- test -----------------------------------------------------------------------------------------

def test_test_lists_the_vaults_the_token_can_see(sdk, connect):
    private = connect.add_vault("Private")
    shared = connect.add_vault("Shared Team")
    created = add_provider(sdk, connect)

    raw = sdk.credential_providers.with_raw_response.test(created.id)
    assert raw.http_response.status_code == 200
    result = raw.parse()
    assert isinstance(result, CredentialProviderTestResult)
    assert result.success is True and result.error is None
    assert sorted((v.id, v.name) for v in result.vaults) == sorted([(private, "Private"), (shared, "Shared Team")])
    assert "/v1/vaults" in connect.paths


def test_test_with_no_vaults_succeeds(sdk, connect):
    result = sdk.credential_providers.test(add_provider(sdk, connect).id)
    assert (result.success, result.vaults, result.error) == (True, [], None)


def test_test_with_a_wrong_token_fails_readably(sdk, connect):
    connect.add_vault("Private")
    created = add_provider(sdk, connect, token="not-the-token")
    result = sdk.credential_providers.test(created.id)
    assert isinstance(result, CredentialProviderTestResult)
    assert (result.success, result.vaults) == (False, [])
    assert result.error and "401" in result.error and "token" in result.error
    assert "not-the-token" not in result.error


def test_test_of_an_unreachable_provider_fails_readably(sdk, connect, closed_port_url):
    created = add_provider(sdk, connect, url=closed_port_url)
    result = sdk.credential_providers.test(created.id)
    assert (result.success, result.vaults) == (False, [])
    assert result.error and "Could not reach" in result.error and closed_port_url in result.error


def test_test_sends_no_body(sdk, connect, live_server, make_client):
    created = add_provider(sdk, connect)
    client, sent = counting_client(make_client, live_server.api_key, max_retries=0)
    assert client.credential_providers.test(created.id).success is True
    [request] = sent
    assert request.method == "POST" and request.content == b""


# --- list_items -----------------------------------------------------------------------------------

def test_list_items_are_vault_title_paths_with_urls(sdk, connect):
    work = connect.add_vault("Work")
    home = connect.add_vault("Home")
    github = connect.add_login(work, "GitHub", ["https://github.com/login", "https://gist.github.com"])
    notes = connect.add_login(work, "Notes", [])
    bank = connect.add_login(home, "My Bank", ["https://bank.example"])
    created = add_provider(sdk, connect)

    raw = sdk.credential_providers.with_raw_response.list_items(created.id)
    assert raw.http_response.status_code == 200
    assert isinstance(raw.http_response.json(), dict)  # {items: [...]}, not a paged array
    listed = raw.parse()
    assert isinstance(listed, CredentialProviderListItemsResponse)
    found = {item.id: item for item in listed.items}
    assert set(found) == {github, notes, bank}
    expected = {
        github: ("Work/GitHub", "GitHub", work, "Work", ["https://github.com/login", "https://gist.github.com"]),
        notes: ("Work/Notes", "Notes", work, "Work", []),
        bank: ("Home/My Bank", "My Bank", home, "Home", ["https://bank.example"]),
    }
    for item_id, (path, title, vault_id, vault_name, urls) in expected.items():
        item = found[item_id]
        assert (item.path, item.title, item.vault_id, item.vault_name, item.urls or []) == (
            path, title, vault_id, vault_name, urls)
    # Listing never exposes the login fields.
    assert "fields" not in raw.http_response.text


def test_list_items_of_an_empty_provider(sdk, connect):
    assert sdk.credential_providers.list_items(add_provider(sdk, connect).id).items == []


def test_list_items_are_cached_for_the_ttl_and_dropped_on_token_change(sdk, connect):
    vault = connect.add_vault("Work")
    connect.add_login(vault, "GitHub", ["https://github.com"])
    created = add_provider(sdk, connect, cache_ttl_seconds=3600)

    first = sdk.credential_providers.list_items(created.id).items
    assert [i.path for i in first] == ["Work/GitHub"]
    calls = len(connect.paths)
    connect.add_login(vault, "Later", ["https://later.example"])
    assert sdk.credential_providers.list_items(created.id).items == first
    assert len(connect.paths) == calls, "answered from the cache"

    sdk.credential_providers.update(created.id, token="revoked")
    with pytest.raises(kernel.InternalServerError) as caught:
        sdk.credential_providers.list_items(created.id)
    assert caught.value.status_code == 502
    assert caught.value.body["code"] == "credential_provider_error"
    assert caught.value.body["inner_error"]["code"] == "unauthorized"
    assert "revoked" not in caught.value.response.text

    sdk.credential_providers.update(created.id, token=connect.token)
    assert sorted(i.path for i in sdk.credential_providers.list_items(created.id).items) == [
        "Work/GitHub", "Work/Later"]


def test_list_items_with_no_cache_are_always_fresh(sdk, connect):
    vault = connect.add_vault("Work")
    connect.add_login(vault, "First", [])
    created = add_provider(sdk, connect, cache_ttl_seconds=0)
    assert [i.path for i in sdk.credential_providers.list_items(created.id).items] == ["Work/First"]
    connect.add_login(vault, "Second", [])
    assert sorted(i.path for i in sdk.credential_providers.list_items(created.id).items) == [
        "Work/First", "Work/Second"]


def test_list_items_of_an_unreachable_provider_is_a_bad_gateway(sdk, connect, closed_port_url):
    created = add_provider(sdk, connect, url=closed_port_url)
    with pytest.raises(kernel.InternalServerError) as caught:
        sdk.credential_providers.list_items(created.id)
    assert caught.value.status_code == 502
    assert caught.value.body["inner_error"]["code"] == "unreachable"
    assert "Could not reach" in caught.value.body["message"]
