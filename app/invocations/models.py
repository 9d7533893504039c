"""An invocation and its events (log lines and state changes, in one ordered table)."""
import json

from peewee import (
    AutoField,
    BooleanField,
    CharField,
    ForeignKeyField,
    IntegerField,
    TextField,
)

from app.core import clock
from app.core.compiled import CompiledQuery
from app.core.db import BaseModel, UtcDateTimeField, matching
from app.core.errors import not_found
from app.core.ids import new_id
from app.orgs.models import Project
from app.orgs.resources import active_resource_counter

QUEUED, RUNNING, SUCCEEDED, FAILED = "queued", "running", "succeeded", "failed"
TERMINAL = {SUCCEEDED, FAILED}
LIVE = {QUEUED, RUNNING}


class Invocation(BaseModel):
    id = CharField(primary_key=True, default=new_id)
    project = ForeignKeyField(Project, backref="invocations", on_delete="CASCADE")
    app_name = CharField()
    action_name = CharField()
    version = CharField()
    payload = TextField(null=True)
    output = TextField(null=True)
    status = CharField(default=QUEUED, index=True)
    status_reason = TextField(null=True)
    is_async = BooleanField(default=False)
    async_timeout_seconds = IntegerField(null=True)
    # When the invocation was requested: the queue order, and what the API calls started_at.
    started_at = UtcDateTimeField(default=clock.now)
    # When an async invocation that is still live fails as timed out.
    deadline = UtcDateTimeField(null=True)
    finished_at = UtcDateTimeField(null=True)

    @classmethod
    def lookup(cls, project, invocation_id):
        invocation = matching(cls, "project", "id").first(project.id, invocation_id)
        if invocation is None:
            raise not_found(f"Invocation {invocation_id!r} not found.")
        return invocation

    @classmethod
    def listing(cls, project_id, *, app_name=None, action_name=None, version=None, status=None, deployment_id=None,
                since=None, query=None, limit=None, offset=None):
        """Pages (paging.page) of the project's invocations, newest first, filtered by the list's
        arguments (`limit` and `offset` among them are paging.page()'s). Lantern has no
        deployments, so a `deployment_id` filter matches nothing."""
        return _listing.pages(project_id, app_name, action_name, version, status, deployment_id is not None, since,
                              query or None)

    @property
    def is_terminal(self):
        return self.status in TERMINAL

    @property
    def is_overdue(self):
        """Still live after its deadline: the next request that sees it fails it (lifecycle)."""
        return self.status in LIVE and self.deadline is not None and clock.now() >= self.deadline

    @property
    def subject(self):
        """The channel its followers wait on."""
        return f"invocation:{self.id}"


def _build_listing(project_id, app_name, action_name, version, status, deployed, since, query, limit, offset):
    found = (Invocation.select(Invocation.id, Invocation.app_name, Invocation.action_name, Invocation.version,
                               Invocation.status, Invocation.status_reason, Invocation.payload, Invocation.output,
                               Invocation.started_at, Invocation.finished_at)  # schemas.invocation_record's arguments
             .where(Invocation.project == project_id))
    for field, value in (("app_name", app_name), ("action_name", action_name), ("version", version),
                         ("status", status)):
        if value is not None:
            found = found.where(getattr(Invocation, field) == value)
    if deployed:
        found = found.where(False)
    if since is not None:
        found = found.where(Invocation.started_at >= since)
    if query is not None:
        found = found.where(Invocation.app_name.contains(query) | Invocation.action_name.contains(query)
                            | (Invocation.id == query))
    return found.order_by(Invocation.started_at.desc(), Invocation.id.desc()).limit(limit).offset(offset).tuples()


_listing = CompiledQuery(_build_listing)


class InvocationEvent(BaseModel):
    """One frame of the events stream. The auto-increment id is the SSE `id:`.

    Log lines and state changes share the table so followers read them in the
    order they happened, and Last-Event-ID resumes across both.
    """

    id = AutoField()
    invocation = ForeignKeyField(Invocation, backref="events", on_delete="CASCADE")
    kind = CharField()  # "log" or "state"
    timestamp = UtcDateTimeField(default=clock.now)
    message = TextField(null=True)
    # For state events: the invocation record at that moment, as JSON.
    snapshot = TextField(null=True)

    def data(self):
        """The SSE data of this event (contract 6.6 union)."""
        stamp = clock.isoformat(self.timestamp)
        if self.kind == "log":
            return {"event": "log", "timestamp": stamp, "message": self.message}
        return {"event": "invocation_state", "timestamp": stamp, "invocation": json.loads(self.snapshot)}

    @property
    def is_terminal_state(self):
        return self.kind == "state" and json.loads(self.snapshot)["status"] in TERMINAL


@active_resource_counter("invocations")
def live_invocations(project):
    return Invocation.select().where((Invocation.project == project.id) & Invocation.status.in_(LIVE)).count()
