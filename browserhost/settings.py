"""The browser host's settings, from `LANTERN_<NAME>` environment variables (the names the app's settings use,
so one environment file can serve both on one machine); the command line's options come on top. They are read and
checked once at start: a wrong one stops the host with one line naming it, its value and what it takes.

The host reads no file of the app: no database URL, no encryption keys. What it needs of the app is
where to reach it (APP_URL) and its own credential (`flask browsers hosts add NAME` prints it once).
"""
import os
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    NonNegativeInt,
    PlainSerializer,
    PositiveInt,
)

from browserhost import resolver, sandbox_policy
from lantern_wire.settings_errors import validated

PREFIX = "LANTERN_"


def text_parsed_by(kind, parse, write):
    """A setting of type `kind` given as text, parsed once at start by `parse` (the code's own parser: a wrong value
    is refused at start, not at first use) and written back as text by `write`, so its variable reads the same."""
    return Annotated[kind, BeforeValidator(lambda value: tuple(parse(value)) if isinstance(value, str) else value),
                     PlainSerializer(write, return_type=str)]


Ports = text_parsed_by(tuple[tuple[int, int], ...], sandbox_policy.parse_ports, sandbox_policy.format_ports)
Networks = text_parsed_by(tuple[IPv4Network | IPv6Network, ...], sandbox_policy.parse_networks,
                          sandbox_policy.format_networks)
DnsServers = text_parsed_by(tuple[tuple[IPv4Address | IPv6Address, int], ...], resolver.parse_servers,
                            resolver.format_servers)


# A whole number whose 0, as before typed settings, means "none given": worked out from the machine's memory.
ZeroIsUnset = Annotated[NonNegativeInt | None, AfterValidator(lambda value: value or None)]
DEFAULT_HOST_DIR = Path("instance", "browser-host")
SWITCH = {"on": "on", "true": "on", "1": "on", "off": "off", "false": "off", "0": "off"}


def on_or_off(value):
    """BROWSER_SANDBOX's words, in any case; anything else is left for the refusal to name."""
    return SWITCH.get(value.strip().lower(), value) if isinstance(value, str) else value


def http_url(value):
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("should be a URL starting with http:// or https://")
    return value


class HostSettings(BaseModel):
    """The host's settings, frozen. Attribute `app_url` is setting APP_URL (LANTERN_APP_URL)."""

    model_config = ConfigDict(extra="forbid", frozen=True, alias_generator=str.upper, validate_by_name=True)

    # The app's base URL as this host reaches it (its internal API for hosts), e.g. http://10.0.0.5:8000.
    app_url: Annotated[str, AfterValidator(http_url)] = "http://127.0.0.1:8000"
    # This host's credential, or a file holding it (mode 0600; the credential wins when both are set).
    browser_host_credential: str | None = None
    browser_host_credential_file: Path | None = None
    # Most browsers at once (None or 0: 80% of the machine's memory / BROWSER_HOST_MEMORY_PER_BROWSER_MB, as an
    # idle headless Chromium is ~380 MB PSS here).
    browser_host_capacity: ZeroIsUnset = None
    browser_host_memory_per_browser_mb: PositiveInt = 512
    # The browsers' folders (empty: instance/browser-host under the working folder).
    browser_host_dir: Annotated[Path, BeforeValidator(lambda value: value or DEFAULT_HOST_DIR),
                                AfterValidator(Path.absolute), Field(validate_default=True)] = DEFAULT_HOST_DIR
    # Chromium (None: Debian's /usr/lib/chromium/chromium).
    browser_chromium_path: str | None = None
    # Reports (telemetry, log lines) waiting for the app, at most: past it they are dropped and counted (the
    # app may be away; capture never waits for it).
    browser_host_report_queue: PositiveInt = 200_000
    # Extension archives this host keeps once fetched from the app (browserhost/extension_cache.py), in MiB at most:
    # past it the least recently used go, fetched again when a session names them.
    browser_extension_cache_mb: PositiveInt = 1024
    # The most of one CDP message a session's telemetry capture holds, in MiB: a longer one (a page logging a
    # 200 MB string) is skipped while it is read and counted as dropped, so the host's memory stays bounded.
    browser_capture_max_message_mb: PositiveInt = 16
    # Sandboxes (browserhost/sandbox.py; docs/browsers.md, "Isolation"). "on": each session's browser runs in
    # a sandbox of its own (own files, unprivileged user, network namespace, cgroup), and a host that cannot
    # make one starts no browser and says why; "off": browsers run as the host's user on its files and
    # network, with a warning at the host's start. true/false and 1/0 say the same, in any case.
    browser_sandbox: Annotated[Literal["on", "off"], BeforeValidator(on_or_off)] = "on"
    # The unprivileged user sandboxes run as (a name or a uid); `make run` creates lantern-browser.
    browser_sandbox_user: Annotated[str, Field(min_length=1)] = "lantern-browser"
    # Where sandboxes keep their folders (home, DevTools socket): a path the sandbox user can walk, so not
    # under a home folder; every host of the machine may share it.
    browser_sandbox_dir: Annotated[str, Field(pattern="^/")] = "/var/lib/lantern/sandboxes"
    # Host loopback ports sandboxes may reach, at the same http://127.0.0.1:PORT inside ("18000-18099,3000";
    # none by default): for a development server, or tests.
    browser_loopback_ports: Ports = ()
    # Private, shared or link-local ranges sandboxes may reach (CIDRs, comma-separated; none by default).
    browser_allowed_networks: Networks = ()
    # A session's sandbox may hold as much memory as the session's `memory` (1GiB headless and 8GiB headful
    # by default; past it the session ends with end_reason "oom"), and this many processes and threads.
    browser_sandbox_pids: PositiveInt = 1024
    # The cores one session's sandbox may keep busy at most (a fraction is fine: "0.5"), slirp4netns and its
    # helpers included; with cores contended, sessions share them in proportion. One session spinning on every
    # core must not slow the others' starts and the API.
    browser_sandbox_cpus: Annotated[float, Field(ge=0.01, le=1024)] = 1.0
    # The resolvers sessions' own dnsmasq asks ("192.0.2.53, 127.0.0.1#5353"; none: the machine's own, those of its
    # /etc/resolv.conf). Whatever they answer, a session never gets a private, loopback or link-local address.
    browser_dns_servers: DnsServers = ()
    # What every sandbox of this machine may hold together, in MiB (None or 0: 80% of the machine's memory). Each
    # session asks for its own cap, and they may add up past the machine: past this, the kernel ends a browser
    # (a session ends "oom"), not the app, its database or this host.
    browser_sandboxes_memory_mb: ZeroIsUnset = None


NAMES = {field.alias: name for name, field in HostSettings.model_fields.items()}  # APP_URL -> app_url
SECRETS = {"BROWSER_HOST_CREDENTIAL"}


def load(environ=None, **overrides):
    """The settings: defaults, then LANTERN_<NAME> variables (an empty one is None where None is allowed), then
    `overrides` by name (the command line's; None: not given). SettingsError for a wrong one."""
    environ = os.environ if environ is None else environ
    values, origins = {}, {}
    for name in NAMES:
        text = environ.get(PREFIX + name)
        if text is not None:
            optional = HostSettings.model_fields[NAMES[name]].default is None
            values[name], origins[name] = (None if optional and text == "" else text), PREFIX + name
    for name, value in overrides.items():
        if value is not None:
            values[name], origins[name] = value, "the command line"
    settings = validated(HostSettings, values, origins, program="The browser host", secrets=SECRETS)
    if settings.browser_sandboxes_memory_mb is None:
        settings = settings.model_copy(update={"browser_sandboxes_memory_mb": browsers_memory_mb()})
    return settings


def credential(settings):
    """This host's credential: the setting, else the file's first line; None when neither is given."""
    if settings.browser_host_credential:
        return settings.browser_host_credential.strip()
    if settings.browser_host_credential_file:
        return settings.browser_host_credential_file.read_text().strip() or None
    return None


def browsers_memory_mb():
    """80% of the machine's memory, in MiB: what its browsers may take together."""
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * 0.8) // (1024 * 1024)


def memory_capacity(per_browser_mb):
    """As many browsers as 80% of the machine's memory holds."""
    return max(1, browsers_memory_mb() // per_browser_mb)
