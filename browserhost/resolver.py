"""A session's DNS: a dnsmasq of its own, inside its sandbox (its network namespace, its cgroup, bubblewrap),
as Debian's unprivileged `dnsmasq` user, which alone of the session's processes the firewall lets reach
the upstream resolvers (sandbox.firewall); every other packet to port 53 is refused. Its answers never hold
an address in a private, loopback or link-local range (`--stop-dns-rebind`), and for a session with
`network.allowed_hosts` it answers only the listed names (and names under them); any other is NXDOMAIN.

    servers = parse_servers(settings["BROWSER_DNS_SERVERS"])   # [] : the machine's own resolvers
    argv = dnsmasq_argv(allowed_hosts, servers)
"""
import ipaddress
import re

USER = "dnsmasq"  # Debian's dnsmasq-base makes this system user
LISTEN = "127.0.0.1"  # the session's resolv.conf names it
# slirp4netns' forwarder, which passes queries on to the resolvers in the machine's /etc/resolv.conf, and its
# gateway, which is the machine's loopback.
SLIRP_DNS, SLIRP_GATEWAY = "10.0.2.3", "10.0.2.2"
NAME = re.compile(r"^(?=.{1,253}$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?\.)*[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$")


def parse_servers(text):
    """'192.0.2.53, 127.0.0.1#5353' -> [(IPv4Address('192.0.2.53'), 53), (IPv4Address('127.0.0.1'), 5353)];
    ValueError for anything else."""
    servers = []
    for item in filter(None, (part.strip() for part in str(text or "").split(","))):
        address, _, port = item.partition("#")
        port = port or "53"
        if not port.isdigit() or not 1 <= int(port) <= 65535:
            raise ValueError(f"not a DNS server (ADDRESS or ADDRESS#PORT): {item!r}")
        servers.append((ipaddress.ip_address(address), int(port)))
    return servers


def upstreams(servers):
    """[(address, port)] the session's dnsmasq sends to, as its network namespace reaches them: the
    machine's loopback is slirp4netns' gateway there; none listed: slirp4netns' forwarder."""
    if not servers:
        return [(ipaddress.ip_address(SLIRP_DNS), 53)]
    return [(ipaddress.ip_address(SLIRP_GATEWAY) if address.is_loopback else address, port)
            for address, port in servers]


def reaches_loopback(servers):
    """Whether an upstream is on the machine's loopback (slirp4netns must then lead its gateway there)."""
    return any(address.is_loopback for address, _ in servers)


def dnsmasq_argv(allowed_hosts, servers):
    """dnsmasq's command line for a session (`allowed_hosts`: None, or the names it may look up)."""
    argv = ["/usr/sbin/dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv", "--no-hosts",
            "--no-poll", f"--listen-address={LISTEN}", "--bind-interfaces", "--port=53", "--pid-file=",
            "--log-facility=-",
            "--stop-dns-rebind", "--domain-needed", "--bogus-priv", "--cache-size=1000"]
    targets = [f"{address}#{port}" for address, port in upstreams(servers)]
    if allowed_hosts is None:
        argv += [f"--server={target}" for target in targets]
        return argv
    names = sorted({host.strip().lower().removeprefix("*.") for host in allowed_hosts} - {"localhost"})
    argv.append("--address=/#/")  # NXDOMAIN for every name not listed below
    for name in names:
        if _is_ip(name) or not NAME.match(name):
            continue
        argv += [f"--server=/{name}/{target}" for target in targets]
    return argv


def _is_ip(text):
    try:
        ipaddress.ip_address(text.strip("[]"))
        return True
    except ValueError:
        return False
