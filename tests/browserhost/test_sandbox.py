"""The sandbox's rules, settings and clean-up (browserhost/sandbox.py), without a browser: the
firewall a session gets, what the settings accept, what a host says when it cannot sandbox, and that a
sandbox leaves nothing behind. What pages can reach is tested on real browsers (tests/browsers/live)."""
import ipaddress
import json
import os
import subprocess
from pathlib import Path

import pytest

from browserhost import cgroups, machine, network, sandbox, sandbox_policy
from browserhost import settings as host_settings
from lantern_wire.hosts import REGISTER
from lantern_wire.settings_errors import SettingsError
from tests.browserhost.helpers import FakeApp, host_server
from tests.live_server import cannot_sandbox
from tests.waiting import eventually

POLICY = sandbox_policy.SandboxPolicy(loopback_ports=((18000, 18099), (3000, 3000)),
                               allowed_networks=sandbox_policy.parse_networks("10.1.0.0/16"))
can_sandbox = pytest.mark.skipif(bool(cannot_sandbox()), reason=f"this machine cannot sandbox: {cannot_sandbox()}")


def output_rules(ruleset):
    chain = ruleset[ruleset.index("chain output {"):]
    return [line.strip() for line in chain.splitlines()[2:] if line.strip() not in ("}", "")]


def test_the_settings_parse_and_refuse_what_is_not_a_port_or_a_network():
    assert sandbox_policy.parse_ports("18000-18099, 3000") == ((18000, 18099), (3000, 3000))
    assert sandbox_policy.parse_ports("") == () and sandbox_policy.parse_ports(3000) == ((3000, 3000),)
    for wrong in ("http", "0", "70000", "5-3", "9000-9300"):  # 9222 is the sandbox's DevTools port
        with pytest.raises(ValueError):
            sandbox_policy.parse_ports(wrong)
    assert sandbox_policy.parse_networks("10.1.2.3/16, fd00::/8") == (ipaddress.ip_network("10.1.0.0/16"),
                                                               ipaddress.ip_network("fd00::/8"))
    with pytest.raises(ValueError):
        sandbox_policy.parse_networks("10.1.0.0/40")


def test_the_firewall_blocks_the_host_and_private_ranges_and_opens_what_the_operator_lists():
    rules = output_rules(network.firewall(POLICY, None, [ipaddress.ip_address("192.0.2.7"),
                                                         ipaddress.ip_address("2001:db8::7")]))
    assert rules[0] == 'oifname "lo" accept'
    assert "ip daddr 10.0.2.2 tcp dport { 18000-18099, 3000 } accept" in rules
    assert "ip daddr { 192.0.2.7 } reject" in rules and "ip6 daddr { 2001:db8::7 } reject" in rules
    blocked = next(rule for rule in rules if rule.startswith("ip daddr { 0.0.0.0/8"))
    for closed in ("10.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.168.0.0/16",
                   "100.64.0.0/10"):
        assert closed in blocked
    assert blocked.endswith("ip daddr != { 10.1.0.0/16 } reject")  # BROWSER_ALLOWED_NETWORKS
    blocked6 = next(rule for rule in rules if rule.startswith("ip6 daddr { ::/127"))
    assert "fc00::/7" in blocked6 and "fe80::/10" in blocked6
    assert rules[-1] != "reject"  # no allowlist: the rest of the internet is open


def test_an_allowlist_leaves_only_its_hosts_on_web_ports_and_loopback_only_when_listed():
    nat = "dnat ip to 10.0.2.2"
    rules = network.firewall(POLICY, ["203.0.113.9", "example.invalid"], [])
    assert output_rules(rules)[-3:] == ["ip daddr { 203.0.113.9 } tcp dport { 80, 443 } accept",
                                        "ip daddr { 203.0.113.9 } udp dport 443 accept", "reject"]
    assert "10.0.2.2" not in "\n".join(output_rules(rules)) and nat not in rules
    listed = network.firewall(POLICY, ["127.0.0.1"], [])
    assert "ip daddr 10.0.2.2 tcp dport { 18000-18099, 3000 } accept" in output_rules(listed)
    assert f"ip daddr 127.0.0.1 tcp dport {{ 18000-18099, 3000 }} {nat}" in listed
    assert nat not in network.firewall(sandbox_policy.SandboxPolicy(), None, [])  # no ports listed


def test_names_are_stable_per_session_folder_and_short():
    name = sandbox.sandbox_name(Path("/srv/hosts/a/sessions/s1"))
    assert name == sandbox.sandbox_name(Path("/srv/hosts/a/sessions/s1"))
    assert name != sandbox.sandbox_name(Path("/srv/hosts/b/sessions/s1"))
    assert len(name) <= 30 and name.startswith("lantern-")


def test_the_host_says_what_it_lacks_and_starts_no_browser(tmp_path, monkeypatch):
    app = FakeApp()
    server = host_server(tmp_path, app)
    server.starts.binary = "/usr/lib/chromium/chromium"
    monkeypatch.setattr(sandbox_policy.shutil, "which", lambda tool: None if tool in ("bwrap", "slirp4netns") else tool)
    monkeypatch.setattr(sandbox_policy.os, "geteuid", lambda: 0)
    server.starts.cannot_sandbox = sandbox_policy.probe(server.starts.policy)
    assert server.starts.cannot_sandbox == ["bwrap, slirp4netns not installed (apt-get install bubblewrap slirp4netns)"]
    assert server.heartbeats.register()
    [(path, registered)] = app.posts
    assert path == REGISTER and registered["capacity"] == 0
    assert "cannot sandbox browsers (bwrap, slirp4netns not installed" in registered["unavailable_reason"]
    assert "BROWSER_SANDBOX=off" in registered["unavailable_reason"]
    status, answer = server.starts.start_browser({"session_id": "s1", "headless": True})
    assert status == 503 and "cannot sandbox browsers" in answer["message"] and not server.registry.hosted


def test_with_the_sandbox_off_a_host_probes_nothing_and_can_start_browsers(tmp_path):
    server = host_server(tmp_path, BROWSER_SANDBOX="off")
    server.starts.binary = "/usr/lib/chromium/chromium"
    assert server.starts.policy is None and server.starts.unavailable_reason() is None


def test_a_bad_sandbox_setting_is_refused_at_the_hosts_start(tmp_path):
    with pytest.raises(SystemExit, match="BROWSER_LOOPBACK_PORTS='80,web' .*not a port"):
        host_server(tmp_path, BROWSER_LOOPBACK_PORTS="80,web")


@can_sandbox
def test_a_sandbox_runs_as_its_user_and_leaves_nothing_once_destroyed(tmp_path):
    box = sandbox.Sandbox(tmp_path / "sessions" / "s1", sandbox_policy.SandboxPolicy(), memory_mb=64).create()
    try:
        process = box.popen(["/bin/sh", "-c", "id -u; ls -m /home; readlink /home/kernel; sleep 30"],
                            stdout=subprocess.PIPE, text=True)
        uid = process.stdout.readline().strip()
        assert uid not in ("", "0") and int(uid) == sandbox_policy.SandboxPolicy().ids()[0]
        # Its home, under Kernel's name too, and nothing else in /home.
        assert process.stdout.readline().strip() == "kernel, session"
        assert process.stdout.readline().strip() == "/home/session"
        assert process.pid in box.cgroup.pids()
        assert Path(f"/var/run/netns/{box.name}").exists()
        assert box.cgroup.limits() == (64 * 1024 * 1024, sandbox_policy.SandboxPolicy().pids_max, None)
        box.bound_cpu()  # once its browser answers
        assert box.cgroup.limits()[2] == 1.0
        # No IPv6 on its network device: a link-local address turning valid after Chromium started would abort
        # the first page loads (net::ERR_NETWORK_CHANGED).
        addresses = subprocess.run(["ip", "netns", "exec", box.name, "ip", "-6", "addr", "show", "dev", "tap0"],
                                   capture_output=True, text=True, check=True).stdout
        assert "inet6" not in addresses
    finally:
        box.destroy()
    process.wait(timeout=10)
    process.stdout.close()
    assert not box.cgroup.exists() and not Path(f"/var/run/netns/{box.name}").exists() and not box.root.exists()
    assert not any(os.path.ismount(box.root / name) for name in ("run", "home", "tmp", "shm"))


def memory_used(box):
    folder = box.cgroup.folders()[0]
    name = "memory.current" if box.cgroup.unified() else "memory.usage_in_bytes"
    return int((folder / name).read_text())


@can_sandbox
def test_what_a_session_writes_to_its_home_is_its_memory_not_the_hosts_disk(tmp_path):
    """A page's storage quota is a tenth of the disk, per origin: a few sessions could fill it."""
    box = sandbox.Sandbox(tmp_path / "sessions" / "s1", sandbox_policy.SandboxPolicy(), memory_mb=64).create()
    try:
        before = memory_used(box)
        written = box.popen(["/bin/sh", "-c", "head -c 40000000 /dev/zero > ~/stored && ls ~ && sleep 30"],
                            stdout=subprocess.PIPE, text=True)
        assert written.stdout.readline().strip() == "stored"
        assert memory_used(box) - before >= 40_000_000  # the file's pages are the session's
        assert (box.home / "stored").stat().st_size == 40_000_000  # the machine's home, a tmpfs of the host's
        mounts = [line.split() for line in Path("/proc/mounts").read_text().splitlines()]
        machine_mounts = {str(box.root / name) for name in ("home", "tmp", "shm", "run")}
        assert machine_mounts <= {mount[1] for mount in mounts if mount[2] == "tmpfs"}
        on_disk = [path for path in box.root.rglob("*")
                   if not any(str(path).startswith(f"{m}/") for m in machine_mounts)]
        assert not any(path.is_file() and path.stat().st_size >= 40_000_000 for path in on_disk)
        # The DevTools socket's folder, which a CDP client could point downloads at, holds 1 MiB.
        run = box.popen(["/bin/sh", "-c", f"head -c 2000000 /dev/zero > {machine.INSIDE_RUN}/download"])
        assert run.wait(30) != 0 and os.path.ismount(box.run)
        assert (box.run / "download").stat().st_size <= machine.RUN_BYTES
        # Last: the machine's home stays full, as a machine's disk does, until the session ends.
        past = box.popen(["/bin/sh", "-c", "head -c 100000000 /dev/zero > ~/more"], stderr=subprocess.PIPE, text=True)
        assert past.wait(30) != 0  # past the session's cap: no space, or killed for memory
        past.stderr.close()
    finally:
        box.destroy()
    written.wait(timeout=10)
    written.stdout.close()


@can_sandbox
def test_sessions_caps_past_every_sandboxs_together_end_a_browser_not_the_machine(tmp_path, monkeypatch):
    """Each session chooses its cap (up to 16 GiB), and the caps may add up past the machine's memory: the
    cgroup every sandbox is in has a cap of its own, and the OOM killer ends a process of a sandbox there."""
    monkeypatch.setattr(cgroups, "CGROUP_PARENT", f"lantern-test-{os.getpid()}")  # not the machine's sandboxes
    policy = sandbox_policy.SandboxPolicy(all_memory_mb=48)
    try:
        assert sandbox_policy.probe(policy) == []
        box = sandbox.Sandbox(tmp_path / "sessions" / "s1", policy, memory_mb=1024).create()
        try:
            greedy = box.popen(["/usr/bin/python3", "-c", "block = b'x' * 200_000_000"])
            assert greedy.wait(30) in (-9, 128 + 9)  # SIGKILL (seen through the sandbox's shell), under its 1 GiB
            assert box.oom_kills() >= 1
            # Named from the kernel's log, where it is readable (the cap reached was the parent's).
            named = "python3" if os.access("/dev/kmsg", os.R_OK) else "unknown"
            assert cgroups.oom_report(box.cgroup)["process_name"] == named
        finally:
            box.destroy()
    finally:
        for parent in cgroups.Cgroup.parents():
            parent.rmdir()


@can_sandbox
def test_leftovers_of_a_killed_host_are_found_and_removed(tmp_path):
    workdir = tmp_path / "sessions" / "s1"
    box = sandbox.Sandbox(workdir, sandbox_policy.SandboxPolicy(), memory_mb=64).create()
    process = box.popen(["/bin/sleep", "60"])
    box.network.slirp.kill()  # as if the host died: its slirp4netns goes with it (exit-fd), the rest stays
    box.network.slirp.wait()
    assert process.pid in box.cgroup.pids()

    assert sandbox.remove_leftovers(workdir, sandbox_policy.SandboxPolicy().root)
    process.wait(timeout=10)
    box._resolver.wait(timeout=10)
    box.machine.holder.wait(timeout=10)
    assert not box.cgroup.exists() and not Path(f"/var/run/netns/{box.name}").exists() and not box.root.exists()
    assert not any(os.path.ismount(box.root / name) for name in ("run", "home", "tmp", "shm"))
    assert not sandbox.remove_leftovers(workdir, sandbox_policy.SandboxPolicy().root)
    os.close(box.network.slirp_exit)


def test_opening_the_operators_private_networks_keeps_slirps_own_network_closed():
    """slirp4netns' gateway 10.0.2.2 is the host's loopback: BROWSER_ALLOWED_NETWORKS=10.0.0.0/8 must not
    open it, nor may anything but the session's resolver (its user) reach slirp4netns' DNS forwarder, or any
    other resolver of the opened network."""
    policy = sandbox_policy.SandboxPolicy(allowed_networks=sandbox_policy.parse_networks("10.0.0.0/8"))
    rules = output_rules(network.firewall(policy, None, [], resolver_uid=4321))
    closed = rules.index("ip daddr 10.0.2.0/24 reject")
    opened = next(index for index, rule in enumerate(rules) if "!= { 10.0.0.0/8 }" in rule)
    assert closed < opened and rules[:3] == [
        'oifname "lo" accept', "meta skuid 4321 ip daddr 10.0.2.3 meta l4proto { tcp, udp } th dport 53 accept",
        "meta l4proto { tcp, udp } th dport 53 reject"]
    upstream = sandbox_policy.SandboxPolicy(dns_servers=((ipaddress.ip_address("127.0.0.1"), 5353),
                                                  (ipaddress.ip_address("192.0.2.53"), 53)))
    assert output_rules(network.firewall(upstream, None, [], resolver_uid=4321))[1:3] == [
        "meta skuid 4321 ip daddr 10.0.2.2 meta l4proto { tcp, udp } th dport 5353 accept",
        "meta skuid 4321 ip daddr 192.0.2.53 meta l4proto { tcp, udp } th dport 53 accept"]


def test_a_firewall_is_not_made_without_the_hosts_addresses(monkeypatch):
    monkeypatch.setattr(network.subprocess, "run",
                        lambda *args, **kwargs: subprocess.CompletedProcess(args, 1, "", "ip: not today"))
    with pytest.raises(network.SandboxError, match="cannot read this machine's addresses"):
        network.host_addresses()


def test_the_devtools_socket_is_opened_only_if_it_is_the_sandboxes_own_socket(tmp_path):
    """A sandbox can write the folder of its DevTools socket: a link there, or a socket of someone else,
    must not lead whoever connects (as root) to another socket of the host."""
    import socket

    from lantern_wire.splice import connect_unix

    target = socket.socket(socket.AF_UNIX)
    target.bind(str(tmp_path / "root-only.sock"))
    target.listen()
    (tmp_path / "devtools.sock").symlink_to(tmp_path / "root-only.sock")
    try:
        with pytest.raises(ConnectionRefusedError):
            connect_unix(str(tmp_path / "devtools.sock"), 1)
        with pytest.raises(ConnectionRefusedError):
            connect_unix(str(tmp_path / "root-only.sock"), 1, owner=os.getuid() + 1)
        connect_unix(str(tmp_path / "root-only.sock"), 1, owner=os.getuid()).close()
        long_folder = tmp_path / ("x" * 120)
        long_folder.mkdir()
        os.link(tmp_path / "root-only.sock", long_folder / "s.sock")  # a path longer than a socket's 107 bytes
        connect_unix(str(long_folder / "s.sock"), 1).close()
    finally:
        target.close()


def test_the_cpu_setting_takes_cores_and_refuses_the_rest():
    for text, cores in (("1", 1.0), ("0.5", 0.5), ("2", 2.0)):
        settings = host_settings.load({"LANTERN_BROWSER_SANDBOX_CPUS": text})
        assert sandbox_policy.SandboxPolicy.from_settings(settings).cpus == cores
    for wrong in ("0", "-1", "many", ""):
        with pytest.raises(SettingsError, match="BROWSER_SANDBOX_CPUS"):
            host_settings.load({"LANTERN_BROWSER_SANDBOX_CPUS": wrong})


def test_the_policy_is_the_settings_as_parsed_at_start():
    settings = host_settings.load({"LANTERN_BROWSER_SANDBOX_USER": "nobody",
                                   "LANTERN_BROWSER_SANDBOX_DIR": "/srv/boxes",
                                   "LANTERN_BROWSER_LOOPBACK_PORTS": "18000-18099, 3000",
                                   "LANTERN_BROWSER_ALLOWED_NETWORKS": "10.1.2.3/16",
                                   "LANTERN_BROWSER_DNS_SERVERS": "192.0.2.53, 127.0.0.1#5353",
                                   "LANTERN_BROWSER_SANDBOX_PIDS": "99", "LANTERN_BROWSER_SANDBOXES_MEMORY_MB": "4096"})
    assert sandbox_policy.SandboxPolicy.from_settings(settings) == sandbox_policy.SandboxPolicy(
        user="nobody", root=Path("/srv/boxes"), loopback_ports=((18000, 18099), (3000, 3000)),
        allowed_networks=(ipaddress.ip_network("10.1.0.0/16"),), pids_max=99, all_memory_mb=4096,
        dns_servers=((ipaddress.ip_address("192.0.2.53"), 53), (ipaddress.ip_address("127.0.0.1"), 5353)))


@can_sandbox
def test_a_session_spinning_on_every_core_is_held_to_its_cpus_with_its_network_stack(tmp_path):
    """#34 item 9: a session had no CPU bound. Its busy loops are throttled at its share, and slirp4netns (its
    network stack) is in its cgroup, not the host's."""
    policy = sandbox_policy.SandboxPolicy(cpus=0.05)  # so little that it is reached however busy the machine is
    box = sandbox.Sandbox(tmp_path / "sessions" / "s1", policy, memory_mb=64).create()
    try:
        box.bound_cpu()
        assert box.cgroup.limits()[2] == 0.05
        assert box.network.slirp.pid in box.cgroup.pids()
        spin = " ".join(["(while :; do :; done) &"] * (os.cpu_count() or 1))
        spinning = box.popen(["/bin/sh", "-c", f"{spin} sleep 30"])
        assert eventually(lambda: box.cgroup.cpu_throttled() > 0, 10, interval=0.1), "never throttled"
        spinning.kill()
    finally:
        box.destroy()
    spinning.wait(timeout=10)


@can_sandbox
def test_slirp4netns_runs_in_its_own_sandbox_without_capabilities(tmp_path):
    """#34 item 10: it ran as root with every capability and no sandbox of its own. It must start as root to
    enter the namespace; then it keeps only CAP_NET_BIND_SERVICE, in a mount namespace of its own that holds
    none of the machine's files but the two it reads, under a seccomp filter, with no way to gain privileges;
    and making that sandbox leaves every other session's namespace where it was (its mounts are the host's
    /run/netns' peers)."""
    first = sandbox.Sandbox(tmp_path / "sessions" / "s1", sandbox_policy.SandboxPolicy(), memory_mb=64).create()
    try:
        second = sandbox.Sandbox(tmp_path / "sessions" / "s2", sandbox_policy.SandboxPolicy(), memory_mb=64).create()
        try:
            status = Path(f"/proc/{second.network.slirp.pid}/status").read_text()
            fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
            assert int(fields["CapEff"], 16) == int(fields["CapPrm"], 16) == 1 << 10  # CAP_NET_BIND_SERVICE
            assert int(fields["CapBnd"], 16) == 1 << 10 and fields["NoNewPrivs"] == "1" and fields["Seccomp"] == "2"
            assert os.readlink(f"/proc/{second.network.slirp.pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt")
            # Still uid 0: of the machine's files it sees only the two it reads, none it could write.
            root = Path(f"/proc/{second.network.slirp.pid}/root")
            assert sorted(path.relative_to(root).as_posix() for path in root.rglob("*")) == [
                "etc", "etc/ld.so.cache", "etc/resolv.conf", "run"]
            with pytest.raises(OSError):
                (root / "etc" / "resolv.conf").open("a")
            for box in (first, second):
                subprocess.run(["ip", "netns", "exec", box.name, "true"], check=True, timeout=10)
        finally:
            second.destroy()
    finally:
        first.destroy()


LOOKUP = """
import socket, struct, sys
def ask(server, port, name):
    query = struct.pack("!HHHHHH", 7, 0x0100, 1, 0, 0, 0) + b"".join(
        bytes([len(part)]) + part.encode() for part in name.split(".")) + b"\\0" + struct.pack("!HH", 1, 1)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(3)
    try:
        sock.sendto(query, (server, port))
        return "answered" if sock.recv(4096) else "nothing"
    except OSError as error:
        return type(error).__name__
for name in sys.argv[1:]:
    try:
        print(name, socket.gethostbyname(name))
    except OSError:
        print(name, "-")
for server, port in (("10.0.2.3", 53), ("10.0.2.2", PORT), ("192.0.2.1", 53)):
    print(f"{server}:{port}", ask(server, port, "public.test"))
"""


@can_sandbox
@pytest.mark.parametrize("allowed_hosts", [None, ["public.test", "203.0.113.9"]])
def test_a_sessions_lookups_go_through_its_own_resolver_which_refuses_private_answers(tmp_path, allowed_hosts):
    """#34 item 11: a session's UDP 53 went to slirp4netns' forwarder and on to the machine's resolver
    unfiltered, so a page could look up internal names. Its own dnsmasq refuses private, loopback and link-local
    answers, and with an allowlist answers only the listed names (the upstream never asked for the rest); no
    process of the session reaches any other resolver, the machine's own included."""
    from tests.browserhost.fake_dns import FakeDns

    upstream = FakeDns({"public.test": "93.184.215.14", "internal.test": "10.1.2.3", "loop.test": "127.0.0.1",
                        "link.test": "169.254.169.254", "other.test": "93.184.215.15"}).start()
    policy = sandbox_policy.SandboxPolicy(dns_servers=((ipaddress.ip_address("127.0.0.1"), upstream.port),))
    box = sandbox.Sandbox(tmp_path / "sessions" / "s1", policy, memory_mb=64, allowed_hosts=allowed_hosts).create()
    try:
        names = ["public.test", "internal.test", "loop.test", "link.test", "other.test"]
        looked_up = box.popen(["/usr/bin/python3", "-c", LOOKUP.replace("PORT", str(upstream.port)), *names],
                              stdout=subprocess.PIPE, text=True)
        lines = dict(line.split(" ", 1) for line in looked_up.communicate(timeout=60)[0].splitlines())
    finally:
        box.destroy()
        upstream.stop()
    assert lines["public.test"] == "93.184.215.14"
    assert lines["internal.test"] == lines["loop.test"] == lines["link.test"] == "-"
    assert lines["other.test"] == ("93.184.215.15" if allowed_hosts is None else "-")
    if allowed_hosts is not None:
        assert set(upstream.asked) == {"public.test"}
    # Straight to slirp4netns' forwarder, to the upstream, to any other resolver: refused by the firewall.
    refused = {"PermissionError", "ConnectionRefusedError"}  # the firewall's reject, as a socket meets it
    assert {lines["10.0.2.3:53"], lines[f"10.0.2.2:{upstream.port}"], lines["192.0.2.1:53"]} <= refused


# Plays the browser inside its sandbox: answers DevTools' /json/version on port 9222, and first looks for the
# DevTools relay among the processes it sees and tries to take its listening socket (fd 3), as a program Chromium
# ran could (pidfd_getfd, the same as ptrace's rights).
STAND_IN = r"""
import ctypes, http.server, json, os
seen, taken = [], []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        if open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")[0].endswith(b"/systemd-socket-proxyd"):
            seen.append(pid)
            pidfd = os.pidfd_open(int(pid))
            if ctypes.CDLL(None, use_errno=True).syscall(438, pidfd, 3, 0) >= 0:
                taken.append(pid)
    except OSError:
        pass
print(json.dumps({"seen": seen, "taken": taken}), flush=True)

class Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"stand-in")

http.server.HTTPServer(("127.0.0.1", 9222), Answer).serve_forever()
"""
# The same from the host, as the sandbox's user: pidfd_getfd of the relay's socket; the errno when refused.
TAKE = r"""
import ctypes, os, sys
fd = ctypes.CDLL(None, use_errno=True).syscall(438, os.pidfd_open(int(sys.argv[1])), 3, 0)
print("taken" if fd >= 0 else os.strerror(ctypes.get_errno()))
"""


@can_sandbox
def test_no_process_of_the_session_can_take_the_devtools_relays_socket_and_pose_as_chromium(tmp_path):
    """#35 review: the relay (systemd-socket-proxyd) ran inside the browser's sandbox as its user, so a program
    run there (a download opened with xdg-open) could take its listening socket and answer the host in
    Chromium's place. It runs as RELAY_USER in a sandbox of its own, and still relays the host's connections to
    port 9222 of the session's network."""
    from lantern_wire.splice import connect_unix

    uid, gid = sandbox_policy.SandboxPolicy().ids()
    box = sandbox.Sandbox(tmp_path / "sessions" / "s1", sandbox_policy.SandboxPolicy(), memory_mb=64).create()
    try:
        browser = box.popen(["/usr/bin/python3", "-c", STAND_IN], devtools=True, stdout=subprocess.PIPE, text=True)
        inside = json.loads(browser.stdout.readline())
        [relay] = [pid for pid in box.cgroup.pids() if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(
            sandbox_policy.RELAY.encode())]
        relay_uid = int(Path(f"/proc/{relay}/status").read_text().split("\nUid:\t")[1].split()[0])
        as_sandbox_user = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups"]
        taken = subprocess.run([*as_sandbox_user, "/usr/bin/python3", "-c", TAKE, str(relay)], capture_output=True,
                               text=True, timeout=30, check=False)
        listed = subprocess.run([*as_sandbox_user, "ls", f"/proc/{relay}/fd"], capture_output=True, text=True,
                                timeout=30, check=False)

        def relayed():
            try:
                with connect_unix(box.devtools_socket(), 5, owner=uid) as connection:
                    connection.sendall(b"GET /json/version HTTP/1.0\r\n\r\n")
                    return connection.makefile("rb").read()
            except OSError:
                return b""

        answer = eventually(relayed, 10, interval=0.1)
    finally:
        box.destroy()
    browser.wait(timeout=10)
    browser.stdout.close()
    assert inside == {"seen": [], "taken": []}  # not even in sight
    assert relay_uid == sandbox_policy.SandboxPolicy.relay_ids()[0] != uid
    assert taken.stdout.strip() == "Operation not permitted", taken
    assert listed.returncode != 0 and "Permission denied" in listed.stderr
    assert answer.endswith(b"stand-in"), answer


# Plays a browser whose answer is long (as a page's screenshot or DOM is): the relay is still writing it to the host
# when the host's client has gone.
LONG_ANSWER = r"""
import http.server

CHUNK = b"x" * 65536  # one, written 256 times: the sandbox's memory cap is small

class Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        try:
            for _ in range(256):
                self.wfile.write(CHUNK)
        except OSError:
            pass  # the relay dropped it: its client left

http.server.ThreadingHTTPServer(("127.0.0.1", 9222), Answer).serve_forever()
"""


@can_sandbox
def test_the_devtools_relay_outlives_a_client_that_leaves_before_its_answer_is_written(tmp_path):
    """The relay (systemd-socket-proxyd) splices Chromium's answer into the host's socket; when the host's client
    has left (a CDP client cut, a call past its deadline), that write raised SIGPIPE, which killed the relay,
    as systemd, which ignores SIGPIPE for its services, is not there to ignore it: every later call to the
    session's browser met "connection refused" while Chromium ran on."""
    from lantern_wire.splice import connect_unix

    uid, _ = sandbox_policy.SandboxPolicy().ids()
    box = sandbox.Sandbox(tmp_path / "sessions" / "s1", sandbox_policy.SandboxPolicy(), memory_mb=64).create()

    def answered(read_all):
        try:
            with connect_unix(box.devtools_socket(), 5, owner=uid) as connection:
                connection.sendall(b"GET / HTTP/1.0\r\n\r\n")
                if not read_all:
                    return connection.recv(1) == b"H"  # the answer has begun: the client leaves mid-way
                return len(connection.makefile("rb").read())
        except OSError as error:
            return repr(error)

    try:
        browser = box.popen(["/usr/bin/python3", "-c", LONG_ANSWER], devtools=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
        assert eventually(lambda: answered(read_all=False) is True, 10, interval=0.1)
        for _ in range(20):
            answered(read_all=False)
        after = answered(read_all=True)
    finally:
        box.destroy()
    browser.wait(timeout=10)
    assert isinstance(after, int) and after > 16 * 1024 * 1024, after


# A session's files that would have a program of its own run by whatever opens a file or link inside: a .desktop
# file and the mimeapps.list that picks it, as a page can download them into its home.
OPENED = r"""
apps=$HOME/.local/share/applications
mkdir -p "$apps"
printf '[Default Applications]\nx-scheme-handler/evil=evil.desktop\ntext/plain=evil.desktop\n' > "$apps/mimeapps.list"
printf '[Desktop Entry]\nType=Application\nName=evil\nExec=/bin/sh %s/ran.sh %%u\nMimeType=text/plain;\n' "$apps" \
  > "$apps/evil.desktop"
echo 'echo "$*" >> /run/lantern/ran' > "$apps/ran.sh"
echo hello > "$HOME/a.txt"
for opener in "xdg-open $HOME/a.txt" "xdg-open evil:x" "xdg-email x@example.test" "gio open $HOME/a.txt" \
              "gtk-launch evil"; do
  status=0
  timeout 20 $opener </dev/null >/dev/null 2>&1 || status=$?
  echo "$opener: $status"
done
"""


@can_sandbox
def test_nothing_inside_opens_a_file_or_link_with_a_program_of_the_sessions(tmp_path):
    """#35 review: Chromium opens a download (with AutoOpenFileTypes, or the user's say) and an external link
    the user lets through (a dialog the computer API can accept) with xdg-open, which ran the program a
    downloaded .desktop file named. Inside, every opener is /usr/bin/false."""
    box = sandbox.Sandbox(tmp_path / "sessions" / "s1", sandbox_policy.SandboxPolicy(), memory_mb=64).create()
    try:
        shell = box.popen(["/bin/sh", "-c", OPENED], stdout=subprocess.PIPE, text=True)
        statuses = dict(line.rsplit(": ", 1) for line in shell.communicate(timeout=120)[0].splitlines())
        ran = (box.run / "ran").exists()
    finally:
        box.destroy()
    assert not ran
    assert statuses == {opener: "1" for opener in statuses} and len(statuses) == 5, statuses  # /usr/bin/false's


def test_the_browser_may_not_run_as_the_relays_user():
    assert "BROWSER_SANDBOX_USER nobody is the user sessions' DevTools relays run as: the browser must run as " \
           "another" in sandbox_policy.probe(sandbox_policy.SandboxPolicy(user="nobody"))


def test_the_openers_are_found_through_their_links_and_never_the_browser_run():
    found = machine.openers()
    assert os.path.realpath("/usr/bin/xdg-open") in found and os.path.realpath("/usr/bin/false") not in found
    if os.path.exists("/usr/bin/x-www-browser"):  # an alternative, leading to a browser's wrapper
        browser = os.path.realpath("/usr/bin/x-www-browser")
        assert browser in found and browser not in machine.openers(keep="/usr/bin/x-www-browser")
