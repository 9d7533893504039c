"""The app's internal API for browser hosts (lantern_wire/hosts.py has the paths and shapes): registering,
heart-beats and reports, each authorised by the calling host's own credential.

Not part of the public API: it is left out of the OpenAPI document (the clients of the API never call it)
and described in docs/operations.md. Authentication skips these paths (app/orgs/auth.py); each view
finds its host by the bearer credential here.
"""
import math

from flask import Blueprint, current_app, g, request

from app.browsers import host_reports, hosts, replays
from app.core.errors import ApiError, bad_request
from app.orgs.auth import unauthorized
from lantern_wire.hosts import (
    HEARTBEAT,
    MAX_REPORT_ITEMS,
    MAX_UNAVAILABLE_REASON,
    REGISTER,
    REPLAYS,
    REPORTS,
    STOPPED,
)

MAX_UNIX_SECONDS = 253402300799  # 9999-12-31T23:59:59Z, the last second a datetime holds
blp = Blueprint("browser_hosts", __name__)


@blp.before_request
def authenticate_host():
    scheme, _, credential = request.headers.get("Authorization", "").partition(" ")
    host = hosts.authenticate(credential.strip()) if scheme.lower() == "bearer" else None
    if host is None:
        raise unauthorized("Unknown or revoked browser host credential.")
    g.browser_host = host
    g.log_quietly = True  # every host calls every 2 s and more: its answered calls are not one log line each


def _body(*fields):
    try:
        body = request.get_json(silent=True)
    except RecursionError:  # not a host's: its bodies nest a few levels
        raise bad_request("The request body nests too deep.") from None
    return host_reports.required(body, *fields)


def _session_ids(value):
    return isinstance(value, list) and len(value) <= MAX_REPORT_ITEMS and all(map(host_reports.is_session_id, value))


def _items(reports):
    """Reports plus their events and lines (each costs the app work)."""
    count = len(reports)
    for report in reports:
        if isinstance(report, dict):
            count += sum(len(report[key]) for key in ("events", "lines") if isinstance(report.get(key), list))
    return count


@blp.post(REGISTER)
def register():
    address, capacity, headful, reason = _body("address", "capacity", "headful", "unavailable_reason")
    if not hosts.control_url(address):
        raise bad_request(f"address is {hosts.CONTROL_URL}.", field="address")
    if type(capacity) is not int or not 0 <= capacity < 2**31:
        raise bad_request("capacity is a whole number of browsers.", field="capacity")
    if reason is not None and not (isinstance(reason, str) and len(reason) <= MAX_UNAVAILABLE_REASON):
        raise bad_request(f"unavailable_reason is a text of at most {MAX_UNAVAILABLE_REASON} characters, or null.",
                          field="unavailable_reason")
    return host_reports.register(g.browser_host, address, capacity, bool(headful), reason or None)


@blp.post(HEARTBEAT)
def heartbeat():
    running, active = _body("sessions", "active")
    if not (_session_ids(running) and _session_ids(active)):
        raise bad_request(f"sessions and active are lists of at most {MAX_REPORT_ITEMS} session ids.")
    return host_reports.heartbeat(g.browser_host, running, active)


@blp.post(REPORTS)
def reports():
    (reports,) = _body("reports")
    if not isinstance(reports, list):
        raise bad_request("reports is a list.", field="reports")
    if _items(reports) > MAX_REPORT_ITEMS:  # one request holds a worker for its length: the host sends half
        raise ApiError(413, "payload_too_large", f"At most {MAX_REPORT_ITEMS} reports, events and lines at once.")
    return {"results": host_reports.apply_reports(g.browser_host, reports)}


@blp.post(STOPPED)
def stopped():
    host_reports.stopped(g.browser_host)
    return {}


@blp.put(f"{REPLAYS}/<replay_id>")
def replay(replay_id):
    """A recording of a session this host runs (or ran), once it has ended: its MP4 as the body, or its error."""
    try:
        started_at, finished_at = (float(request.args[name]) for name in ("started_at", "finished_at"))
    except (KeyError, ValueError):
        started_at = finished_at = math.nan
    if not (0 <= started_at <= MAX_UNIX_SECONDS and 0 <= finished_at <= MAX_UNIX_SECONDS):  # (NaN is not)
        raise bad_request("started_at and finished_at are Unix times in seconds.")
    request.max_content_length = current_app.config["REPLAY_MAX_BYTES"]  # not MAX_CONTENT_LENGTH: videos are large
    status = replays.receive(g.browser_host, replay_id, started_at, finished_at, request.args.get("error"),
                             request.stream)
    return {"status": status}
