"""Invocation state changes: admission under the concurrency caps, FIFO promotion,
terminal transitions, async timeouts and log lines.

Every change that other requests must see in order runs while holding the
organization (core.db.exclusive), and records an InvocationEvent; followers are
woken through the invocation's channel once the change is committed.
"""
import json
from datetime import timedelta

from app import streams
from app.core import clock
from app.core.compiled import CompiledQuery
from app.core.db import exclusive
from app.core.errors import bad_request, conflict
from app.core.settings import settings
from app.invocations.models import (
    FAILED,
    LIVE,
    QUEUED,
    RUNNING,
    TERMINAL,
    Invocation,
    InvocationEvent,
)
from app.orgs.models import Organization, Project
from app.orgs.usage import concurrency_limit_error, first_cap_reached


def record_state(invocation):
    from app.invocations.schemas import InvocationSchema

    # The payload (up to 4.5 MB, optional in the record) stays out of every state frame.
    return InvocationEvent.create(invocation=invocation.id, kind="state", timestamp=clock.now(),
                                  snapshot=json.dumps(InvocationSchema(exclude=("payload",)).dump(invocation)))


def announce(invocations):
    """Wake followers of changed invocations; a finished one's channel is dropped after."""
    for invocation in invocations:
        streams.announce(invocation.subject, ended=invocation.is_terminal)


def blocking_limit(project, org):
    """The first cap a new running invocation in `project` would exceed, or None."""
    running = Invocation.select().where(Invocation.status == RUNNING)
    return first_cap_reached([
        ("project", project.max_concurrent_invocations, running.where(Invocation.project == project.id)),
        ("organization", org.max_concurrent_invocations, running.join(Project).where(Project.org == org.id)),
    ])


def over_limit_error(blocked):
    return concurrency_limit_error("max_concurrent_invocations", blocked,
                                   retry_after=settings().invocation_retry_after_seconds,
                                   advice="Retry later or start the invocation with async: true to queue it.")


def create(project, fields):
    """Admit a new invocation: running when a slot is free, queued (async only) when not, else 429."""
    org = Organization.get_by_id(project.org_id)
    touched = []
    with exclusive(org):
        touched += _expire_overdue(org)
        # Queued ones first (FIFO), in case a cap was raised since they queued.
        touched += _promote(org)
        blocked = blocking_limit(project, org)
        if blocked and not fields["async"]:
            raise over_limit_error(blocked)
        now = clock.now()
        config = settings()
        if fields["async"]:
            timeout = fields.get("async_timeout_seconds") or config.invocation_async_timeout_seconds
        else:
            # Nobody may finish a sync invocation whose caller gave up; it must not hold a slot forever.
            timeout = config.invocation_sync_timeout_seconds
        invocation = Invocation.create(
            project=project.id, app_name=fields["app_name"], action_name=fields["action_name"],
            version=fields["version"], payload=fields.get("payload"), is_async=fields["async"],
            async_timeout_seconds=timeout if fields["async"] else None,
            deadline=now + timedelta(seconds=timeout), status=QUEUED if blocked else RUNNING, started_at=now,
        )
        record_state(invocation)
        touched.append(invocation)
    announce(touched)
    return invocation


def update(invocation, project, *, status=None, output=None, status_reason=None):
    """PATCH: a terminal status ends it (failed cancels from any live state), running admits a
    queued one, output alone is stored. A finished invocation is final."""
    org = Organization.get_by_id(project.org_id)
    touched = []
    with exclusive(org):
        touched += _expire_overdue(org)
        current = Invocation.get_by_id(invocation.id)
        if current.is_terminal:
            if status not in (None, current.status):
                raise conflict("invocation_finished", f"The invocation already {current.status}; its status cannot "
                                                      "change.")
            return current
        changed = False
        if output is not None:
            current.output = output
        if status == RUNNING and current.status == QUEUED:
            blocked = blocking_limit(project, org)
            if blocked:
                raise over_limit_error(blocked)
            current.status, changed = RUNNING, True
        elif status in TERMINAL:
            current.status, current.finished_at, changed = status, clock.now(), True
            if status == FAILED:
                current.status_reason = status_reason or "Cancelled through the API."
        current.save()
        if changed:
            record_state(current)
            touched.append(current)
            if current.is_terminal:
                touched += _promote(org)
    announce(touched)
    return current


def find(project, invocation_id):
    """The project's invocation, failed first if its async timeout ran out."""
    invocation = Invocation.lookup(project, invocation_id)
    if invocation.is_overdue:
        expire_overdue(project)
        invocation = Invocation.get_by_id(invocation.id)
    return invocation


def expire_overdue(project):
    """Fail async invocations of the project's organization that outlived their timeout.

    Cheap when nothing is overdue (one indexed query); takes the lock only when something is.
    """
    if _any_overdue.first(project.org_id, clock.now()) is None:
        return
    org = Organization.get_by_id(project.org_id)
    with exclusive(org):
        touched = _expire_overdue(org)
    announce(touched)


def _expire_overdue(org):
    now = clock.now()
    overdue = list(_overdue(org.id, now))
    for invocation in overdue:
        seconds = int((invocation.deadline - invocation.started_at).total_seconds())
        which = "async timeout" if invocation.is_async else "timeout for sync invocations"
        invocation.status_reason = f"Timed out: still {invocation.status} when the {which} of {seconds} s ran out."
        invocation.status, invocation.finished_at = FAILED, now
        invocation.save()
        record_state(invocation)
    return overdue + (_promote(org) if overdue else [])


def _overdue(org_id, now):
    """Live invocations of the organization whose deadline has passed by `now`."""
    return (Invocation.select().join(Project)
            .where((Project.org == org_id) & Invocation.status.in_(LIVE)
                   & Invocation.deadline.is_null(False) & (Invocation.deadline <= now)))


# Asked by every list and by reads of an invocation past its deadline.
_any_overdue = CompiledQuery(lambda org_id, now: _overdue(org_id, now).select(Invocation.id).limit(1))


def _promote(org):
    """Start queued invocations, oldest first, while their project and the organization have room."""
    promoted = []
    queued = (Invocation.select().join(Project)
              .where((Project.org == org.id) & (Invocation.status == QUEUED))
              .order_by(Invocation.started_at, Invocation.id))
    for invocation in queued:
        blocked = blocking_limit(Project.get_by_id(invocation.project_id), org)
        if blocked and blocked["scope"] == "organization":
            break
        if blocked:
            continue
        invocation.status = RUNNING
        invocation.save()
        record_state(invocation)
        promoted.append(invocation)
    return promoted


def append_logs(invocation, lines):
    """Store log lines (durably) and wake followers; over-long lines are truncated, never refused."""
    if invocation.is_terminal:
        raise finished(invocation)
    if not lines:
        raise bad_request("Give at least one log line.", field="lines")
    limit = settings().invocation_log_line_max_bytes
    rows = [{"invocation": invocation.id, "kind": "log", "timestamp": line.get("timestamp") or clock.now(),
             "message": truncate(line["message"], limit)} for line in lines]
    # Holding the invocation's row (as status changes do, by updating it) makes its
    # events commit in id order, so a follower reading "ids above n" never skips one;
    # and a status change cannot slip in between the check and the insert.
    with exclusive(invocation):
        current = Invocation.get_by_id(invocation.id)
        if current.is_terminal:
            raise finished(current)
        InvocationEvent.insert_many(rows).execute()
    streams.announce(invocation.subject)
    return len(rows)


def finished(invocation):
    return conflict("invocation_finished", f"The invocation already {invocation.status}; it takes no more log lines.")


def truncate(message, limit):
    data = message.encode()
    if len(data) <= limit:
        return message
    kept = data[:limit].decode(errors="ignore")
    return f"{kept}… [truncated {len(data) - len(kept.encode())} bytes]"
