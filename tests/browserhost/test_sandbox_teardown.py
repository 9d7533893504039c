"""A sandbox's tear-down (browserhost/sandbox.py Sandbox.destroy) when one of its processes outlives its cgroup's
kill: the rest of it still goes."""
import subprocess

import pytest

from browserhost import sandbox, sandbox_policy


class Stuck:
    """A process still there after its cgroup was killed: it ends once SIGKILLed, or never (`unkillable`)."""

    def __init__(self, unkillable=False):
        self.unkillable, self.killed, self.waits = unkillable, False, []

    def wait(self, timeout=None):
        self.waits.append(timeout)
        if self.unkillable or not self.killed:
            raise subprocess.TimeoutExpired("dnsmasq", timeout)
        return -9

    def kill(self):
        self.killed = True


@pytest.mark.parametrize("unkillable", [False, True], ids=["ends once killed", "never ends"])
def test_a_process_past_the_cgroups_kill_is_killed_and_the_rest_of_the_sandbox_still_goes(tmp_path, monkeypatch,
                                                                                         unkillable):
    """#34 review: the resolver's wait had no TimeoutExpired handler, so a dnsmasq stuck past the cgroup's kill
    left the network namespace, the cgroup, run/ and the folder (and inside create() hid the error that failed
    it)."""
    box = sandbox.Sandbox(tmp_path / "sessions" / "s1", sandbox_policy.SandboxPolicy(root=tmp_path / "sandboxes"),
                          memory_mb=64)
    box.etc.mkdir(parents=True)
    gone = []
    monkeypatch.setattr(box.cgroup, "kill", lambda grace, everything=False: None)
    monkeypatch.setattr(box.cgroup, "remove", lambda: gone.append("cgroup"))
    monkeypatch.setattr(sandbox, "remove_netns", lambda name: gone.append(name))
    box.network.slirp, box._resolver = slirp, resolver = Stuck(unkillable), Stuck(unkillable)

    box.destroy()

    assert slirp.killed and resolver.killed
    assert all(timeout is not None for timeout in slirp.waits + resolver.waits)  # every wait has a deadline
    assert gone == [box.name, "cgroup"] and not box.root.exists()
    assert box.network.slirp is None and box._resolver is None
