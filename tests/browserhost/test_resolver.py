"""A session's resolver (browserhost/resolver.py): the hosts of an allowlist as every part of the host reads them,
and what its dnsmasq answers."""
import ipaddress
import re

import pytest

from browserhost import launch, resolver, sandbox


def test_a_listed_name_with_a_final_dot_or_in_unicode_is_looked_up_by_its_dns_form():
    """#34 review: a listed name that failed the resolver's pattern (a final dot, an internationalized name such as
    bücher.de) was left out of its dnsmasq without a word, so it never resolved; Chromium's rules refused both, and
    each part of the host read a listed host its own way."""
    assert resolver.normalize_hosts(["*.Bücher.DE.", "Example.com.", "[::1]", " 203.0.113.9 "]) == [
        "xn--bcher-kva.de", "example.com", "::1", "203.0.113.9"]

    argv = resolver.dnsmasq_argv(["Bücher.de.", "example.org", "203.0.113.9", "LOCALHOST."], [])
    assert [arg for arg in argv if arg.startswith("--server=")] == [
        "--server=/example.org/10.0.2.3#53", "--server=/xn--bcher-kva.de/10.0.2.3#53"]
    assert launch.host_resolver_rules(["Bücher.de.", "[::1]"]) == (
        "MAP * ~NOTFOUND, EXCLUDE xn--bcher-kva.de, EXCLUDE *.xn--bcher-kva.de, EXCLUDE [::1]")
    assert sandbox.reaches_loopback(sandbox.SandboxPolicy(loopback_ports=((3000, 3000),)), ["LocalHost."])
    assert ipaddress.ip_address("127.0.0.1") in sandbox.resolve(["LOCALHOST."])


@pytest.mark.parametrize("host", ["exa mple.com", "a..b", "example.com..", "x" * 64 + ".com", "straße.de",
                                  "https://example.com/", "example.com, MAP * 127.0.0.1"])
def test_what_is_not_a_host_is_refused_by_every_part_naming_it(host):
    for use in (lambda hosts: resolver.dnsmasq_argv(hosts, []), launch.host_resolver_rules, sandbox.resolve,
                lambda hosts: sandbox.reaches_loopback(sandbox.SandboxPolicy(loopback_ports=((3000, 3000),)), hosts)):
        with pytest.raises(ValueError, match=re.escape(repr(host))):
            use(["example.com", host])
