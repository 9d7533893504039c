"""client.profiles.* through the official SDK, strict validation, against the live server (contract 6.4).

Profiles live in a project; most tests work in a project of their own (`profiles`,
a client whose requests carry `X-Kernel-Project: <name>`), so lists are exact.
"""
import json
import threading
from contextlib import contextmanager

import httpx
import kernel
import pytest
from flask import Flask
from kernel.types import Profile

from app.core.blobs import BlobStore
from app.core.db import db, open_database
from app.profiles.models import Profile as ProfileRow
from app.profiles.models import save_profile_state
from tests.sdk.conftest import unique

EMPTY_STATE = {"cookies": [], "origins": []}
STATE = {"cookies": [{"name": "sid", "value": "abc", "domain": ".example.com", "path": "/", "httpOnly": True,
                      "secure": True, "sameSite": "Lax", "expires": -1}],
         "origins": [{"origin": "https://example.com", "localStorage": [{"name": "k", "value": "v"}]}]}
CONTENDERS = 6


@pytest.fixture
def profiles(in_project):
    return in_project


def counting_client(make_client, api_key, max_retries=2, **options):
    """A client that retries like the SDK's default, and a list of the requests it sent."""
    sent = []
    http_client = httpx.Client(event_hooks={"request": [lambda request: sent.append(request)]})
    return make_client(api_key, max_retries=max_retries, http_client=http_client, **options), sent


def ids(items):
    return [item.id for item in items]


def download(client, id_or_name, **params):
    """The bytes of a profile download (the binary response is closed)."""
    response = client.profiles.download(id_or_name, **params)
    try:
        return response.read(), response.headers
    finally:
        response.close()


@contextmanager
def on_server_database(live_server):
    """An app context on the live server's own database and blob folder, for the internal
    function a browser session calls to save a profile's state (no endpoint does that)."""
    previous = db.obj
    database = open_database(live_server.env["LANTERN_DATABASE_URL"], pool_size=1,
                             sqlite_pragmas={"journal_mode": "wal", "foreign_keys": 1, "busy_timeout": 5000})
    app = Flask("lantern-sdk-tests")
    app.extensions["blobs"] = BlobStore(live_server.env["LANTERN_BLOB_DIR"])
    db.initialize(database)
    try:
        with app.app_context(), database.connection_context():
            yield
    finally:
        database.close_all() if hasattr(database, "close_all") else database.close()
        db.initialize(previous)


# --- create / retrieve ----------------------------------------------------------------------------

def test_create_with_a_name_and_retrieve_by_id_and_name(profiles):
    name = unique("shopper")
    raw = profiles.profiles.with_raw_response.create(name=name)
    assert raw.http_response.status_code == 201
    assert raw.http_response.json().keys() >= {"id", "name", "created_at", "updated_at", "last_used_at"}
    created = raw.parse()
    assert isinstance(created, Profile)
    assert created.id and created.name == name
    assert created.created_at.tzinfo is not None
    assert created.updated_at >= created.created_at
    assert created.last_used_at is None

    assert profiles.profiles.retrieve(created.id) == created
    assert profiles.profiles.retrieve(name) == created


def test_create_without_a_name(profiles):
    raw = profiles.profiles.with_raw_response.create()
    assert raw.http_request.content == b"{}"
    created = raw.parse()
    assert created.name is None and created.id and created.last_used_at is None
    assert profiles.profiles.retrieve(created.id) == created
    # Unnamed profiles never clash with each other.
    other = profiles.profiles.create()
    assert other.id != created.id and other.name is None
    assert ids(profiles.profiles.list()) == [created.id, other.id]


@pytest.mark.parametrize("name", ["has space", "a/b", "x" * 256, "ünïcode", "semi;colon"],
                         ids=["space", "slash", "long", "unicode", "semicolon"])
def test_invalid_names_are_rejected(profiles, name):
    with pytest.raises(kernel.BadRequestError):
        profiles.profiles.create(name=name)
    created = profiles.profiles.create(name=unique("valid"))
    with pytest.raises(kernel.BadRequestError):
        profiles.profiles.update(created.id, name=name)
    assert profiles.profiles.retrieve(created.id) == created
    assert ids(profiles.profiles.list()) == [created.id]


def test_longest_name_and_every_allowed_character(profiles):
    longest = "x" * 255
    assert profiles.profiles.create(name=longest).name == longest
    assert profiles.profiles.retrieve(longest).name == longest
    mixed = "A.b_c-1" + unique("")
    assert profiles.profiles.retrieve(profiles.profiles.create(name=mixed).id).name == mixed


def test_duplicate_name_is_a_conflict_the_sdk_does_not_retry(make_client, live_server, project):
    client, sent = counting_client(make_client, live_server.api_key, project=project.name)
    name = unique("dup")
    original = client.profiles.create(name=name)
    sent.clear()
    with pytest.raises(kernel.ConflictError) as caught:
        client.profiles.create(name=name)
    assert caught.value.status_code == 409
    assert caught.value.response.headers["x-should-retry"] == "false"
    assert caught.value.body["code"] == "profile_name_taken"
    assert name in caught.value.body["message"]
    assert len(sent) == 1  # x-should-retry: false beats the SDK's default retry of 409
    assert ids(client.profiles.list(name=name)) == [original.id]


def test_no_header_and_the_default_project_header_are_one_namespace(new_org):
    org = new_org()
    [default] = list(org.projects.list())
    in_default = org.with_options(project_id=default.id)
    by_name = org.with_options(project=default.name)
    name = unique("shared-name")
    created = org.profiles.create(name=name)
    assert in_default.profiles.retrieve(name) == created
    assert by_name.profiles.retrieve(created.id) == created
    assert ids(in_default.profiles.list()) == [created.id]
    with pytest.raises(kernel.ConflictError):
        in_default.profiles.create(name=name)
    with pytest.raises(kernel.ConflictError):
        in_default.profiles.update(in_default.profiles.create().id, name=name)
    other = in_default.profiles.create(name=unique("from-header"))
    with pytest.raises(kernel.ConflictError):
        org.profiles.create(name=other.name)
    assert ids(org.profiles.list()) == ids(in_default.profiles.list())


def test_profiles_are_per_project(sdk, profiles, project):
    name = unique("per-project")
    mine = profiles.profiles.create(name=name)
    # The same name is free in another project (here: the organization's default project).
    elsewhere = sdk.profiles.create(name=name)
    assert elsewhere.id != mine.id
    assert profiles.profiles.retrieve(name) == mine
    assert sdk.profiles.retrieve(name) == elsewhere
    # A profile is invisible outside its project, by id as well as by name.
    with pytest.raises(kernel.NotFoundError):
        sdk.profiles.retrieve(mine.id)
    with pytest.raises(kernel.NotFoundError):
        sdk.profiles.update(mine.id, name=unique("stolen"))
    with pytest.raises(kernel.NotFoundError):
        sdk.profiles.download(mine.id)
    with pytest.raises(kernel.NotFoundError):
        sdk.profiles.delete(mine.id)
    assert ids(profiles.profiles.list()) == [mine.id]
    assert mine.id not in ids(sdk.profiles.list(query=mine.id))
    # The project id header reaches the same profiles as the project name header.
    by_id = sdk.with_options(project_id=project.id)
    assert by_id.profiles.retrieve(name) == mine


# --- update ---------------------------------------------------------------------------------------

def test_rename(profiles):
    old_name, new_name = unique("before"), unique("after")
    created = profiles.profiles.create(name=old_name)
    raw = profiles.profiles.with_raw_response.update(old_name, name=new_name)
    assert raw.http_response.status_code == 200
    assert json.loads(raw.http_request.content) == {"name": new_name}
    renamed = raw.parse()
    assert renamed.id == created.id and renamed.name == new_name
    assert renamed.created_at == created.created_at
    assert renamed.updated_at >= created.updated_at
    assert renamed.last_used_at is None

    assert profiles.profiles.retrieve(new_name) == renamed
    assert profiles.profiles.retrieve(created.id) == renamed
    with pytest.raises(kernel.NotFoundError):
        profiles.profiles.retrieve(old_name)
    # The old name is free again.
    assert profiles.profiles.create(name=old_name).id != created.id
    # By id, and an unnamed profile can be given a name.
    unnamed = profiles.profiles.create()
    assert profiles.profiles.update(unnamed.id, name=unique("named-later")).id == unnamed.id


def test_rename_to_its_own_name_is_allowed(profiles):
    name = unique("same")
    created = profiles.profiles.create(name=name)
    again = profiles.profiles.update(name, name=name)
    assert again.id == created.id and again.name == name


def test_rename_to_a_taken_name_is_a_conflict(make_client, live_server, project):
    client, sent = counting_client(make_client, live_server.api_key, project=project.name)
    taken, mine = unique("taken"), unique("mine")
    holder = client.profiles.create(name=taken)
    renaming = client.profiles.create(name=mine)
    sent.clear()
    with pytest.raises(kernel.ConflictError) as caught:
        client.profiles.update(mine, name=taken)
    assert caught.value.response.headers["x-should-retry"] == "false"
    assert len(sent) == 1
    assert client.profiles.retrieve(mine) == renaming
    assert client.profiles.retrieve(taken) == holder


def test_unknown_profile_is_not_found_everywhere(profiles):
    missing = unique("missing")
    with pytest.raises(kernel.NotFoundError):
        profiles.profiles.retrieve(missing)
    with pytest.raises(kernel.NotFoundError):
        profiles.profiles.update(missing, name=unique("x"))
    with pytest.raises(kernel.NotFoundError):
        profiles.profiles.download(missing)
    with pytest.raises(kernel.NotFoundError) as caught:
        profiles.profiles.delete(missing)
    assert caught.value.body["code"] == "not_found"
    assert missing in caught.value.body["message"]


# --- list -----------------------------------------------------------------------------------------

def test_list_filters(profiles):
    suffix = unique("")
    alpha = profiles.profiles.create(name=f"alpha{suffix}")
    beta = profiles.profiles.create(name=f"beta{suffix}")
    unnamed = profiles.profiles.create()

    everything = profiles.profiles.list()
    assert ids(everything) == [alpha.id, beta.id, unnamed.id]
    assert all(isinstance(p, Profile) for p in everything)
    assert everything.items[0] == alpha
    assert everything.has_next_page() is False

    assert ids(profiles.profiles.list(name=alpha.name)) == [alpha.id]
    assert ids(profiles.profiles.list(name=f"alpha{suffix}"[:-1])) == []  # `name` is exact
    assert ids(profiles.profiles.list(query="eta")) == [beta.id]  # `query` is a substring of the name
    assert ids(profiles.profiles.list(query=suffix)) == [alpha.id, beta.id]
    assert ids(profiles.profiles.list(query=unnamed.id)) == [unnamed.id]  # ... or an id
    assert ids(profiles.profiles.list(query=unique("nothing"))) == []
    assert ids(profiles.profiles.list(name=beta.name, query="beta")) == [beta.id]
    assert ids(profiles.profiles.list(name=beta.name, query="alpha")) == []


def test_list_query_is_case_insensitive_and_takes_wildcards_literally(profiles):
    suffix = unique("")
    underscored = profiles.profiles.create(name=f"Under_Score{suffix}")
    profiles.profiles.create(name=f"underXscore{suffix}")
    assert ids(profiles.profiles.list(query=f"under_score{suffix}")) == [underscored.id]
    assert ids(profiles.profiles.list(query="%")) == []


def test_list_pages_and_the_auto_pager(make_client, live_server, project):
    client, sent = counting_client(make_client, live_server.api_key, project=project.name)
    created = [client.profiles.create(name=unique(f"page{i}")) for i in range(5)]
    sent.clear()

    first = client.profiles.list(limit=2)
    assert ids(first.items) == ids(created[:2])
    assert first.has_next_page() is True
    raw = client.profiles.with_raw_response.list(limit=2)
    assert raw.http_response.headers["X-Has-More"] == "true"
    assert raw.http_response.headers["X-Next-Offset"] == "2"

    sent.clear()
    assert ids(first) == ids(created)  # iterating a page fetches the following ones
    assert [dict(httpx.QueryParams(r.url.query)) for r in sent] == [
        {"limit": "2", "offset": "2"}, {"limit": "2", "offset": "4"}]

    last = client.profiles.list(limit=2, offset=4)
    assert ids(last.items) == [created[4].id] and last.has_next_page() is False
    middle = client.profiles.list(limit=2, offset=2)
    assert ids(middle.get_next_page().items) == [created[4].id]
    assert ids(client.profiles.list(limit=100)) == ids(created)
    assert ids(client.profiles.list(offset=5)) == []


@pytest.mark.parametrize("params", [{"limit": 0}, {"limit": 101}, {"offset": -1}],
                         ids=["limit-0", "limit-101", "offset-negative"])
def test_list_rejects_bad_paging(profiles, params):
    with pytest.raises(kernel.BadRequestError):
        profiles.profiles.list(**params)


# --- download -------------------------------------------------------------------------------------

def test_download_of_a_fresh_profile_is_an_empty_storage_state(profiles):
    name = unique("fresh")
    created = profiles.profiles.create(name=name)
    for ref in (name, created.id):
        data, headers = download(profiles, ref)
        assert json.loads(data) == EMPTY_STATE
        assert headers["content-type"].startswith("application/json")
        assert headers["content-disposition"] == f'attachment; filename="{name}.json"'
    # `format` is accepted; Lantern profiles are JSON storage states either way.
    for fmt in ("tar", "tar.zst"):
        assert json.loads(download(profiles, name, format=fmt)[0]) == EMPTY_STATE
    unnamed = profiles.profiles.create()
    assert json.loads(download(profiles, unnamed.id)[0]) == EMPTY_STATE


def test_download_sends_the_binary_accept_header(profiles):
    created = profiles.profiles.create()
    with profiles.profiles.with_streaming_response.download(created.id) as response:
        assert response.http_request.headers["accept"] == "application/octet-stream"
        assert response.status_code == 200
        assert json.loads(response.read()) == EMPTY_STATE


def test_download_rejects_an_unknown_format(profiles):
    created = profiles.profiles.create()
    with pytest.raises(kernel.BadRequestError):
        profiles.profiles.download(created.id, extra_query={"format": "zip"})


def test_saved_state_downloads_and_survives_a_rename(live_server, profiles):
    """A browser session saves by profile id, so a rename while it ran loses nothing."""
    created = profiles.profiles.create(name=unique("session-owned"))
    renamed = profiles.profiles.update(created.id, name=unique("renamed-meanwhile"))
    with on_server_database(live_server):
        save_profile_state(created.id, STATE)

    fetched = profiles.profiles.retrieve(renamed.name)
    assert fetched.id == created.id and fetched.name == renamed.name
    assert fetched.last_used_at is not None and fetched.last_used_at.tzinfo is not None
    assert fetched.updated_at == fetched.last_used_at
    assert json.loads(download(profiles, renamed.name)[0]) == STATE
    assert json.loads(download(profiles, created.id, format="tar")[0]) == STATE
    assert profiles.profiles.list(name=renamed.name).items == [fetched]


# --- delete ---------------------------------------------------------------------------------------

def test_delete_by_name_and_by_id(profiles):
    name = unique("gone")
    by_name = profiles.profiles.create(name=name)
    by_id = profiles.profiles.create()
    keep = profiles.profiles.create(name=unique("keep"))

    raw = profiles.profiles.with_raw_response.delete(name)
    assert raw.http_response.status_code == 204 and raw.parse() is None
    assert profiles.profiles.delete(by_id.id) is None

    for ref in (name, by_name.id, by_id.id):
        with pytest.raises(kernel.NotFoundError):
            profiles.profiles.retrieve(ref)
        with pytest.raises(kernel.NotFoundError):
            profiles.profiles.download(ref)
        with pytest.raises(kernel.NotFoundError):
            profiles.profiles.delete(ref)
    assert ids(profiles.profiles.list()) == [keep.id]
    # The name can be used again.
    assert profiles.profiles.create(name=name).id != by_name.id


def test_delete_removes_the_saved_state(live_server, profiles):
    created = profiles.profiles.create()
    state = {"cookies": [], "origins": [{"origin": f"https://{unique('o')}.example", "localStorage": []}]}
    with on_server_database(live_server):
        save_profile_state(created.id, state)
        blob = BlobStore(live_server.env["LANTERN_BLOB_DIR"]).path(ProfileRow.get_by_id(created.id).state_blob)
    with open(blob, "rb") as stored:
        assert json.loads(stored.read()) == state
    profiles.profiles.delete(created.id)
    with pytest.raises(FileNotFoundError):
        open(blob, "rb").close()


# --- concurrency ----------------------------------------------------------------------------------

@pytest.mark.parametrize("operation", ["create", "rename"])
def test_concurrent_creates_or_renames_to_one_name_let_exactly_one_win(
        make_client, live_server, profiles, project, operation):
    contested = unique("contested")
    sources = [profiles.profiles.create(name=unique(f"src{i}")) for i in range(CONTENDERS)]
    # One client (one connection pool) per thread, no retries, so each thread sends exactly one request.
    clients = [make_client(live_server.api_key, project=project.name, max_retries=0) for _ in sources]
    barrier = threading.Barrier(len(sources))
    outcomes = [None] * len(sources)

    def attempt(index):
        client, source = clients[index], sources[index]
        try:
            barrier.wait(timeout=30)
            if operation == "create":
                outcomes[index] = client.profiles.create(name=contested)
            else:
                outcomes[index] = client.profiles.update(source.id, name=contested)
        except Exception as error:  # noqa: BLE001 - reported by the assertions below
            outcomes[index] = error

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(len(sources))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    winners = [o for o in outcomes if isinstance(o, Profile)]
    losers = [o for o in outcomes if not isinstance(o, Profile)]
    assert len(winners) == 1, outcomes
    assert all(isinstance(o, kernel.ConflictError) for o in losers), outcomes
    assert all(o.response.headers["x-should-retry"] == "false" for o in losers)
    winner = winners[0]
    assert winner.name == contested
    assert ids(profiles.profiles.list(name=contested)) == [winner.id]
    assert profiles.profiles.retrieve(contested) == winner
    if operation == "rename":
        assert winner.id in ids(sources)
        # Every loser kept its own name.
        for source in sources:
            if source.id != winner.id:
                assert profiles.profiles.retrieve(source.id).name == source.name
        assert len(list(profiles.profiles.list())) == CONTENDERS
    else:
        assert len(list(profiles.profiles.list())) == CONTENDERS + 1
