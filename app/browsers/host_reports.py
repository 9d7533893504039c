"""What browser hosts tell the app over its internal API (lantern_wire/hosts.py): registering, heart-beats,
and the reports of their sessions (telemetry, log lines, activity, ends), each applied once.

A host speaks for its own sessions only: a report naming a session placed elsewhere is refused.
Reports are applied in the order sent, each in its own transaction, and answered only once committed;
a telemetry or log report carries the session's next batch number, and one applied before is answered
without being applied again, so a host that did not hear an answer sends the batch again safely.
"""
import logging
from datetime import timedelta

from peewee import DataError

from app.browsers import drivers, lifecycle, logs, telemetry
from app.browsers.models import BrowserHost, BrowserSession
from app.core import clock
from app.core.db import db
from app.core.errors import ApiError, forbidden
from app.core.settings import settings
from app.core.text import one_line, storable
from app.extensions.models import Extension
from lantern_wire.hosts import ENDED_BY_HOST_RESTART
from lantern_wire.reports import (
    ActivityReport,
    HeartbeatAnswer,
    InvalidShape,
    LogsReport,
    Registered,
    ReportResult,
    TelemetryReport,
    parse_report,
)
from lantern_wire.telemetry import InvalidEvent, validate_event

logger = logging.getLogger(__name__)
MAX_LOG_LINE = 64 * 1024


def register(host, registration):
    """A host (re)starting (a lantern_wire.reports.Registration): what it can take, at the address it was added
    with. Whatever the app still gives it died with its previous run (which cleaned up: nothing to ask it)."""
    address = registration.address.rstrip("/")
    if address != host.address:
        added = (f"was added at {host.address}, not {address}: start it with --advertise {host.address}, or give "
                 "it its new address" if host.address else "was added before hosts had addresses: give it one")
        raise forbidden(f"Browser host {host.name} {added} (flask browsers hosts add {host.name} --replace --address "
                        f"{address}).")
    now = clock.now()
    with db.atomic():
        reason = registration.unavailable_reason
        BrowserHost.update(address=address, capacity=registration.capacity, headful=registration.headful,
                           unavailable_reason=one_line(reason) if reason else None,  # "": it can start them
                           started_at=now, heartbeat_at=now).where(BrowserHost.id == host.id).execute()
        for session in BrowserSession.active().where(BrowserSession.host == host.id):
            _end_here(session, ENDED_BY_HOST_RESTART)
    return Registered(name=host.name,
                      heartbeat_seconds=settings().browser_host_heartbeat_seconds).to_dict()


def heartbeat(host, running, active):
    """The host is alive; its sessions with CDP clients are active. Answers which of its browsers to stop (their
    session ended a while ago without the host being told: a stop that failed to reach it; recently ended ones
    are left to the stop on its way, which may save the profile) and each running session's categories at their
    revision (the host keeps the newest it is told, so an answer read before a change's PUT cannot undo it)."""
    BrowserHost.update(heartbeat_at=clock.now()).where(BrowserHost.id == host.id).execute()
    recently = clock.now() - timedelta(seconds=settings().browser_host_start_seconds * 2)
    current = {session.id: session for session in BrowserSession.select().where(
        BrowserSession.id.in_(running) & (BrowserSession.host == host.id)
        & (BrowserSession.deleted_at.is_null() | (BrowserSession.deleted_at > recently)))}
    for session_id in set(active) & set(current):
        if current[session_id].is_active:
            lifecycle.touch(current[session_id])
    return HeartbeatAnswer(stop=sorted(set(running) - set(current)),
                           categories={session_id: drivers.categories(session)
                                       for session_id, session in current.items() if session.is_active}).to_dict()


def names_extension(host, digest):
    """Whether a session placed on `host` that has not ended names an extension whose archive is `digest`: the one
    rule for a host fetching archives (the session is placed before its start is asked, so its start may fetch)."""
    extension_ids = set()
    for session in BrowserSession.active().where(BrowserSession.host == host.id):
        extension_ids.update(session.options.get("extensions", ()))
    return bool(extension_ids) and Extension.select().where(
        Extension.id.in_(extension_ids) & (Extension.checksum == digest)).exists()


def stopped(host):
    """The host stopped: it takes no new session (its sessions ended one by one in its reports)."""
    BrowserHost.update(heartbeat_at=clock.EPOCH).where(BrowserHost.id == host.id).execute()


def apply_reports(host, reports):
    """Each report's ReportResult, in order: "ok" (and counts), "ended" (the session has ended: nothing more of it
    is kept) or "refused" (and why: not this host's session, or a malformed report, refused alone)."""
    return [_apply(host, report) for report in reports]


def _apply(host, data):
    try:
        report = parse_report(data)
    except InvalidShape as invalid:
        return ReportResult(status="refused", message=str(invalid))
    session = BrowserSession.get_or_none(BrowserSession.id == report.session_id)
    if session is None or session.host_id not in (host.id, None) or (session.host_id is None and session.is_active):
        return ReportResult(status="refused", message=f"session {report.session_id} is not run by browser host "
                                                      f"{host.name}")
    if session.host_id is None:  # its host was taken off it (lost): it has ended, whoever ran it
        return ReportResult(status="ended")
    try:
        if isinstance(report, TelemetryReport):
            events, invalid = _events(report.events)
            accepted, dropped, last_seq = telemetry.ingest(session, events, activity=False, batch=report.batch,
                                                           lost=(report.lost or 0) + invalid)
            return ReportResult(status="ok", accepted=accepted, dropped=dropped, last_seq=last_seq)
        if isinstance(report, LogsReport):
            lines = [{"message": storable(line.message[:MAX_LOG_LINE])} for line in report.lines]
            return ReportResult(status="ok", accepted=logs.ingest(session, report.source, storable(report.log_name),
                                                                  lines, activity=False, batch=report.batch))
        if not session.is_active:
            return ReportResult(status="ended")
        if isinstance(report, ActivityReport):
            lifecycle.touch(session)
        else:
            _end_here(session, report.reason)
        return ReportResult(status="ok")
    except ApiError as error:
        if error.status != 409:
            raise
        return ReportResult(status="ended")
    except DataError as error:  # a value the database refuses: this report alone is refused
        return ReportResult(status="refused", message=f"the database refused it: {error}")


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
