"""client.projects.* and the project headers through the official SDK against the live server."""
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import kernel
import pytest
from kernel.types import Project

from tests.sdk.conftest import unique


def ids(items):
    return [item.id for item in items]


def counting_client(make_client, api_key, max_retries=2):
    """A client that retries like the SDK's default, and a list of the requests it sent."""
    sent = []
    http_client = httpx.Client(event_hooks={"request": [lambda request: sent.append(request)]})
    return make_client(api_key, max_retries=max_retries, http_client=http_client), sent


# --- create / retrieve / update ------------------------------------------------------------------

def test_create_retrieve_by_id_and_name(sdk):
    name = unique("Project")
    created = sdk.projects.create(name=name)
    assert isinstance(created, Project)
    assert created.name == name and created.status == "active" and created.id
    assert created.updated_at >= created.created_at

    assert sdk.projects.retrieve(created.id) == created
    assert sdk.projects.retrieve(name) == created
    assert sdk.projects.retrieve(name.upper()) == created  # names compare case-insensitively
    assert created in list(sdk.projects.list(name=name))


def test_unicode_and_spaced_names_work_in_paths(sdk):
    name = unique("Zoë's project 🚀 #1?")
    created = sdk.projects.create(name=name)
    assert created.name == name
    assert sdk.projects.retrieve(name).id == created.id
    assert sdk.projects.limits.retrieve(name).max_concurrent_sessions is None


def test_update_renames_archives_and_reactivates(sdk):
    created = sdk.projects.create(name=unique("before"))
    new_name = unique("after")

    renamed = sdk.projects.update(created.id, name=new_name)
    assert renamed.id == created.id and renamed.name == new_name and renamed.status == "active"
    assert renamed.created_at == created.created_at
    assert renamed.updated_at >= created.updated_at
    assert sdk.projects.retrieve(new_name).id == created.id
    with pytest.raises(kernel.NotFoundError):
        sdk.projects.retrieve(created.name)

    archived = sdk.projects.update(new_name, status="archived")  # by name
    assert archived.status == "archived" and archived.name == new_name
    assert sdk.projects.retrieve(created.id).status == "archived"
    assert [p.status for p in sdk.projects.list(name=new_name)] == ["archived"]

    both = sdk.projects.update(created.id, status="active", name=created.name)
    assert both.status == "active" and both.name == created.name
    assert sdk.projects.update(created.id) == sdk.projects.retrieve(created.id)  # empty body: unchanged fields


@pytest.mark.parametrize("name", ["", "   ", "a/b", "50%", "x" * 256],
                         ids=["empty", "blank", "slash", "percent", "long"])
def test_invalid_names_are_rejected(sdk, name):
    with pytest.raises(kernel.BadRequestError) as caught:
        sdk.projects.create(name=name)
    assert caught.value.body["code"] == "bad_request"
    project = sdk.projects.create(name=unique("valid"))
    with pytest.raises(kernel.BadRequestError):
        sdk.projects.update(project.id, name=name)


def test_longest_name_is_accepted(sdk):
    name = unique("long") + "é" * (255 - 13)
    assert len(name) == 255
    assert sdk.projects.create(name=name).name == name


def test_invalid_status_is_rejected(sdk):
    project = sdk.projects.create(name=unique("status"))
    with pytest.raises(kernel.BadRequestError):
        sdk.projects.update(project.id, status="paused")  # type: ignore[arg-type]


def test_unknown_project_is_not_found(sdk):
    for call in (sdk.projects.retrieve, sdk.projects.delete, sdk.projects.limits.retrieve):
        with pytest.raises(kernel.NotFoundError) as caught:
            call("no-such-project")
        assert caught.value.body["code"] == "project_not_found"
    with pytest.raises(kernel.NotFoundError):
        sdk.projects.update("no-such-project", name=unique("x"))


def test_name_conflict_is_a_409_that_must_not_be_retried(sdk, live_server, make_client):
    name = unique("Taken")
    existing = sdk.projects.create(name=name)

    for duplicate in (name, name.lower(), f" {name.upper()} "):
        with pytest.raises(kernel.ConflictError) as caught:
            sdk.projects.create(name=duplicate)
        assert caught.value.status_code == 409
        assert caught.value.response.headers.get("x-should-retry") == "false"
        assert caught.value.body["code"]

    other = sdk.projects.create(name=unique("other"))
    with pytest.raises(kernel.ConflictError):
        sdk.projects.update(other.id, name=name)

    # With the SDK's default retries, the 409 is still sent exactly once.
    client, sent = counting_client(make_client, live_server.api_key)
    with pytest.raises(kernel.ConflictError):
        client.projects.create(name=name)
    assert len(sent) == 1

    # A project may be renamed to its own name in another case.
    assert sdk.projects.update(existing.id, name=name.upper()).name == name.upper()


def test_deleted_projects_free_their_name(sdk):
    name = unique("reused")
    first = sdk.projects.create(name=name)
    sdk.projects.delete(first.id)
    second = sdk.projects.create(name=name)
    assert second.id != first.id
    assert sdk.projects.retrieve(name).id == second.id


# --- list ----------------------------------------------------------------------------------------

def test_list_pages_through_every_project_once_in_order(sdk):
    prefix = unique("paged")
    created = [sdk.projects.create(name=f"{prefix}-{i}") for i in range(5)]

    first = sdk.projects.list(query=prefix, limit=2)
    assert ids(first.items) == ids(created[:2])
    assert first.has_next_page()
    pages = list(first.iter_pages())
    assert [len(page.items) for page in pages] == [2, 2, 1]
    assert ids(first) == ids(created)
    assert ids(sdk.projects.list(query=prefix.upper(), limit=1)) == ids(created)
    assert ids(sdk.projects.list(query=prefix, offset=3)) == ids(created[3:])

    raw = sdk.projects.with_raw_response.list(query=prefix, limit=2)
    assert raw.headers["x-has-more"] == "true"
    assert raw.headers["x-next-offset"] == "2"
    last = sdk.projects.with_raw_response.list(query=prefix, limit=2, offset=4)
    assert last.headers["x-has-more"] == "false"
    assert last.headers.get("x-next-offset", "0") == "0"
    assert ids(last.parse().items) == ids(created[4:])


def test_list_filters(sdk):
    prefix = unique("filtered")
    alpha = sdk.projects.create(name=f"{prefix}-Alpha")
    beta = sdk.projects.create(name=f"{prefix}-Beta")

    assert ids(sdk.projects.list(name=f"{prefix}-alpha")) == [alpha.id]
    assert ids(sdk.projects.list(name=prefix)) == []  # exact, not a substring
    assert ids(sdk.projects.list(query=f"{prefix}-b")) == [beta.id]
    assert ids(sdk.projects.list(query=prefix)) == [alpha.id, beta.id]
    everything = ids(sdk.projects.list(limit=100))
    assert alpha.id in everything and beta.id in everything


@pytest.mark.parametrize("kwargs", [{"limit": 0}, {"limit": 101}, {"offset": -1}])
def test_list_rejects_out_of_range_paging(sdk, kwargs):
    with pytest.raises(kernel.BadRequestError):
        sdk.projects.list(**kwargs)


# --- delete --------------------------------------------------------------------------------------

def test_delete_is_soft_and_hides_the_project(sdk):
    project = sdk.projects.create(name=unique("doomed"))
    assert sdk.projects.delete(project.id) is None
    with pytest.raises(kernel.NotFoundError):
        sdk.projects.retrieve(project.id)
    with pytest.raises(kernel.NotFoundError):
        sdk.projects.delete(project.id)
    assert ids(sdk.projects.list(name=project.name)) == []
    with pytest.raises(kernel.NotFoundError):
        sdk.with_options(project_id=project.id).projects.list()


def test_delete_by_name_and_of_an_archived_project(sdk):
    project = sdk.projects.create(name=unique("archived-doomed"))
    sdk.projects.update(project.id, status="archived")
    sdk.projects.delete(project.name)
    with pytest.raises(kernel.NotFoundError):
        sdk.projects.retrieve(project.id)


def test_a_project_with_a_live_key_cannot_be_deleted(sdk):
    project = sdk.projects.create(name=unique("busy"))
    key = sdk.api_keys.create(name=unique("busy-key"), project_id=project.id)

    with pytest.raises(kernel.ConflictError) as caught:
        sdk.projects.delete(project.id)
    assert caught.value.body["code"] == "project_not_empty"
    assert caught.value.response.headers.get("x-should-retry") == "false"
    assert sdk.projects.retrieve(project.id).status == "active"

    sdk.api_keys.delete(key.id)
    sdk.projects.delete(project.id)
    with pytest.raises(kernel.NotFoundError):
        sdk.projects.retrieve(project.id)


def test_a_project_whose_only_key_expired_can_be_deleted(sdk):
    project = sdk.projects.create(name=unique("expired-key"))
    key = sdk.api_keys.create(name=unique("expiring"), project_id=project.id)
    successor = sdk.api_keys.rotate(key.id, expire_in_days=0)
    with pytest.raises(kernel.ConflictError):  # the successor lives in the project
        sdk.projects.delete(project.id)
    sdk.api_keys.delete(successor.id)
    sdk.projects.delete(project.id)


def test_the_last_active_project_cannot_be_deleted_or_archived(new_org):
    org = new_org()
    [default] = list(org.projects.list())
    assert default.status == "active"

    for attempt in (lambda: org.projects.delete(default.id),
                    lambda: org.projects.update(default.id, status="archived")):
        with pytest.raises(kernel.ConflictError) as caught:
            attempt()
        assert caught.value.body["code"] == "last_active_project"
        assert caught.value.response.headers.get("x-should-retry") == "false"

    # With a second active project the first may go; requests without a project header keep working.
    second = org.projects.create(name=unique("second"))
    archived = org.projects.create(name=unique("archived"))
    org.projects.update(archived.id, status="archived")
    org.projects.delete(default.id)
    assert ids(org.projects.list()) == [second.id, archived.id]
    assert org.organization.limits.retrieve().concurrent_sessions_used == 0

    # An archived project does not count as active.
    with pytest.raises(kernel.ConflictError) as caught:
        org.projects.delete(second.id)
    assert caught.value.body["code"] == "last_active_project"
    with pytest.raises(kernel.ConflictError):
        org.projects.update(second.id, status="archived")

    # Reactivating the archived one makes the other deletable again.
    org.projects.update(archived.id, status="active")
    org.projects.delete(second.id)
    assert ids(org.projects.list()) == [archived.id]


def test_archiving_the_default_project_hands_over_the_default(new_org):
    org = new_org()
    [default] = list(org.projects.list())
    other = org.projects.create(name=unique("next"))
    org.projects.update(default.id, status="archived")
    # Requests without a project header act in the new default instead of failing.
    assert org.organization.limits.retrieve().max_concurrent_sessions is not None
    assert {p.id for p in org.projects.list()} == {default.id, other.id}


# --- project headers (X-Kernel-Project-Id / X-Kernel-Project) -------------------------------------

def test_project_headers_for_an_org_wide_key(sdk, new_org):
    project = sdk.projects.create(name=unique("header"))

    for options in ({"project_id": project.id}, {"project": project.id}, {"project": project.name},
                    {"project": project.name.upper()}, {"project_id": project.id, "project": project.name}):
        assert project.id in ids(sdk.with_options(**options).projects.list(limit=100)), options

    for options in ({"project_id": "no-such-project"}, {"project": "no-such-project"},
                    {"project_id": project.name}):  # names are not accepted as ids
        with pytest.raises(kernel.NotFoundError) as caught:
            sdk.with_options(**options).projects.list()
        assert caught.value.body["code"] == "project_not_found", options

    def foreign_projects():
        # Another organization's project is unknown here, by id or by name.
        return list(new_org().projects.list())

    [foreign] = foreign_projects()
    for options in ({"project_id": foreign.id}, {"project": foreign.id}):
        with pytest.raises(kernel.NotFoundError):
            sdk.with_options(**options).projects.list()
    with pytest.raises(kernel.NotFoundError):
        sdk.projects.retrieve(foreign.id)

    other = sdk.projects.create(name=unique("header-other"))
    with pytest.raises(kernel.BadRequestError):
        sdk.with_options(project_id=project.id, project=other.name).projects.list()

    sdk.projects.update(project.id, status="archived")
    with pytest.raises(kernel.NotFoundError) as caught:
        sdk.with_options(project_id=project.id).projects.list()
    assert caught.value.body["code"] == "project_not_found"


def test_project_headers_for_a_project_scoped_key(sdk, make_client):
    project = sdk.projects.create(name=unique("scoped-header"))
    other = sdk.projects.create(name=unique("scoped-other"))
    key = sdk.api_keys.create(name=unique("scoped"), project_id=project.id)
    scoped = make_client(key.key)

    assert ids(scoped.projects.list()) == [project.id]
    assert ids(scoped.with_options(project_id=project.id).projects.list()) == [project.id]
    assert ids(scoped.with_options(project=project.name).projects.list()) == [project.id]

    for options in ({"project_id": other.id}, {"project": other.name}, {"project": other.id}):
        with pytest.raises(kernel.PermissionDeniedError) as caught:
            scoped.with_options(**options).api_keys.list()
        assert caught.value.status_code == 403, options
    with pytest.raises(kernel.NotFoundError):
        scoped.with_options(project_id="no-such-project").projects.list()


def test_a_project_scoped_key_cannot_administer_projects(sdk, make_client):
    project = sdk.projects.create(name=unique("scoped-admin"))
    other = sdk.projects.create(name=unique("scoped-admin-other"))
    key = sdk.api_keys.create(name=unique("scoped"), project_id=project.id)
    scoped = make_client(key.key)

    assert scoped.projects.retrieve(project.id) == sdk.projects.retrieve(project.id)
    assert scoped.projects.limits.retrieve(project.id).max_concurrent_sessions is None
    with pytest.raises(kernel.NotFoundError):
        scoped.projects.retrieve(other.id)
    with pytest.raises(kernel.NotFoundError):
        scoped.projects.limits.retrieve(other.name)

    forbidden = (
        lambda: scoped.projects.create(name=unique("nope")),
        lambda: scoped.projects.update(project.id, name=unique("nope")),
        lambda: scoped.projects.update(project.id, status="archived"),
        lambda: scoped.projects.delete(project.id),
        lambda: scoped.projects.limits.update(project.id, max_concurrent_sessions=1),
        lambda: scoped.organization.limits.update(default_project_max_concurrent_sessions=1),
    )
    for attempt in forbidden:
        with pytest.raises(kernel.PermissionDeniedError):
            attempt()
    assert sdk.projects.retrieve(project.id).name == project.name
    assert sdk.projects.limits.retrieve(project.id).max_concurrent_sessions is None


# --- concurrent requests (the rules hold under the real server's concurrency) ------------------------

def race(*calls):
    """Start `calls` together on threads; returns each one's result or exception, in order."""
    barrier = threading.Barrier(len(calls))

    def run(call):
        barrier.wait(timeout=10)
        try:
            return call()
        except kernel.APIStatusError as error:
            return error

    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        return list(pool.map(run, calls))


def test_concurrent_creates_of_one_name_make_one_project(sdk):
    name = unique("race")
    outcomes = race(*[lambda: sdk.projects.create(name=name)] * 5)
    created = [o for o in outcomes if isinstance(o, Project)]
    assert len(created) == 1, outcomes
    assert all(isinstance(o, kernel.ConflictError) for o in outcomes if o not in created), outcomes
    assert ids(sdk.projects.list(name=name)) == [created[0].id]


def test_concurrent_deletes_and_archives_keep_one_active_project(new_org):
    org = new_org()
    [survivor] = list(org.projects.list())
    remove = (lambda p: lambda: org.projects.delete(p.id),
              lambda p: lambda: org.projects.update(p.id, status="archived"))
    for round_ in range(6):
        newcomer = org.projects.create(name=unique(f"round{round_}"))
        first, second = remove[round_ % 2], remove[(round_ // 2) % 2]
        outcomes = race(first(survivor), second(newcomer))
        failed = [o for o in outcomes if isinstance(o, kernel.APIStatusError)]
        assert len(failed) == 1, outcomes
        assert isinstance(failed[0], kernel.ConflictError) and failed[0].body["code"] == "last_active_project"
        active = [p for p in org.projects.list(limit=100) if p.status == "active"]
        assert len(active) == 1, active
        survivor = active[0]
        assert org.projects.list().items  # requests without a project header still resolve
