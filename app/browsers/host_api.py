"""The app's internal API for browser hosts (lantern_wire/hosts.py has the paths and shapes): registering,
heart-beats and reports, each authorised by the calling host's own credential.

Not part of the public API: it is left out of the OpenAPI document (the clients of the API never call it)
and described in docs/operations.md. Authentication skips these paths (app/orgs/auth.py); each view
finds its host by the bearer credential here.
"""
from flask import Blueprint, g, request

from app.browsers import host_reports, hosts, replays
from app.core import blobs
from app.core.errors import ApiError, bad_request, not_found
from app.core.settings import settings
from app.orgs.auth import unauthorized
from lantern_wire.control import SHA256
from lantern_wire.hosts import (
    CONTROL_URL,
    HEARTBEAT,
    MAX_REPORT_ITEMS,
    REGISTER,
    REPLAYS,
    REPORTS,
    STOPPED,
    control_url,
)
from lantern_wire.reports import (
    EXTENSIONS,
    Heartbeat,
    InvalidShape,
    Registration,
    ReplayUpload,
    ReportsRequest,
    parse,
)

blp = Blueprint("browser_hosts", __name__)


@blp.before_request
def authenticate_host():
    scheme, _, credential = request.headers.get("Authorization", "").partition(" ")
    host = hosts.authenticate(credential.strip()) if scheme.lower() == "bearer" else None
    if host is None:
        raise unauthorized("Unknown or revoked browser host credential.")
    g.browser_host = host
    g.log_quietly = True  # every host calls every 2 s and more: its answered calls are not one log line each


def _body(shape):
    """The JSON body as `shape`; 400 in the API's error shape naming each wrong field."""
    try:
        body = request.get_json(silent=True)
    except RecursionError:  # not a host's: its bodies nest a few levels
        raise bad_request("The request body nests too deep.") from None
    if not isinstance(body, dict):
        raise bad_request("The body must be a JSON object.")
    return _parsed(shape, body)


def _parsed(shape, data):
    try:
        return parse(shape, data)
    except InvalidShape as invalid:
        raise ApiError(400, "bad_request", str(invalid), details=[
            {"code": "invalid", "field": field, "message": message} for field, message in invalid.problems]) from None


@blp.post(REGISTER)
def register():
    registration = _body(Registration)
    if not control_url(registration.address):
        raise bad_request(f"address is {CONTROL_URL}.", field="address")
    return host_reports.register(g.browser_host, registration)


@blp.post(HEARTBEAT)
def heartbeat():
    beat = _body(Heartbeat)
    return host_reports.heartbeat(g.browser_host, beat.sessions, beat.active)


@blp.post(REPORTS)
def reports():
    body = _body(ReportsRequest)
    if body.items() > MAX_REPORT_ITEMS:  # one request holds a worker for its length: the host sends half
        raise ApiError(413, "payload_too_large", f"At most {MAX_REPORT_ITEMS} reports, events and lines at once.")
    return {"results": [result.to_dict() for result in host_reports.apply_reports(g.browser_host, body.reports)]}


@blp.post(STOPPED)
def stopped():
    host_reports.stopped(g.browser_host)
    return {}


@blp.put(f"{REPLAYS}/<replay_id>")
def replay(replay_id):
    """A recording of a session this host runs (or ran), once it has ended: its MP4 as the body, or its error."""
    try:
        upload = parse(ReplayUpload, request.args.to_dict())
    except InvalidShape as invalid:
        raise bad_request(f"started_at and finished_at are Unix times in seconds ({invalid}).",
                          field=invalid.field) from None
    request.max_content_length = settings().replay_max_bytes  # not MAX_CONTENT_LENGTH: videos are large
    status = replays.receive(g.browser_host, replay_id, upload.started_at, upload.finished_at, upload.error,
                             request.stream)
    return {"status": status}


@blp.get(f"{EXTENSIONS}/<digest>")
def extension(digest):
    """An extension's zip archive by its SHA-256, streamed: only one that a session placed on this host and not ended
    names (a host reads what it was asked to start, not every tenant's extensions)."""
    if not SHA256.fullmatch(digest) or not host_reports.names_extension(g.browser_host, digest):
        raise not_found(f"No extension {digest[:64]!r} of a session of browser host {g.browser_host.name!r}.")
    return blobs.send_file(blobs.store().path(digest), mimetype="application/zip", conditional=False)
