"""A session's tenant cgroup (browserhost/cgroups.py) on cgroup trees made in a tmp folder, v1 and v2: its caps,
where each kind of process joins, the room a session has, and whose OOM kills count as the session's."""
import pytest

from browserhost import cgroups
from browserhost.cgroups import Cgroup

MIB = 1024 * 1024


@pytest.fixture(params=["v1", "v2"])
def tree(request, tmp_path, monkeypatch):
    """A cgroup root of the version asked in tmp_path (v2: its cgroup.controllers names the controllers)."""
    monkeypatch.setattr(cgroups, "CGROUP_ROOT", tmp_path)
    if request.param == "v2":
        (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    else:
        for controller in ("memory", "pids", "cpu"):
            (tmp_path / controller).mkdir()
    return request.param


def test_the_tenant_has_three_quarters_of_the_memory_half_the_pids_and_no_swap(tree, tmp_path):
    cgroup = Cgroup("lantern-s1")
    cgroup.create(1000 * MIB, 1024, 1.0)
    if tree == "v2":
        session = tmp_path / "lantern" / "lantern-s1"
        assert (session / "cgroup.subtree_control").read_text() == "+memory +pids +cpu"
        assert (session / "memory.max").read_text() == str(1000 * MIB)
        assert (session / "tenant" / "memory.swap.max").read_text() == "0"
        # Its own processes in a leaf beside the tenant's: a v2 cgroup with processes gives its children nothing.
        assert cgroup.procs_files() == [str(session / "own" / "cgroup.procs")]
        assert cgroup.procs_files(tenant=True) == [str(session / "tenant" / "cgroup.procs")]
    else:
        assert cgroup.procs_files() == [str(tmp_path / c / "lantern" / "lantern-s1" / "cgroup.procs")
                                        for c in ("memory", "pids", "cpu")]
        assert cgroup.procs_files(tenant=True) == [str(tmp_path / c / "lantern" / "lantern-s1" / "tenant" /
                                                       "cgroup.procs") for c in ("memory", "pids", "cpu")]
        memsw = tmp_path / "memory" / "lantern" / "lantern-s1" / "tenant" / "memory.memsw.limit_in_bytes"
        assert memsw.read_text() == str(750 * MIB)  # memory and swap together: no swap
    assert cgroup.tenant_limits() == (750 * MIB, 512)


def write_usage(tree, folder, anon, shmem, cap=None):
    names = ("anon", "shmem") if tree == "v2" else ("total_rss", "total_shmem")
    (folder / "memory.stat").write_text(f"{names[0]} {anon}\nfile 999999999\n{names[1]} {shmem}\n")
    if cap is not None:
        (folder / ("memory.max" if tree == "v2" else "memory.limit_in_bytes")).write_text(str(cap))


def test_the_room_is_the_least_left_of_the_session_and_its_tenant_less_the_agents_headroom(tree):
    """The agent keeps cgroups.AGENT_HEADROOM of the tenant's memory: files cannot fill it so full that the agent
    is killed at its next allocation."""
    assert cgroups.AGENT_HEADROOM == 64 * MIB
    cgroup = Cgroup("lantern-s1")
    cgroup.create(1000 * MIB, 1024)
    session, tenant = cgroup.folders()[0], cgroup.tenant_folders()[0]
    write_usage(tree, session, 100 * MIB, 50 * MIB)  # what can be reclaimed (file pages) is room
    write_usage(tree, tenant, 10 * MIB, 20 * MIB)
    assert cgroup.memory_left() == 720 * MIB  # the tenant's 750 less its 30
    assert cgroup.room() == 656 * MIB
    write_usage(tree, session, 500 * MIB, 400 * MIB)  # the browser holds most of the session
    assert cgroup.memory_left() == 100 * MIB and cgroup.room() == 36 * MIB
    write_usage(tree, tenant, 10 * MIB, 700 * MIB)
    assert cgroup.memory_left() == 40 * MIB and cgroup.room() == 0
    write_usage(tree, tenant, 10 * MIB, 800 * MIB)
    assert cgroup.memory_left() < 0 and cgroup.room() == 0
    if tree == "v2":
        write_usage(tree, session, 0, 0, cap="max")
        write_usage(tree, tenant, 0, 0)
        assert cgroup.room() == 686 * MIB


def test_the_tenants_processes_are_not_the_sessions_own_and_its_oom_kills_are_not_the_browsers(tree):
    cgroup = Cgroup("lantern-s1")
    cgroup.create(1000 * MIB, 1024)
    own, tenant = cgroup.own_folders()[0], cgroup.tenant_folders()[0]
    (own / "cgroup.procs").write_text("11\n12\n")
    (tenant / "cgroup.procs").write_text("21\n")
    assert cgroup.pids() == {11, 12} and cgroup.tenant_pids() == {21}
    assert cgroup.pids(everything=True) == {11, 12, 21}
    events = "memory.events" if tree == "v2" else "memory.oom_control"
    (tenant / events).write_text("oom 1\noom_kill 1\n")
    # v2 counts a kill in each parent too; the session's own are its leaf's.
    (cgroup.folders()[0] / events).write_text("oom 1\noom_kill 1\n" if tree == "v2" else "oom_kill 0\n")
    (own / events).write_text("oom 0\noom_kill 0\n")
    assert cgroup.oom_kills() == 0 and cgroup.oom_kills(tenant=True) == 1
