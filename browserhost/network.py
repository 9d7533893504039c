"""A session's network (browserhost/sandbox.py's Sandbox has one): its namespace, slirp4netns' egress, and the
nftables ruleset in it, with the ranges it closes, which the session's resolver (browserhost/resolver.py) refuses
to answer with. What it lets through is in sandbox.py's docstring (**Network**).
"""
import ipaddress
import json
import os
import socket
import subprocess

from browserhost import resolver
from browserhost.machine import JOIN_CGROUP, end, read_with_deadline

# slirp4netns' fixed addresses: its gateway (the host's loopback, when not disabled) and its DNS forwarder.
SLIRP_NETWORK, SLIRP_GATEWAY = "10.0.2.0/24", resolver.SLIRP_GATEWAY
BLOCKED_NETWORKS = (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12", "192.0.0.0/24",
    "192.0.2.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/3",
    "::/127", "::ffff:0:0/96", "64:ff9b::/96", "100::/64", "2001:db8::/32", "fc00::/7", "fe80::/10", "ff00::/8")
ALLOWLIST_PORTS = (80, 443)


class SandboxError(RuntimeError):
    """The sandbox could not be set up (what failed is in the message)."""


class Network:
    """A session's network namespace (`name`), its firewall and egress; slirp4netns in the session's `cgroup`, its
    log in `log_folder`."""

    def __init__(self, name, cgroup, log_folder, policy, allowed_hosts):
        self.name, self.cgroup, self.log_folder = name, cgroup, log_folder
        self.policy, self.allowed_hosts = policy, allowed_hosts
        self.slirp = None
        self.slirp_exit = None

    def make(self):
        """The namespace, its firewall, and slirp4netns once it is up (SandboxError when it is not)."""
        subprocess.run(["ip", "netns", "add", self.name], check=True, capture_output=True, timeout=10)
        self._in_netns(["ip", "link", "set", "lo", "up"])
        self._in_netns(["sysctl", "-qw", "net.ipv4.conf.all.route_localnet=1"])  # 127.0.0.1:PORT -> gateway
        # slirp4netns' tap0 gives no IPv6 route; its link-local address would only turn valid a second or two
        # after Chromium started, which Chromium takes for a network change: it aborts the page loads under way
        # (net::ERR_NETWORK_CHANGED). So tap0 gets no IPv6 at all.
        self._in_netns(["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"])
        self._in_netns(["sysctl", "-qw", "net.ipv4.ip_unprivileged_port_start=53"])  # the resolver's port
        self._in_netns(["nft", "-f", "-"], stdin=firewall(self.policy, self.allowed_hosts, host_addresses()))
        # Without listed loopback ports, slirp4netns' gateway does not lead to the host's loopback at all
        # (the firewall refuses it either way).
        loopback = [] if (reaches_loopback(self.policy, self.allowed_hosts)
                          or resolver.reaches_loopback(self.policy.dns_servers)) else ["--disable-host-loopback"]
        procs = self.cgroup.procs_files()
        ready_read, ready_write = os.pipe()
        exit_read = netns = None
        try:  # every descriptor closed whatever fails on the way (a pipe, the namespace's open, Popen)
            try:
                exit_read, self.slirp_exit = os.pipe()
                netns = os.open(f"/var/run/netns/{self.name}", os.O_RDONLY)
                # It must start as root to enter the namespace the host made; its own sandbox then gives it a mount
                # namespace of its own with /etc and /run read-only (SLIRP_VIEW's), drops every capability but
                # binding low ports, and its seccomp filter leaves it the few system calls a network stack needs.
                # In the session's cgroup: the CPU and memory its packets take are the session's.
                with open(self.log_folder / "slirp4netns.log", "ab") as out:
                    self.slirp = subprocess.Popen(
                        ["/bin/sh", "-c", JOIN_CGROUP, "join", "0", str(len(procs)), *procs,
                         "unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", SLIRP_VIEW, "view",
                         "slirp4netns", "--configure", "--mtu=65520", *loopback, "--enable-sandbox",
                         "--enable-seccomp", f"--ready-fd={ready_write}", f"--exit-fd={exit_read}",
                         "--netns-type=path", f"/proc/self/fd/{netns}", "tap0"],
                        stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                        pass_fds=(ready_write, exit_read, netns), start_new_session=True)
            finally:
                for fd in (netns, ready_write, exit_read):
                    if fd is not None:
                        os.close(fd)
            ready = read_with_deadline(ready_read, 10.0)
        finally:
            os.close(ready_read)
        if ready != b"1":
            log = (self.log_folder / "slirp4netns.log").read_text()[-500:]
            raise SandboxError(f"slirp4netns did not come up: {log}")
        self.cgroup.spared.add(self.slirp.pid)

    def stop(self):
        """slirp4netns ends (its exit-fd closed) and is reaped; the namespace stays until remove_netns."""
        if self.slirp_exit is not None:
            os.close(self.slirp_exit)  # slirp4netns exits when this end closes
            self.slirp_exit = None
        if self.slirp is not None:
            end(self.slirp)
            self.slirp = None

    def _in_netns(self, argv, stdin=None):
        result = subprocess.run(["ip", "netns", "exec", self.name, *argv], input=stdin, text=True,
                                capture_output=True, timeout=10, check=False)
        if result.returncode != 0:
            raise SandboxError(f"{' '.join(argv)} in the session's network namespace: {result.stderr.strip()}")


def remove_netns(name):
    if os.path.exists(f"/var/run/netns/{name}"):
        # slirp4netns' exit-fd ends it when its host dies; the namespace's bind mount stays until this.
        subprocess.run(["ip", "netns", "delete", name], capture_output=True, timeout=10, check=False)


# slirp4netns' view of the machine, in a mount namespace of its own (made private first: the unmounts of its
# sandbox would otherwise reach the host's /run/netns, a shared mount, and unmount every session's namespace):
# its sandbox keeps /etc and /run of it, which hold here only what it reads (resolv.conf, for its DNS
# forwarder, and the loader's cache), not the machine's root-only files (it is still uid 0, if without
# capabilities). The namespace it enters is opened by the host, before /run is covered.
SLIRP_VIEW = r"""
set -e
mount -t tmpfs -o size=64k,mode=0755 slirp /tmp
mkdir /tmp/etc
for name in resolv.conf ld.so.cache; do
  touch "/tmp/etc/$name"
  mount --bind -o ro "/etc/$name" "/tmp/etc/$name"
done
mount --rbind /tmp/etc /etc
mount -t tmpfs -o size=64k,mode=0755 slirp /run
exec "$@"
"""


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
