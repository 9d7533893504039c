"""The app's internal API for browser hosts (lantern_wire/hosts.py has the paths and shapes): registering,
heart-beats and reports, each authorised by the calling host's own credential.

Not part of the public API: it is left out of the OpenAPI document (the clients of the API never call it)
and described in docs/operations.md. Authentication skips these paths (app/core/auth.py); each view
finds its host by the bearer credential here.
"""
from flask import Blueprint, g, request

from app.browsers import host_reports, hosts
from app.core.auth import unauthorized
from app.core.errors import bad_request
from lantern_wire.hosts import HEARTBEAT, REGISTER, REPORTS, STOPPED

blp = Blueprint("browser_hosts", __name__)


@blp.before_request
def authenticate_host():
    scheme, _, credential = request.headers.get("Authorization", "").partition(" ")
    host = hosts.authenticate(credential.strip()) if scheme.lower() == "bearer" else None
    if host is None:
        raise unauthorized("Unknown or revoked browser host credential.")
    g.browser_host = host


def _body(*fields):
    return host_reports.required(request.get_json(silent=True), *fields)


def _strings(value):
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


@blp.post(REGISTER)
def register():
    address, capacity, headful, reason = _body("address", "capacity", "headful", "unavailable_reason")
    if not isinstance(address, str) or type(capacity) is not int or capacity < 0:
        raise bad_request("address must be a URL and capacity a whole number.")
    return host_reports.register(g.browser_host, address, capacity, bool(headful), reason or None)


@blp.post(HEARTBEAT)
def heartbeat():
    running, active = _body("sessions", "active")
    if not (_strings(running) and _strings(active)):
        raise bad_request("sessions and active are lists of session ids.")
    return host_reports.heartbeat(g.browser_host, running, active)


@blp.post(REPORTS)
def reports():
    (reports,) = _body("reports")
    if not isinstance(reports, list):
        raise bad_request("reports is a list.", field="reports")
    return {"results": host_reports.apply_reports(g.browser_host, reports)}


@blp.post(STOPPED)
def stopped():
    host_reports.stopped(g.browser_host)
    return {}
