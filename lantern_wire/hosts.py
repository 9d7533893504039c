"""The contract between the app and its browser hosts: the app's internal API for hosts, how a host's
credential authorises both directions, and the values both sides name (end reasons, categories).

A host credential is created by the app (`flask browsers hosts add NAME --address URL`), shown once and
stored hashed; it registers at that address only. The host sends it as a bearer token on every call to the
app's internal API. The app calls
the host's control API with a key derived from it (`control_key`), kept encrypted by the app: so a
stolen credential opens that one host and the internal API as that host, never another host, and
the database alone (without the encryption keys) opens neither.

The internal API (JSON; every answer's error shape is the public API's {"code", "message"}):

    POST /internal/browser-hosts/register   {"address", "capacity", "headful", "unavailable_reason"}
         -> {"name", "heartbeat_seconds"}    sessions the app still gives this host end host_restarted;
         403 when the address is not the one the host was added with
    POST /internal/browser-hosts/heartbeat  {"sessions": [ids running], "active": [ids with CDP clients]}
         -> {"stop": [ids that ended without the host being told],
             "categories": {id: [telemetry categories to capture]}}
    POST /internal/browser-hosts/reports    {"reports": [report, ...]}, applied in order, each on its own:
         {"session_id", "batch", "kind": "telemetry", "events": [...]}
         {"session_id", "batch", "kind": "logs", "source", "log_name", "lines": [{"message", "timestamp"?}]}
         {"session_id", "kind": "activity"}
         {"session_id", "kind": "ended", "reason"}
         -> {"results": [{"status": "ok" | "ended" | "refused", ...}, ...]}: each answered only once committed
    POST /internal/browser-hosts/stopped    {} -> {}: the host takes no more sessions
    PUT  /internal/browser-hosts/replays/{replay_id}?started_at=&finished_at=[&error=]
         the body: the recording's MP4 (video/mp4), or nothing with `error` -> {"status"}; a recording
         of a session this host runs (or ran), sent once it has ended (its times: Unix seconds)
"""
import hashlib
import hmac
from urllib.parse import urlsplit

API_PREFIX = "/internal/browser-hosts"
REGISTER, HEARTBEAT, REPORTS, STOPPED = (f"{API_PREFIX}/{name}" for name in ("register", "heartbeat", "reports",
                                                                            "stopped"))
REPLAYS = f"{API_PREFIX}/replays"
# A report's batch numbers rise by one per report of a session from one run of its host: the app applies a
# batch once (the host sends it again when it did not hear the answer).
BATCHED_KINDS = ("telemetry", "logs")
REPORT_KINDS = (*BATCHED_KINDS, "activity", "ended")
# Reports plus their events and lines in one request, at most (more: 413, and the host sends half); events or
# lines in one report, at most (a host splits longer ones).
MAX_REPORT_ITEMS = 5000
MAX_REPORT_LINES = 1000
# Why a host cannot start browsers, at most (every create names it while no other host can).
MAX_UNAVAILABLE_REASON = 2000

# Why a host ends a session (the record's end_reason): it restarted without it, stopped, the browser
# exited by itself, or a process of its sandbox went past the memory cap.
ENDED_BY_HOST_RESTART, ENDED_BY_HOST_STOP = "host_restarted", "host_stopped"
ENDED_BY_BROWSER_EXIT, ENDED_BY_OOM = "browser_exited", "oom"
HOST_END_REASONS = (ENDED_BY_HOST_RESTART, ENDED_BY_HOST_STOP, ENDED_BY_BROWSER_EXIT, ENDED_BY_OOM)

# The telemetry categories whose events a browser's DevTools protocol produces (a host's capture).
CDP_CATEGORIES = ("console", "network", "page", "interaction", "control", "screenshot")

# A host's address, as it is added and registers with it: the app calls it with the host's key.
CONTROL_URL = "the http URL of the host's control API, as it advertises it (scheme, host and port only)"


def control_url(address):
    """Whether `address` is a plain http://host[:port] (the app calls it with the host's key: nothing else). A host
    serves plain HTTP, and the CDP relay speaks it to the host's port: an https address would carry the key in
    clear to a port that expects TLS."""
    if not isinstance(address, str) or len(address) > 255 or not (address.isascii() and address.isprintable()):
        return False
    parts = urlsplit(address)
    try:
        parts.port  # noqa: B018 - raises ValueError for a port that is not one
    except ValueError:
        return False
    return (parts.scheme == "http" and bool(parts.hostname) and not (parts.username or parts.password)
            and parts.path in ("", "/") and not parts.query and not parts.fragment)


def credential_hash(credential):
    """What the app stores of a host credential, and looks it up by."""
    return hashlib.sha256(credential.encode()).hexdigest()


def control_key(credential):
    """The key the app calls this host's control API with, derived from the host's credential."""
    return hmac.new(credential.encode(), b"lantern: the app calls this browser host", hashlib.sha256).hexdigest()
