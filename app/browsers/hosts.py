"""Browser hosts as the app sees them: their credentials, placing a session on a live host with room,
and the per-session CDP token (random, stored hashed). Their control API is called through
app/browsers/host_client.py. What hosts report comes in through app/browsers/host_reports.py; lost hosts' sessions
end in app/browsers/lost_hosts.py.

The host program itself is browserhost/ (`python -m browserhost`); lantern_wire/hosts.py is what both
sides share: the credential's two uses, the internal API's paths.
"""
import hashlib
import hmac
import logging
import secrets
from datetime import timedelta

from peewee import fn

from app.browsers.models import BrowserHost, BrowserSession
from app.core import clock, crypto, urls
from app.core.db import exclusive
from app.core.errors import ApiError, bad_request, conflict
from app.core.settings import settings
from lantern_wire.hosts import CONTROL_URL, control_key, control_url, credential_hash

logger = logging.getLogger(__name__)
# A host whose heartbeat is this many beats late (plus a second for a busy network) is placed only when no
# punctual host has room: a host that died leaves placement within about two beats, not the whole timeout.
LATE_AFTER_BEATS = 2


# -- credentials ---------------------------------------------------------------------------

def add(name, address, *, replace=False):
    """A new credential for the host `name` at `address` (added when new; with `replace`, an existing host's
    credential and address are replaced and a revoked one is let in again); shown once, only its hash and the
    control key kept. The host registers at `address` only: a credential taken elsewhere cannot point the
    app's calls, and new sessions, at an address of the taker's."""
    if not control_url(address):
        raise bad_request(f"--address is {CONTROL_URL}, such as http://10.0.0.12:8790.", field="address")
    credential = "lbh_" + secrets.token_urlsafe(32)
    fields = {"credential_hash": credential_hash(credential), "control_key": crypto.encrypt(control_key(credential)),
              "revoked_at": None, "address": address.rstrip("/")}
    host = BrowserHost.get_or_none(BrowserHost.name == name)
    if host is None:
        BrowserHost.create(name=name, capacity=0, heartbeat_at=clock.EPOCH, **fields)
    elif replace:
        BrowserHost.update(**fields).where(BrowserHost.id == host.id).execute()
    else:
        raise conflict("browser_host_exists", f"A browser host named {name!r} exists: give it a new credential "
                       "with --replace (a revoked one too), or choose another name.")
    return credential


def revoke(name):
    """Refuse the host's credential from now on; its sessions end host_lost (lost_hosts' sweep). False: no such host."""
    return BrowserHost.update(revoked_at=clock.now(), heartbeat_at=clock.EPOCH).where(
        (BrowserHost.name == name) & BrowserHost.revoked_at.is_null()).execute() == 1


def limit(name, max_browsers):
    """Give the host `name` at most `max_browsers` browsers at once whatever capacity it registers (None: what
    it registers; 0: no new session). Sessions it runs already go on. False: no such host."""
    if max_browsers is not None and not 0 <= max_browsers < 2**31:
        raise bad_request("The limit is a whole number of browsers, 0 or more.", field="max_browsers")
    return BrowserHost.update(max_browsers=max_browsers).where(BrowserHost.name == name).execute() == 1


def listing(timeout_seconds):
    """Every host as `hosts list` shows it: name, state (live, silent, revoked), address, capacity (and the
    operator's limit), sessions."""
    live = {host.id for host in BrowserHost.live(timeout_seconds)}
    load = _load([host.id for host in BrowserHost.select(BrowserHost.id)])
    return [{"name": host.name, "address": host.address, "capacity": host.capacity, "max_browsers": host.max_browsers,
             "sessions": load.get(host.id, 0),
             "state": "revoked" if host.revoked_at else "live" if host.id in live else "silent",
             "heartbeat_at": clock.isoformat(host.heartbeat_at) if host.heartbeat_at > clock.EPOCH else "never",
             "unavailable_reason": host.unavailable_reason}
            for host in BrowserHost.select().order_by(BrowserHost.name)]


def authenticate(credential):
    """The host whose credential this is, unless it was revoked; else None."""
    if not credential:
        return None
    return BrowserHost.get_or_none((BrowserHost.credential_hash == credential_hash(credential))
                                   & BrowserHost.revoked_at.is_null())


# -- CDP tokens ------------------------------------------------------------------------------

def new_cdp_token(session):
    """Give `session` a new random CDP token (its hash to check, the token encrypted for its record); the token."""
    token = secrets.token_urlsafe(24)
    session.cdp_token, session.cdp_token_hash = crypto.encrypt(token), _token_hash(token)
    return token


def cdp_token(session):
    """The token of the session's CDP URL, or None (a session from before tokens were random)."""
    return crypto.decrypt(session.cdp_token) if session.cdp_token else None


def token_matches(session, token):
    """Whether `token` is the session's: it opens that session only, and only while it is active (the
    relay checks); neither a host credential nor the encryption keys alone give it."""
    return bool(token and session.cdp_token_hash) and hmac.compare_digest(_token_hash(token), session.cdp_token_hash)


def _token_hash(token):
    return hashlib.sha256(token.encode()).hexdigest()


def public_ws_base():
    """ws(s)://host[:port] where clients reach this server (PUBLIC_BASE_URL, else the request's host)."""
    base = urls.public_base_url()
    return ("wss" if base.startswith("https:") else "ws") + base[base.index(":"):]


# -- placement ---------------------------------------------------------------------------------

def place(*, headful, excluding=()):
    """A live host with room for one more browser, punctual ones first (a host late by LATE_AFTER_BEATS beats
    may have died), then least loaded, held until the caller's transaction ends (so parallel creates cannot
    overfill it); 503 when there is none. `excluding`: ids of hosts that did not take this session."""
    config = settings()
    retry_after = {"Retry-After": str(config.browser_capacity_retry_after_seconds)}
    hosts = [host for host in BrowserHost.live(config.browser_host_timeout_seconds) if host.id not in excluding]
    if not hosts:
        raise ApiError(503, "no_browser_host", "No browser host is running. Add one (flask --app app browsers hosts "
                       "add NAME) and start it with its credential (python -m browserhost; make run does both); it "
                       "needs Debian's chromium (apt-get install chromium).", headers=retry_after)
    usable = [h for h in hosts if not h.unavailable_reason]
    if not usable:
        reasons = "; ".join(f"{h.name}: {h.unavailable_reason}" for h in hosts)
        raise ApiError(503, "no_browser_host", f"No browser host can start browsers ({reasons}).",
                       headers=retry_after)
    if headful and not any(h.headful for h in usable):
        raise bad_request("headless false needs Xvfb on a browser host, and none has it: install it there "
                          "(apt-get install xvfb) and restart the host, or create the session with headless true.",
                          field="headless")
    load = _load([h.id for h in usable])
    punctual = clock.now() - timedelta(seconds=config.browser_host_heartbeat_seconds * LATE_AFTER_BEATS + 1)
    for host in sorted((h for h in usable if h.headful or not headful),
                       key=lambda h: (h.heartbeat_at < punctual, load.get(h.id, 0) / max(h.browsers_allowed, 1),
                                      h.name)):
        with exclusive(host):  # on Postgres the row lock lasts until the caller's transaction ends
            if _load([host.id]).get(host.id, 0) < host.browsers_allowed:
                return host
    capacity = sum(h.browsers_allowed for h in usable)
    raise ApiError(503, "no_browser_capacity", f"Every browser host is full ({capacity} browsers); end a session "
                   "or retry later.", headers=retry_after)


def _load(host_ids):
    rows = (BrowserSession.select(BrowserSession.host, fn.COUNT(BrowserSession.id))
            .where(BrowserSession.deleted_at.is_null() & BrowserSession.host.in_(host_ids))
            .group_by(BrowserSession.host).tuples())
    return dict(rows)
