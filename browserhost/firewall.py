"""A session's firewall: the nftables ruleset of its network namespace (browserhost/sandbox.py makes the namespace
and loads it), and the ranges it closes, which the session's resolver (browserhost/resolver.py) refuses to answer
with. What it lets through is in sandbox.py's docstring (**Network**).
"""
import ipaddress
import json
import socket
import subprocess

from browserhost import resolver

# slirp4netns' fixed addresses: its gateway (the host's loopback, when not disabled) and its DNS forwarder.
SLIRP_NETWORK, SLIRP_GATEWAY = "10.0.2.0/24", resolver.SLIRP_GATEWAY
BLOCKED_NETWORKS = (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.0.0.0/24",
    "192.0.2.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/3",
    "::/127", "::ffff:0:0/96", "64:ff9b::/96", "100::/64", "2001:db8::/32", "fc00::/7", "fe80::/10", "ff00::/8")
ALLOWLIST_PORTS = (80, 443)


class SandboxError(RuntimeError):
    """The sandbox could not be set up (what failed is in the message)."""


def host_addresses():
    """Every address of this machine's interfaces (from `ip -j addr`): a session reaches none of them.
    SandboxError when they cannot be read: a firewall without them would let pages reach the host."""
    result = subprocess.run(["ip", "-j", "addr", "show"], capture_output=True, text=True, timeout=10, check=False)
    try:
        interfaces = json.loads(result.stdout)
        return [ipaddress.ip_address(info["local"]) for interface in interfaces
                for info in interface.get("addr_info", ()) if info.get("local")]
    except (ValueError, TypeError, KeyError) as error:
        raise SandboxError(f"cannot read this machine's addresses (ip -j addr: {result.stderr.strip() or error})") \
            from None


def reaches_loopback(policy, allowed_hosts):
    """Whether a session may reach the host loopback ports the operator listed: when there are some, and
    its allowlist (if any) names the loopback."""
    return bool(policy.loopback_ports) and (
        allowed_hosts is None or bool({"127.0.0.1", "localhost"} & set(resolver.normalize_hosts(allowed_hosts))))


def resolve(hosts):
    """The addresses `hosts` (names or IP literals) resolve to on this host now; ValueError for one that is not
    a host."""
    addresses = set()
    for host in resolver.normalize_hosts(hosts):
        if resolver.is_ip(host):
            addresses.add(ipaddress.ip_address(host))
            continue
        try:
            addresses.update(ipaddress.ip_address(info[4][0].split("%")[0])
                             for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP))
        except OSError:
            pass  # it does not resolve: nothing of it is reachable
    return addresses


def closed_networks(opened):
    """The ranges of BLOCKED_NETWORKS the operator did not open (`opened`: BROWSER_ALLOWED_NETWORKS), and
    slirp4netns' own network, which stays closed: what the firewall closes, so what no name resolves into for a
    session (its resolver's answers)."""
    closed = [ipaddress.ip_network(network) for network in BLOCKED_NETWORKS]
    for hole in opened:
        closed = [part for network in closed
                  for part in ((network,) if network.version != hole.version or not network.overlaps(hole)
                               else () if network.subnet_of(hole) else network.address_exclude(hole))]
    return [*closed, ipaddress.ip_network(SLIRP_NETWORK)]


def firewall(policy, allowed_hosts, own_addresses, resolver_uid=None):
    """The nftables ruleset of a session's network namespace (see the module's docstring)."""
    loopback_ports = ", ".join(f"{low}-{high}" if low != high else str(low) for low, high in policy.loopback_ports)
    allow_loopback = reaches_loopback(policy, allowed_hosts)
    resolver_uid = policy.resolver_ids()[0] if resolver_uid is None else resolver_uid
    rules = ['oifname "lo" accept']  # the session's own resolver among the rest
    # Its resolver alone reaches the upstream ones (which may be on the machine's loopback or a private
    # network); DNS to anything else would look up what the resolver refuses.
    for address, port in resolver.upstreams(policy.dns_servers):
        family = "ip" if address.version == 4 else "ip6"
        rules.append(f"meta skuid {resolver_uid} {family} daddr {address} meta l4proto {{ tcp, udp }} "
                     f"th dport {port} accept")
    rules.append("meta l4proto { tcp, udp } th dport 53 reject")
    if allow_loopback:
        rules.append(f"ip daddr {SLIRP_GATEWAY} tcp dport {{ {loopback_ports} }} accept")
    # slirp4netns' own network (its gateway is the host's loopback) stays closed whatever networks the
    # operator opens: opening 10.0.0.0/8 must not open every port of the host.
    rules.append(f"ip daddr {SLIRP_NETWORK} reject")
    for family, addresses in _by_family(own_addresses).items():
        rules.append(f"{family} daddr {{ {', '.join(map(str, addresses))} }} reject")
    opened = _by_family(policy.allowed_networks)
    for family, networks in _by_family(ipaddress.ip_network(n) for n in BLOCKED_NETWORKS).items():
        exception = f"{family} daddr != {{ {', '.join(map(str, opened[family]))} }} " if opened.get(family) else ""
        rules.append(f"{family} daddr {{ {', '.join(map(str, networks))} }} {exception}reject")
    if allowed_hosts is not None:
        ports = ", ".join(map(str, ALLOWLIST_PORTS))
        for family, addresses in _by_family(resolve(allowed_hosts)).items():
            listed = ", ".join(map(str, addresses))
            rules.append(f"{family} daddr {{ {listed} }} tcp dport {{ {ports} }} accept")
            rules.append(f"{family} daddr {{ {listed} }} udp dport 443 accept")
        rules.append("reject")
    nat = (f"ip daddr 127.0.0.1 tcp dport {{ {loopback_ports} }} dnat ip to {SLIRP_GATEWAY}" if allow_loopback
           else "")
    return "\n".join([
        "table inet lantern {",
        "  chain output_nat {", "    type nat hook output priority -100;", f"    {nat}", "  }",
        "  chain postrouting {", "    type nat hook postrouting priority 100;",
        '    ip saddr 127.0.0.0/8 oifname "tap0" masquerade', "  }",
        "  chain output {", "    type filter hook output priority 0; policy accept;",
        *(f"    {rule}" for rule in rules), "  }",
        "}", ""])


def _by_family(items):
    """{"ip": [...IPv4...], "ip6": [...IPv6...]}, each present only when it has items."""
    families = {}
    for item in items:
        families.setdefault("ip" if item.version == 4 else "ip6", []).append(item)
    return families
