"""A session's resolver (browserhost/resolver.py): the hosts of an allowlist as every part of the host reads them,
and what its dnsmasq answers."""
import ipaddress
import re
import subprocess

import pytest

from browserhost import launch_options, network, resolver, sandbox, sandbox_policy
from tests.browserhost.fake_dns import FakeDns
from tests.browserhost.helpers import host_server
from tests.live_server import cannot_sandbox

can_sandbox = pytest.mark.skipif(bool(cannot_sandbox()), reason=f"this machine cannot sandbox: {cannot_sandbox()}")

LOOKUP = """
import socket, sys
for name in sys.argv[1:]:
    try:
        print(name, socket.gethostbyname(name))
    except OSError:
        print(name, "-")
"""


def test_a_listed_name_with_a_final_dot_or_in_unicode_is_looked_up_by_its_dns_form():
    """#34 review: a listed name that failed the resolver's pattern (a final dot, an internationalized name such as
    bücher.de) was left out of its dnsmasq without a word, so it never resolved; Chromium's rules refused both, and
    each part of the host read a listed host its own way."""
    assert resolver.normalize_hosts(["*.Bücher.DE.", "Example.com.", "[::1]", " 203.0.113.9 "]) == [
        "xn--bcher-kva.de", "example.com", "::1", "203.0.113.9"]

    argv = resolver.dnsmasq_argv(["Bücher.de.", "example.org", "203.0.113.9", "LOCALHOST."], [], [])
    assert [arg for arg in argv if arg.startswith("--server=")] == [
        "--server=/example.org/10.0.2.3#53", "--server=/xn--bcher-kva.de/10.0.2.3#53"]
    assert launch_options.host_resolver_rules(["Bücher.de.", "[::1]"]) == (
        "MAP * ~NOTFOUND, EXCLUDE xn--bcher-kva.de, EXCLUDE *.xn--bcher-kva.de, EXCLUDE [::1]")
    assert network.reaches_loopback(sandbox_policy.SandboxPolicy(loopback_ports=((3000, 3000),)), ["LocalHost."])
    assert ipaddress.ip_address("127.0.0.1") in network.resolve(["LOCALHOST."])


@pytest.mark.parametrize("host", ["exa mple.com", "a..b", "example.com..", "x" * 64 + ".com", "straße.de",
                                  "https://example.com/", "example.com, MAP * 127.0.0.1"])
def test_what_is_not_a_host_is_refused_by_every_part_naming_it(host):
    policy = sandbox_policy.SandboxPolicy(loopback_ports=((3000, 3000),))
    for use in (lambda hosts: resolver.dnsmasq_argv(hosts, [], []), launch_options.host_resolver_rules, network.resolve,
                lambda hosts: network.reaches_loopback(policy, hosts)):
        with pytest.raises(ValueError, match=re.escape(repr(host))):
            use(["example.com", host])


def test_the_resolver_refuses_every_range_the_firewall_closes_but_what_the_operator_opened():
    closed = network.closed_networks(sandbox_policy.parse_networks("10.1.2.0/24, 172.16.0.0/12"))

    def refused(address):
        return any(ipaddress.ip_address(address) in closed_range for closed_range in closed)

    assert not any(map(refused, ["10.1.2.3", "172.20.0.1", "93.184.215.14", "2606:2800::1"]))
    assert all(map(refused, ["10.1.3.3", "10.0.2.3", "100.64.1.1", "198.18.0.1", "224.0.0.1", "240.0.0.1",
                             "127.0.0.1", "169.254.169.254", "fe80::1", "fd00::1", "::ffff:10.1.2.3"]))
    # slirp4netns' own network stays closed whatever is opened, as in the firewall.
    assert refused("10.0.2.3") and network.closed_networks(sandbox_policy.parse_networks("10.0.0.0/8"))[-1] == \
        ipaddress.ip_network("10.0.2.0/24")
    argv = resolver.dnsmasq_argv(None, [], closed)
    assert "--stop-dns-rebind" not in argv and "--bogus-nxdomain=10.1.3.0/24" in argv


@can_sandbox
def test_names_on_a_network_the_operator_opened_resolve_in_a_session_and_no_other_closed_range_does(tmp_path):
    """#34 review: dnsmasq's --stop-dns-rebind refused every answer in 10/8, 172.16/12 and 192.168/16, those of a
    network BROWSER_ALLOWED_NETWORKS opened too (the docs' 10.1.2.0/24), so its machines' names no longer resolved
    in sessions; and it let through ranges the firewall closes that its list lacks (100.64/10, 198.18/15)."""
    answers = {"office.test": "10.1.2.3", "elsewhere.test": "10.1.3.3", "shared.test": "100.64.1.1",
               "benchmark.test": "198.18.0.1", "multicast.test": "224.0.0.1", "public.test": "93.184.215.14"}
    upstream = FakeDns(answers).start()
    policy = sandbox_policy.SandboxPolicy(allowed_networks=sandbox_policy.parse_networks("10.1.2.0/24"),
                                   dns_servers=((ipaddress.ip_address("127.0.0.1"), upstream.port),))
    box = sandbox.Sandbox(tmp_path / "sessions" / "s1", policy, memory_mb=64).create()
    try:
        looked_up = box.popen(["/usr/bin/python3", "-c", LOOKUP, *answers], stdout=subprocess.PIPE, text=True)
        lines = dict(line.split(" ", 1) for line in looked_up.communicate(timeout=60)[0].splitlines())
    finally:
        box.destroy()
        upstream.stop()

    assert lines == {"office.test": "10.1.2.3", "public.test": "93.184.215.14", "elsewhere.test": "-",
                     "shared.test": "-", "benchmark.test": "-", "multicast.test": "-"}


def test_a_start_whose_allowlist_holds_what_is_not_a_host_is_a_400_naming_it(tmp_path, monkeypatch):
    """Before, such a start failed inside the launch (a 500, which the app answers as a 503 the SDKs retry), or
    started with the host left out of the resolver."""
    server = host_server(tmp_path)
    server.starts.binary = "/usr/lib/chromium/chromium"  # never run: nothing may be launched
    monkeypatch.setattr(server.starts, "_launch", lambda hosted, body: pytest.fail("a browser was launched"))

    status, answer = server.starts.start_browser({"session_id": "s1", "headless": True,
                                           "allowed_hosts": ["example.com", "exa mple.com"]})

    assert status == 400 and answer["code"] == "bad_request"
    assert "network.allowed_hosts" in answer["message"] and "'exa mple.com'" in answer["message"]
    assert "s1" not in server.registry.hosted
