"""A session's DNS: a dnsmasq of its own, inside its sandbox (its network namespace, its cgroup, bubblewrap),
as Debian's unprivileged `dnsmasq` user, which alone of the session's processes the firewall lets reach
the upstream resolvers (network.firewall); every other packet to port 53 is refused. Its answers never hold
an address the firewall closes (private, loopback, link-local, shared, reserved ranges, but the networks the
operator opened with BROWSER_ALLOWED_NETWORKS: network.closed_networks), and for a session with
`network.allowed_hosts` it answers only the listed names (and names under them); any other is NXDOMAIN.

    servers = parse_servers("192.0.2.53, 127.0.0.1#5353")   # [] (""): the machine's own resolvers
    argv = dnsmasq_argv(allowed_hosts, servers, network.closed_networks(policy.allowed_networks))
"""
import ipaddress
import re

USER = "dnsmasq"  # Debian's dnsmasq-base makes this system user
LISTEN = "127.0.0.1"  # the session's resolv.conf names it
# slirp4netns' forwarder, which passes queries on to the resolvers in the machine's /etc/resolv.conf, and its
# gateway, which is the machine's loopback.
SLIRP_DNS, SLIRP_GATEWAY = "10.0.2.3", "10.0.2.2"
# A host name as DNS carries it (ASCII letters, digits, hyphens and underscores; labels of 1 to 63).
NAME = re.compile(r"^(?=.{1,253}$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?\.)*[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$")
# Where IDNA 2003 (Python's codec) and the UTS 46 processing browsers use give different names: ß, ς, ZWNJ, ZWJ.
DEVIATIONS = frozenset("\u00df\u03c2\u200c\u200d")


def normalize_host(host):
    """A host of an allowlist as Chromium, the resolver and the firewall meet it: an IP literal's text, or a name
    in lower-case ASCII without its final dot, an internationalized one in its xn-- form ('*.Bücher.de.' ->
    'xn--bcher-kva.de': a leading '*.' means the same as none); ValueError, naming it, for what is not a host."""
    text = str(host).strip()
    bare = text.removeprefix("*.")
    try:
        return str(ipaddress.ip_address(bare.strip("[]")))
    except ValueError:
        pass
    if DEVIATIONS & set(bare):
        raise ValueError(f"{text!r} holds ß, ς or a joiner, which browsers encode otherwise than this host: list "
                         "its xn-- form")
    try:
        name = bare.removesuffix(".").encode("idna").decode("ascii").lower()
    except UnicodeError:
        name = ""
    if not NAME.match(name):
        raise ValueError(f"not a host name: {text!r}")
    return name


def normalize_hosts(hosts):
    """normalize_host of each of `hosts`, in their order (ValueError for the first that is not a host)."""
    return [normalize_host(host) for host in hosts]


def is_ip(host):
    """Whether a normalized host is an IP literal."""
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


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


def format_servers(servers):
    """[(IPv4Address('192.0.2.53'), 53), (IPv4Address('127.0.0.1'), 5353)] -> '192.0.2.53,127.0.0.1#5353', as
    parse_servers reads it."""
    return ",".join(str(address) if port == 53 else f"{address}#{port}" for address, port in servers)


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


def dnsmasq_argv(allowed_hosts, servers, closed):
    """dnsmasq's command line for a session (`allowed_hosts`: None, or the names it may look up; ValueError
    for one that is not a host), answering NXDOMAIN for a name whose answer holds an address in `closed`."""
    argv = ["/usr/sbin/dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv", "--no-hosts",
            "--no-poll", f"--listen-address={LISTEN}", "--bind-interfaces", "--port=53", "--pid-file=",
            "--log-facility=-", "--domain-needed", "--bogus-priv", "--cache-size=1000"]
    # Not --stop-dns-rebind: its ranges are fixed, and lack some the firewall closes (100.64/10, 198.18/15,
    # multicast) while holding the networks an operator opens (whose names would then not resolve).
    argv += [f"--bogus-nxdomain={network}" for network in closed]
    targets = [f"{address}#{port}" for address, port in upstreams(servers)]
    if allowed_hosts is None:
        argv += [f"--server={target}" for target in targets]
        return argv
    names = sorted(set(normalize_hosts(allowed_hosts)) - {"localhost"})
    argv.append("--address=/#/")  # NXDOMAIN for every name not listed below
    for name in names:
        if not is_ip(name):
            argv += [f"--server=/{name}/{target}" for target in targets]
    return argv
