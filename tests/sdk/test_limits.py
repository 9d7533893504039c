"""client.projects.limits.* and client.organization.limits.* through the official SDK."""
import kernel
import pytest
from kernel.types.organization import OrgLimits
from kernel.types.projects import ProjectLimits

from tests.sdk.conftest import ORG_MAX_CONCURRENT_SESSIONS, unique


def caps(limits):
    return (limits.max_concurrent_sessions, limits.max_concurrent_invocations, limits.max_pooled_sessions)


# --- project limits ------------------------------------------------------------------------------

def test_a_new_project_has_no_caps(sdk, project):
    limits = sdk.projects.limits.retrieve(project.id)
    assert isinstance(limits, ProjectLimits)
    assert caps(limits) == (None, None, None)


def test_update_changes_only_present_fields_and_0_removes_a_cap(sdk, project):
    limits = sdk.projects.limits
    assert caps(limits.update(project.id, max_concurrent_sessions=3)) == (3, None, None)
    assert caps(limits.update(project.id, max_concurrent_invocations=2)) == (3, 2, None)
    assert caps(limits.retrieve(project.id)) == (3, 2, None)
    assert caps(limits.retrieve(project.name)) == (3, 2, None)

    assert caps(limits.update(project.id)) == (3, 2, None)  # nothing sent, nothing changes
    assert caps(limits.update(project.name, max_concurrent_sessions=5, max_concurrent_invocations=7)) == (5, 7, None)
    assert caps(limits.update(project.id, max_concurrent_sessions=0)) == (None, 7, None)
    assert caps(limits.update(project.id, max_concurrent_invocations=None)) == (None, None, None)
    assert caps(limits.retrieve(project.id)) == (None, None, None)


def test_limits_belong_to_one_project(sdk, project):
    other = sdk.projects.create(name=unique("limits-other"))
    sdk.projects.limits.update(project.id, max_concurrent_sessions=4)
    assert caps(sdk.projects.limits.retrieve(other.id)) == (None, None, None)


def test_max_pooled_sessions_is_deprecated_and_cannot_be_set(sdk, project):
    sdk.projects.limits.update(project.id, max_concurrent_sessions=2)
    with pytest.raises(kernel.BadRequestError) as caught:
        sdk.projects.limits.update(project.id, max_pooled_sessions=5)
    assert caught.value.body["code"] == "bad_request"
    # Rejected as a whole: the valid field beside it does not change either.
    with pytest.raises(kernel.BadRequestError):
        sdk.projects.limits.update(project.id, max_concurrent_sessions=9, max_pooled_sessions=1)
    assert caps(sdk.projects.limits.retrieve(project.id)) == (2, None, None)
    # null is what it always is, so sending it is harmless.
    assert caps(sdk.projects.limits.update(project.id, max_pooled_sessions=None)) == (2, None, None)


@pytest.mark.parametrize("kwargs", [{"max_concurrent_sessions": -1}, {"max_concurrent_invocations": -5}])
def test_negative_caps_are_rejected(sdk, project, kwargs):
    with pytest.raises(kernel.BadRequestError):
        sdk.projects.limits.update(project.id, **kwargs)
    assert caps(sdk.projects.limits.retrieve(project.id)) == (None, None, None)


def test_limits_of_unknown_or_deleted_projects_are_not_found(sdk, project):
    sdk.projects.delete(project.id)
    for ref in ("no-such-project", project.id, project.name):
        with pytest.raises(kernel.NotFoundError):
            sdk.projects.limits.retrieve(ref)
        with pytest.raises(kernel.NotFoundError):
            sdk.projects.limits.update(ref, max_concurrent_sessions=1)


def test_limits_of_an_archived_project_stay_readable(sdk, project):
    sdk.projects.limits.update(project.id, max_concurrent_invocations=3)
    sdk.projects.update(project.id, status="archived")
    assert caps(sdk.projects.limits.retrieve(project.id)) == (None, 3, None)


# --- organization limits -------------------------------------------------------------------------

def test_org_limits_of_a_new_organization(new_org):
    limits = new_org().organization.limits.retrieve()
    assert isinstance(limits, OrgLimits)
    assert limits.max_concurrent_sessions == ORG_MAX_CONCURRENT_SESSIONS
    assert limits.default_project_max_concurrent_sessions is None
    assert limits.concurrent_sessions_used == 0
    assert limits.concurrent_sessions_available == ORG_MAX_CONCURRENT_SESSIONS
    assert limits.auth_connections_used == 0
    assert limits.vaults_used == 0
    assert limits.min_health_check_interval_seconds > 0


def test_org_limits_update_default_project_cap(new_org):
    org = new_org()
    limits = org.organization.limits

    updated = limits.update(default_project_max_concurrent_sessions=4)
    assert isinstance(updated, OrgLimits)
    assert updated.default_project_max_concurrent_sessions == 4
    assert updated.max_concurrent_sessions == ORG_MAX_CONCURRENT_SESSIONS
    assert limits.retrieve().default_project_max_concurrent_sessions == 4
    assert limits.update().default_project_max_concurrent_sessions == 4  # omitted: unchanged

    with pytest.raises(kernel.BadRequestError) as caught:
        limits.update(default_project_max_concurrent_sessions=ORG_MAX_CONCURRENT_SESSIONS + 1)
    assert caught.value.body["code"] == "bad_request"
    with pytest.raises(kernel.BadRequestError):
        limits.update(default_project_max_concurrent_sessions=-1)
    assert limits.retrieve().default_project_max_concurrent_sessions == 4

    at_limit = limits.update(default_project_max_concurrent_sessions=ORG_MAX_CONCURRENT_SESSIONS)
    assert at_limit.default_project_max_concurrent_sessions == ORG_MAX_CONCURRENT_SESSIONS
    assert limits.update(default_project_max_concurrent_sessions=0).default_project_max_concurrent_sessions is None
    limits.update(default_project_max_concurrent_sessions=2)
    assert limits.update(default_project_max_concurrent_sessions=None).default_project_max_concurrent_sessions is None
    assert limits.retrieve().default_project_max_concurrent_sessions is None


def test_org_limits_are_per_organization(sdk, new_org):
    shared_default = sdk.organization.limits.retrieve().default_project_max_concurrent_sessions
    new_org().organization.limits.update(default_project_max_concurrent_sessions=3)
    assert sdk.organization.limits.retrieve().default_project_max_concurrent_sessions == shared_default


def test_without_an_org_limit_any_default_cap_is_accepted(live_server, new_org):
    name = unique("unlimited")
    org = new_org(name)
    live_server.cli("orgs", "set-limit", "--org", name, "--max-concurrent-sessions", "0")

    limits = org.organization.limits.retrieve()
    assert limits.max_concurrent_sessions is None
    assert limits.concurrent_sessions_available is None
    updated = org.organization.limits.update(default_project_max_concurrent_sessions=1000)
    assert updated.default_project_max_concurrent_sessions == 1000


def test_project_caps_are_independent_of_the_org_default(new_org):
    org = new_org()
    [default] = list(org.projects.list())
    org.organization.limits.update(default_project_max_concurrent_sessions=2)
    limits = org.projects.limits.update(default.id, max_concurrent_sessions=8)
    assert limits.max_concurrent_sessions == 8
    assert org.organization.limits.retrieve().default_project_max_concurrent_sessions == 2
