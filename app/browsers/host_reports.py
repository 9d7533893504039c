"""What browser hosts tell the app over its internal API (lantern_wire/hosts.py): registering, heart-beats,
and the reports of their sessions (telemetry, log lines, activity, ends), each applied once.

A host speaks for its own sessions only: a report naming a session placed elsewhere is refused.
Reports are applied in the order sent, each in its own transaction, and answered only once committed;
a telemetry or log report carries the session's next batch number, and one applied before is answered
without being applied again, so a host that did not hear an answer sends the batch again safely.
"""
import logging
import re
from datetime import timedelta

import marshmallow as ma
from flask import current_app
from peewee import DataError

from app.browsers import lifecycle, logs, telemetry
from app.browsers.models import BrowserHost, BrowserSession
from app.browsers.telemetry_settings import session_categories
from app.core import clock
from app.core.db import db
from app.core.errors import ApiError, bad_request, forbidden
from app.core.text import one_line, storable
from lantern_wire.hosts import (
    BATCHED_KINDS,
    ENDED_BY_HOST_RESTART,
    HOST_END_REASONS,
    MAX_REPORT_LINES,
    REPORT_KINDS,
)
from lantern_wire.telemetry import InvalidEvent, validate_event

MAX_INT64 = 2**63 - 1
SESSION_ID = re.compile(r"[a-z0-9]{1,64}")  # app.core.ids.new_id's, and room to spare

logger = logging.getLogger(__name__)
MAX_LOG_LINE = 64 * 1024
LOG_SOURCES = ("path", "supervisor")


def register(host, address, capacity, headful, unavailable_reason):
    """A host (re)starting: what it can take, at the address it was added with. Whatever the app still gives it
    died with its previous run (which cleaned up: nothing to ask it)."""
    address = address.rstrip("/")
    if address != host.address:
        added = (f"was added at {host.address}, not {address}: start it with --advertise {host.address}, or give "
                 "it its new address" if host.address else "was added before hosts had addresses: give it one")
        raise forbidden(f"Browser host {host.name} {added} (flask browsers hosts add {host.name} --replace --address "
                        f"{address}).")
    now = clock.now()
    with db.atomic():
        BrowserHost.update(address=address, capacity=capacity, headful=headful,
                           unavailable_reason=unavailable_reason and one_line(unavailable_reason),
                           started_at=now, heartbeat_at=now).where(BrowserHost.id == host.id).execute()
        for session in BrowserSession.active().where(BrowserSession.host == host.id):
            _end_here(session, ENDED_BY_HOST_RESTART)
    return {"name": host.name, "heartbeat_seconds": current_app.config["BROWSER_HOST_HEARTBEAT_SECONDS"]}


def heartbeat(host, running, active):
    """The host is alive; its sessions with CDP clients are active. Answers which of its browsers to stop (their
    session ended a while ago without the host being told: a stop that failed to reach it; recently ended ones
    are left to the stop on its way, which may save the profile) and each running session's categories."""
    BrowserHost.update(heartbeat_at=clock.now()).where(BrowserHost.id == host.id).execute()
    recently = clock.now() - timedelta(seconds=current_app.config["BROWSER_HOST_START_SECONDS"] * 2)
    current = {session.id: session for session in BrowserSession.select().where(
        BrowserSession.id.in_(running) & (BrowserSession.host == host.id)
        & (BrowserSession.deleted_at.is_null() | (BrowserSession.deleted_at > recently)))}
    for session_id in set(active) & set(current):
        if current[session_id].is_active:
            lifecycle.touch(current[session_id])
    return {"stop": sorted(set(running) - set(current)),
            "categories": {session_id: session_categories(session)
                           for session_id, session in current.items() if session.is_active}}


def stopped(host):
    """The host stopped: it takes no new session (its sessions ended one by one in its reports)."""
    BrowserHost.update(heartbeat_at=clock.EPOCH).where(BrowserHost.id == host.id).execute()


def apply_reports(host, reports):
    """Each report's result, in order: {"status": "ok", ...}, "ended" (the session has ended: nothing more of
    it is kept) or "refused" (with a message: not this host's session, or a malformed report)."""
    return [_apply(host, report) for report in reports]


def _apply(host, report):
    try:
        kind, session_id, batch = _checked(report)
    except ma.ValidationError as error:
        return {"status": "refused", "message": str(error.messages)}
    session = BrowserSession.get_or_none(BrowserSession.id == session_id)
    if session is None or session.host_id not in (host.id, None) or (session.host_id is None and session.is_active):
        return {"status": "refused", "message": f"session {session_id} is not run by browser host {host.name}"}
    if session.host_id is None:  # its host was taken off it (lost): it has ended, whoever ran it
        return {"status": "ended"}
    try:
        if kind == "telemetry":
            events, invalid = _events(report["events"])
            accepted, dropped, last_seq = telemetry.ingest(session, events, activity=False, batch=batch,
                                                           lost=(report.get("lost") or 0) + invalid)
            return {"status": "ok", "accepted": accepted, "dropped": dropped, "last_seq": last_seq}
        if kind == "logs":
            lines = [{"message": storable(line["message"][:MAX_LOG_LINE])} for line in report["lines"]]
            return {"status": "ok", "accepted": logs.ingest(session, report["source"], storable(report["log_name"]),
                                                            lines, activity=False, batch=batch)}
        if not session.is_active:
            return {"status": "ended"}
        if kind == "activity":
            lifecycle.touch(session)
        else:
            _end_here(session, report["reason"])
        return {"status": "ok"}
    except ApiError as error:
        if error.status != 409:
            raise
        return {"status": "ended"}
    except DataError as error:  # a value the database refuses: this report alone is refused
        return {"status": "refused", "message": f"the database refused it: {error}"}


def _checked(report):
    """(kind, session id, batch) of a well-formed report; ValidationError naming what is wrong."""
    if not isinstance(report, dict) or report.get("kind") not in REPORT_KINDS:
        raise ma.ValidationError(f"kind must be one of {', '.join(REPORT_KINDS)}")
    kind, session_id, batch = report["kind"], report.get("session_id"), report.get("batch")
    if not is_session_id(session_id):
        raise ma.ValidationError("session_id must be a session's id")
    if kind in BATCHED_KINDS and not (type(batch) is int and 0 < batch <= MAX_INT64):
        raise ma.ValidationError("batch must be a positive 64-bit integer")
    if kind == "telemetry" and not (_list_of(report.get("events"), dict)
                                    and type(report.get("lost", 0)) is int and 0 <= report.get("lost", 0) < 2**31):
        raise ma.ValidationError(f"a telemetry report has a list of at most {MAX_REPORT_LINES} events (and a count "
                                 "of lost ones)")
    if kind == "logs" and not (report.get("source") in LOG_SOURCES and isinstance(report.get("log_name"), str)
                               and 0 < len(report["log_name"]) <= 255 and _list_of(report.get("lines"), dict)
                               and all(isinstance(line.get("message"), str) for line in report["lines"])):
        raise ma.ValidationError(f"a logs report has a source ({', '.join(LOG_SOURCES)}), a log_name and at most "
                                 f"{MAX_REPORT_LINES} lines of {{message}}")
    if kind == "ended" and report.get("reason") not in HOST_END_REASONS:
        raise ma.ValidationError(f"reason must be one of {', '.join(HOST_END_REASONS)}")
    return kind, session_id, batch


def is_session_id(value):
    return isinstance(value, str) and SESSION_ID.fullmatch(value) is not None


def _list_of(value, kind):
    return isinstance(value, list) and len(value) <= MAX_REPORT_LINES and all(isinstance(v, kind) for v in value)


def _events(events):
    """(the events the ingest endpoint would accept, how many it would refuse): one it would refuse is dropped,
    counted as the session's dropped events and said in the log (a host captures only events of the catalogue:
    one that is not is a defect to see, not a reason to lose the rest)."""
    now_us = clock.micros(clock.now())
    valid = []
    for event in events:
        try:
            valid.append(validate_event(event, now_us=now_us))
        except InvalidEvent as error:
            logger.warning("a browser host's %s event was not valid: %s", event.get("type"), error.messages)
    return valid, len(events) - len(valid)


def _end_here(session, reason):
    """End a session its host already stopped (nothing to ask the host)."""
    session.host_id = None
    lifecycle.end(session, reason)


def required(body, *fields):
    """The named fields of a JSON body; 400 naming the first one missing."""
    if not isinstance(body, dict):
        raise bad_request("The body must be a JSON object.")
    for name in fields:
        if name not in body:
            raise bad_request(f"{name} is required.", field=name)
    return [body[name] for name in fields]
