"""client.api_keys.* through the official SDK, strict validation, against the live server."""
import re
from datetime import datetime, timedelta, timezone

import kernel
import pytest
from kernel.types import APIKey, CreatedAPIKey

from tests.sdk.conftest import OWNER_EMAIL, unique

# Two clocks (test and server) and one request in between: generous, never a timing assertion.
SLACK = timedelta(minutes=5)


def visible_secret(masked, key):
    """The characters of `key` that `masked` shows (minus the public `sk_` prefix).

    Checks that every visible run of characters is the key's start or end.
    """
    runs = [run for run in re.split(r"\.{2,}|\*+|•+|…", masked) if run]
    assert runs, masked
    assert key.startswith(runs[0]) or key.endswith(runs[0]), masked
    assert key.endswith(runs[-1]), masked
    shown = "".join(runs)
    prefix = "sk_" if key.startswith("sk_") and shown.startswith("sk_") else ""
    return shown[len(prefix):]


def assert_same_key(a, b):
    for name in ("id", "name", "created_at", "created_by", "masked_key", "expires_at", "deleted_at",
                 "project_id", "project_name"):
        assert getattr(a, name) == getattr(b, name), name


def close_to(value, expected):
    return value is not None and abs(value - expected) <= SLACK


# --- create -------------------------------------------------------------------------------------

def test_create_returns_the_plaintext_once_and_it_authenticates(sdk, make_client):
    name = unique("key")
    created = sdk.api_keys.create(name=name)

    assert isinstance(created, CreatedAPIKey)
    assert created.name == name
    assert created.key and created.id
    assert created.project_id is None and created.project_name is None
    assert created.deleted_at is None and created.expires_at is None
    assert created.created_by.email == OWNER_EMAIL
    assert created.created_by.id

    # The new key is a working credential of the same organization.
    own = make_client(created.key)
    assert own.api_keys.retrieve(created.id).id == created.id
    assert own.projects.list().items == sdk.projects.list().items

    # Reads never show the plaintext again.
    raw = sdk.api_keys.with_raw_response.retrieve(created.id)
    assert created.key not in raw.text()
    assert "key" not in raw.json()
    retrieved = raw.parse()
    assert isinstance(retrieved, APIKey)
    assert_same_key(retrieved, created)
    listed = sdk.api_keys.with_raw_response.list(name=name)
    assert created.key not in listed.text()


def test_masked_key_shows_the_last_four_characters_and_at_most_eight(sdk):
    for _ in range(3):
        created = sdk.api_keys.create(name=unique("masked"))
        masked, key = created.masked_key, created.key
        assert masked.endswith(key[-4:])
        assert masked != key and key not in masked
        assert len(visible_secret(masked, key)) <= 8
        assert sdk.api_keys.retrieve(created.id).masked_key == masked


def test_create_with_days_to_expire(sdk, make_client):
    created = sdk.api_keys.create(name=unique("expiring"), days_to_expire=30)
    assert created.expires_at is not None
    assert abs(created.expires_at - created.created_at - timedelta(days=30)) < timedelta(seconds=5)
    assert make_client(created.key).api_keys.retrieve(created.id).expires_at == created.expires_at


@pytest.mark.parametrize("zone", [timezone.utc, timezone(timedelta(hours=2)), timezone(timedelta(hours=-7))],
                         ids=["utc", "plus-2", "minus-7"])
def test_create_with_expires_at(sdk, zone):
    expires_at = (datetime.now(zone) + timedelta(days=3)).replace(microsecond=0)
    created = sdk.api_keys.create(name=unique("expiring"), expires_at=expires_at)
    assert created.expires_at == expires_at  # the same instant, whatever the offset sent
    assert created.expires_at.utcoffset() == timedelta(0)
    assert sdk.api_keys.retrieve(created.id).expires_at == expires_at


def test_create_with_explicit_nulls_is_an_org_wide_key_without_expiry(sdk):
    created = sdk.api_keys.create(name=unique("nulls"), days_to_expire=None, expires_at=None,
                                  project_id=None)
    assert created.expires_at is None and created.project_id is None


def test_name_is_trimmed_and_not_unique(sdk):
    name = unique("same")
    first = sdk.api_keys.create(name=name)
    second = sdk.api_keys.create(name=f"  {name} ")
    assert second.name == name
    assert first.id != second.id
    assert {k.id for k in sdk.api_keys.list(name=name)} == {first.id, second.id}


@pytest.mark.parametrize("kwargs", [
    {"name": ""},
    {"name": "   "},
    {"name": "x" * 256},
    {"days_to_expire": 0},
    {"days_to_expire": 3651},
    {"days_to_expire": 1, "expires_at": datetime.now(timezone.utc) + timedelta(days=2)},
    {"expires_at": datetime.now(timezone.utc) - timedelta(days=1)},
    {"project_id": ""},
    {"project_id": "no-such-project"},
], ids=["empty-name", "blank-name", "long-name", "days-0", "days-3651", "days-and-expires-at",
        "expires-at-past", "empty-project-id", "unknown-project-id"])
def test_create_rejects_invalid_input(sdk, kwargs):
    kwargs = {"name": unique("invalid"), **kwargs}
    with pytest.raises(kernel.BadRequestError) as caught:
        sdk.api_keys.create(**kwargs)
    assert caught.value.body["code"] == "bad_request"
    assert caught.value.body["message"]


def test_create_for_another_organizations_project_is_refused(sdk, new_org):
    [foreign] = list(new_org().projects.list())
    with pytest.raises(kernel.BadRequestError):
        sdk.api_keys.create(name=unique("foreign"), project_id=foreign.id)


def test_create_with_a_policy_is_refused_with_a_clear_reason(sdk):
    """Lantern does not enforce key policies, so it refuses them rather than store them unenforced."""
    statements = [{"action": "browsers:use", "resource": "projects/*/browsers/*"}]
    with pytest.raises(kernel.BadRequestError) as caught:
        sdk.api_keys.create(name=unique("policy"), policy={"statements": statements})
    detail = caught.value.body["details"][0]
    assert detail["field"] == "policy" and "not supported" in detail["message"]


def test_create_for_an_archived_project_is_refused(sdk, project):
    sdk.projects.update(project.id, status="archived")
    with pytest.raises(kernel.BadRequestError):
        sdk.api_keys.create(name=unique("archived"), project_id=project.id)


def test_a_key_cannot_issue_a_key_that_outlives_it(sdk, make_client):
    short = sdk.api_keys.create(name=unique("short"), days_to_expire=1)
    client = make_client(short.key)
    with pytest.raises(kernel.BadRequestError):
        client.api_keys.create(name=unique("longer"), days_to_expire=2)
    with pytest.raises(kernel.BadRequestError):
        client.api_keys.create(name=unique("forever"))
    shorter = client.api_keys.create(
        name=unique("shorter"), expires_at=datetime.now(timezone.utc) + timedelta(hours=1))
    assert shorter.expires_at < short.expires_at


def test_invalid_credentials_are_refused(make_client):
    with pytest.raises(kernel.AuthenticationError) as caught:
        make_client("sk_not-a-real-key").api_keys.list()
    assert caught.value.status_code == 401
    assert caught.value.body["code"]


# --- retrieve / update ---------------------------------------------------------------------------

def test_retrieve_unknown_or_foreign_key_is_not_found(sdk, new_org):
    with pytest.raises(kernel.NotFoundError):
        sdk.api_keys.retrieve("no-such-key")
    foreign = new_org().api_keys.create(name=unique("foreign"))
    with pytest.raises(kernel.NotFoundError):
        sdk.api_keys.retrieve(foreign.id)
    with pytest.raises(kernel.NotFoundError):
        sdk.api_keys.retrieve(foreign.id, include_deleted=True)


def test_update_renames(sdk, make_client):
    created = sdk.api_keys.create(name=unique("before"))
    new_name = unique("after")
    updated = sdk.api_keys.update(created.id, name=new_name)
    assert isinstance(updated, APIKey)
    assert updated.name == new_name
    assert updated.id == created.id and updated.masked_key == created.masked_key
    assert sdk.api_keys.retrieve(created.id).name == new_name
    # Renaming changes nothing about the credential.
    assert make_client(created.key).api_keys.retrieve(created.id).name == new_name
    with pytest.raises(kernel.BadRequestError):
        sdk.api_keys.update(created.id, name="")
    with pytest.raises(kernel.NotFoundError):
        sdk.api_keys.update("no-such-key", name=new_name)


# --- delete --------------------------------------------------------------------------------------

def test_delete_is_soft_and_visible_with_include_deleted(sdk, make_client):
    name = unique("doomed")
    created = sdk.api_keys.create(name=name)
    assert sdk.api_keys.delete(created.id) is None

    with pytest.raises(kernel.NotFoundError):
        sdk.api_keys.retrieve(created.id)
    with pytest.raises(kernel.NotFoundError):
        sdk.api_keys.retrieve(created.id, include_deleted=False)
    deleted = sdk.api_keys.retrieve(created.id, include_deleted=True)
    assert deleted.id == created.id and deleted.name == name
    assert deleted.deleted_at is not None and deleted.deleted_at >= created.created_at

    with pytest.raises(kernel.AuthenticationError):
        make_client(created.key).api_keys.list()
    with pytest.raises(kernel.NotFoundError):
        sdk.api_keys.delete(created.id)
    with pytest.raises(kernel.NotFoundError):
        sdk.api_keys.update(created.id, name=unique("renamed"))


def test_list_status_filters_deleted_keys(sdk):
    prefix = unique("status")
    live = sdk.api_keys.create(name=f"{prefix}-live")
    gone = sdk.api_keys.create(name=f"{prefix}-gone")
    sdk.api_keys.delete(gone.id)

    def ids(**kwargs):
        return {k.id for k in sdk.api_keys.list(query=prefix, **kwargs)}

    assert ids() == {live.id}
    assert ids(status="active") == {live.id}
    assert ids(status="deleted") == {gone.id}
    assert ids(status="all") == {live.id, gone.id}
    assert ids(include_deleted=True) == {live.id, gone.id}
    deleted = [k for k in sdk.api_keys.list(query=prefix, status="all") if k.id == gone.id]
    assert deleted[0].deleted_at is not None


def test_a_key_cannot_delete_itself(sdk, make_client):
    created = sdk.api_keys.create(name=unique("self"))
    own = make_client(created.key)
    with pytest.raises(kernel.APIStatusError) as caught:
        own.api_keys.delete(created.id)
    assert caught.value.status_code == 409
    assert isinstance(caught.value, kernel.ConflictError)
    assert caught.value.response.headers.get("x-should-retry") == "false"
    # Still alive, and another key may delete it.
    assert own.api_keys.retrieve(created.id).deleted_at is None
    sdk.api_keys.delete(created.id)


# --- list ----------------------------------------------------------------------------------------

def test_list_pages_through_every_key_once_in_order(sdk):
    prefix = unique("page")
    created = [sdk.api_keys.create(name=f"{prefix}-{i}") for i in range(5)]

    first = sdk.api_keys.list(query=prefix, limit=2, sort_by="created_at", sort_direction="asc")
    assert [k.id for k in first.items] == [k.id for k in created[:2]]
    assert first.has_next_page()
    assert len(list(first.iter_pages())) == 3
    assert [k.id for k in first] == [k.id for k in created]

    newest_first = sdk.api_keys.list(query=prefix, limit=2, sort_by="created_at", sort_direction="desc")
    assert [k.id for k in newest_first] == [k.id for k in reversed(created)]
    by_name = sdk.api_keys.list(query=prefix, limit=3, sort_by="name", sort_direction="desc")
    assert [k.name for k in by_name] == sorted((k.name for k in created), reverse=True)

    raw = sdk.api_keys.with_raw_response.list(query=prefix, limit=2, offset=4)
    assert raw.headers["x-has-more"] == "false"
    assert raw.headers.get("x-next-offset", "0") == "0"
    assert [k.id for k in raw.parse().items] == [created[0].id]  # default order: newest first


def test_list_filters_by_exact_name_and_query(sdk, project):
    prefix = unique("filter")
    plain = sdk.api_keys.create(name=f"{prefix}-alpha")
    scoped = sdk.api_keys.create(name=f"{prefix}-beta", project_id=project.id)

    assert [k.id for k in sdk.api_keys.list(name=f"{prefix}-ALPHA")] == [plain.id]
    assert list(sdk.api_keys.list(name=prefix)) == []
    assert {k.id for k in sdk.api_keys.list(query=prefix.upper())} == {plain.id, scoped.id}
    assert [k.id for k in sdk.api_keys.list(query=plain.id)] == [plain.id]
    assert plain.id in {k.id for k in sdk.api_keys.list(query=plain.masked_key, limit=100)}
    assert scoped.id in {k.id for k in sdk.api_keys.list(query=project.name, limit=100)}
    listed = [k for k in sdk.api_keys.list(query=prefix) if k.id == scoped.id][0]
    assert listed.project_id == project.id and listed.project_name == project.name


def test_list_rejects_invalid_sort_and_status(sdk):
    with pytest.raises(kernel.BadRequestError):
        sdk.api_keys.list(sort_by="color")
    with pytest.raises(kernel.BadRequestError):
        sdk.api_keys.list(status="sleeping")


# --- rotate --------------------------------------------------------------------------------------

def test_rotate_issues_a_successor_and_keeps_the_old_key_for_the_grace_period(sdk, make_client):
    old = sdk.api_keys.create(name=unique("rotate"))
    new = sdk.api_keys.rotate(old.id)  # the SDK sends {}

    assert isinstance(new, CreatedAPIKey)
    assert new.id != old.id and new.key != old.key
    assert new.name == old.name and new.project_id is None
    assert new.expires_at is None  # the old key never expired, neither does its successor
    assert new.masked_key.endswith(new.key[-4:])

    retired = sdk.api_keys.retrieve(old.id)
    assert close_to(retired.expires_at, new.created_at + timedelta(days=7))
    assert retired.deleted_at is None
    # Both work during the grace period.
    assert make_client(old.key).api_keys.retrieve(old.id).id == old.id
    assert make_client(new.key).api_keys.retrieve(new.id).id == new.id


def test_rotate_with_expire_in_days_0_retires_the_old_key_at_once(sdk, make_client):
    old = sdk.api_keys.create(name=unique("rotate-now"))
    old_client = make_client(old.key)
    assert old_client.api_keys.retrieve(old.id).id == old.id

    new = sdk.api_keys.rotate(old.id, expire_in_days=0)
    with pytest.raises(kernel.AuthenticationError):
        old_client.api_keys.retrieve(old.id)
    assert make_client(new.key).api_keys.retrieve(new.id).name == old.name
    retired = sdk.api_keys.retrieve(old.id)
    assert retired.expires_at is not None and retired.expires_at <= new.created_at + SLACK
    # An expired key is still listed among active (not deleted) keys.
    assert old.id in {k.id for k in sdk.api_keys.list(name=old.name)}


def test_rotate_by_the_key_itself(sdk, make_client):
    old = sdk.api_keys.create(name=unique("self-rotate"))
    new = make_client(old.key).api_keys.rotate(old.id, expire_in_days=1)
    assert new.name == old.name
    assert close_to(sdk.api_keys.retrieve(old.id).expires_at, new.created_at + timedelta(days=1))


def test_rotate_with_days_to_expire_and_grace(sdk):
    old = sdk.api_keys.create(name=unique("rotate-days"))
    new = sdk.api_keys.rotate(old.id, days_to_expire=90, expire_in_days=2)
    assert abs(new.expires_at - new.created_at - timedelta(days=90)) < timedelta(seconds=5)
    assert close_to(sdk.api_keys.retrieve(old.id).expires_at, new.created_at + timedelta(days=2))


def test_rotate_reuses_the_original_lifetime(sdk):
    old = sdk.api_keys.create(name=unique("rotate-lifetime"), days_to_expire=30)
    new = sdk.api_keys.rotate(old.id, days_to_expire=None, expire_in_days=None)
    assert abs(new.expires_at - new.created_at - timedelta(days=30)) < timedelta(seconds=5)
    # The grace period (7 days) ends before the old key's own expiry (30 days), so it moves up.
    assert close_to(sdk.api_keys.retrieve(old.id).expires_at, new.created_at + timedelta(days=7))


def test_rotate_keeps_the_project(sdk, project, make_client):
    old = sdk.api_keys.create(name=unique("rotate-scoped"), project_id=project.id)
    new = sdk.api_keys.rotate(old.id)
    assert new.project_id == project.id and new.project_name == project.name
    assert [p.id for p in make_client(new.key).projects.list()] == [project.id]


@pytest.mark.parametrize("kwargs", [
    {"days_to_expire": 0},
    {"days_to_expire": 3651},
    {"expire_in_days": -1},
    {"expire_in_days": 3651},
    {"days_to_expire": 1, "expire_in_days": 2},
], ids=["days-0", "days-3651", "grace-negative", "grace-3651", "days-shorter-than-grace"])
def test_rotate_rejects_invalid_input(sdk, kwargs):
    old = sdk.api_keys.create(name=unique("rotate-invalid"))
    with pytest.raises(kernel.BadRequestError):
        sdk.api_keys.rotate(old.id, **kwargs)
    assert sdk.api_keys.retrieve(old.id).expires_at is None


def test_rotate_unknown_or_deleted_key(sdk):
    with pytest.raises(kernel.NotFoundError):
        sdk.api_keys.rotate("no-such-key")
    gone = sdk.api_keys.create(name=unique("rotate-gone"))
    sdk.api_keys.delete(gone.id)
    with pytest.raises(kernel.ConflictError) as caught:
        sdk.api_keys.rotate(gone.id)
    assert caught.value.response.headers.get("x-should-retry") == "false"


def test_an_expired_key_cannot_be_rotated_again(sdk):
    old = sdk.api_keys.create(name=unique("rotate-twice"))
    sdk.api_keys.rotate(old.id, expire_in_days=0)
    with pytest.raises(kernel.ConflictError):
        sdk.api_keys.rotate(old.id)
    assert len(list(sdk.api_keys.list(name=old.name))) == 2


def test_rotate_may_not_outlive_the_calling_key(sdk, make_client):
    """Like create: a key may not mint a successor that expires after the key itself."""
    short = sdk.api_keys.create(name=unique("short-rotator"), days_to_expire=1)
    forever = sdk.api_keys.create(name=unique("rotated-forever"))
    client = make_client(short.key)
    with pytest.raises(kernel.BadRequestError):
        client.api_keys.rotate(forever.id)
    with pytest.raises(kernel.BadRequestError):
        client.api_keys.rotate(short.id, days_to_expire=3650)


# --- project-scoped keys ---------------------------------------------------------------------------

def test_project_scoped_key_sees_and_issues_only_its_project(sdk, project, make_client):
    scoped_key = sdk.api_keys.create(name=unique("scoped"), project_id=project.id)
    assert scoped_key.project_id == project.id and scoped_key.project_name == project.name
    org_wide = sdk.api_keys.create(name=unique("org-wide"))
    scoped = make_client(scoped_key.key)

    listed = list(scoped.api_keys.list(limit=100))
    assert scoped_key.id in {k.id for k in listed}
    assert all(k.project_id == project.id for k in listed)
    with pytest.raises(kernel.NotFoundError):
        scoped.api_keys.retrieve(org_wide.id)
    with pytest.raises(kernel.NotFoundError):
        scoped.api_keys.rotate(org_wide.id)
    with pytest.raises(kernel.NotFoundError):
        scoped.api_keys.delete(org_wide.id)

    # Keys it issues inherit its project; it cannot issue for another one or org-wide.
    child = scoped.api_keys.create(name=unique("child"))
    assert child.project_id == project.id
    same = scoped.api_keys.create(name=unique("child"), project_id=project.id)
    assert same.project_id == project.id
    explicit_null = scoped.api_keys.create(name=unique("child"), project_id=None)
    assert explicit_null.project_id == project.id  # never an organization-wide key
    other = sdk.projects.create(name=unique("other-project"))
    with pytest.raises(kernel.PermissionDeniedError):
        scoped.api_keys.create(name=unique("elsewhere"), project_id=other.id)


def test_a_key_scoped_to_an_archived_project_stops_working_until_reactivated(sdk, project, make_client):
    key = sdk.api_keys.create(name=unique("scoped-archived"), project_id=project.id)
    scoped = make_client(key.key)
    sdk.projects.update(project.id, status="archived")
    with pytest.raises(kernel.AuthenticationError) as caught:  # like any unusable key: nothing about the project
        scoped.api_keys.retrieve(key.id)
    assert caught.value.body["code"] == "unauthorized"
    sdk.projects.update(project.id, status="active")
    assert scoped.api_keys.retrieve(key.id).id == key.id


def test_plaintext_keys_never_reach_the_server_log(sdk, make_client, live_server):
    created = sdk.api_keys.create(name=unique("logged"))
    make_client(created.key).organization.limits.retrieve()
    rotated = sdk.api_keys.rotate(created.id)
    log = live_server.log_path.read_text()
    assert "GET /org/limits 200" in log, "requests are logged"
    assert created.key not in log and rotated.key not in log and live_server.api_key not in log
