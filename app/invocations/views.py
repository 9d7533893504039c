"""Invocations (/invocations): create, list, get, update, logs, events (their browsers: app/browsers)."""
from flask import g, request
from flask.views import MethodView

from app.core import sse
from app.core.api import Blueprint, as_dumped
from app.core.db import db
from app.core.paging import PAGE_HEADERS, page
from app.core.settings import settings
from app.invocations import lifecycle, schemas, stream
from app.invocations.models import Invocation

blp = Blueprint("invocations", __name__, url_prefix="/invocations",
                description="Invocations of app actions, their logs and their event stream.")


def find(invocation_id):
    return lifecycle.find(g.project, invocation_id)


@blp.route("")
class Invocations(MethodView):
    @blp.arguments(schemas.InvocationListArgsSchema, location="query")
    @blp.response(200, schemas.InvocationSchema(many=True), headers=PAGE_HEADERS)
    def get(self, args):
        """List invocations of the project, newest first"""
        lifecycle.expire_overdue(g.project)
        rows = page(Invocation.listing(g.project.id, **args), args)
        return as_dumped([schemas.invocation_record(*row) for row in rows])

    @blp.arguments(schemas.InvocationCreateSchema)
    @blp.response(200, schemas.InvocationSchema,
                  description="sync: the invocation once finished (or after the wait limit)")
    @blp.alt_response(202, schema=schemas.InvocationSchema, description="async: accepted, running or queued")
    @blp.alt_response(429, description="sync over a concurrency cap")
    def post(self, args):
        """Invoke an action: sync waits for the result, async answers 202 at once"""
        invocation = lifecycle.create(g.project, args)
        if args["async"]:
            return invocation, 202
        config = settings()
        db.close()  # the wait holds no connection; teardown copes with a closed one
        return stream.wait_until_terminal(invocation, config.invocation_sync_wait_seconds,
                                          config.stream_poll_seconds)


@blp.route("/<invocation_id>")
class InvocationById(MethodView):
    @blp.response(200, schemas.InvocationSchema)
    def get(self, invocation_id):
        """Get an invocation"""
        return as_dumped(schemas.invocation_record_of(find(invocation_id)))

    @blp.arguments(schemas.InvocationUpdateSchema)
    @blp.response(200, schemas.InvocationSchema)
    def patch(self, args, invocation_id):
        """Update status and/or output: failed cancels, succeeded finishes, running starts a queued one"""
        return lifecycle.update(find(invocation_id), g.project, **args)


@blp.route("/<invocation_id>/logs")
class InvocationLogs(MethodView):
    @blp.arguments(schemas.LogLinesSchema)
    @blp.response(201, schemas.LogsAcceptedSchema)
    def post(self, lines, invocation_id):
        """Append log lines (Lantern: for the worker running the invocation)"""
        return {"accepted": lifecycle.append_logs(find(invocation_id), lines)}


@blp.route("/<invocation_id>/events")
class InvocationEvents(MethodView):
    @blp.arguments(schemas.EventsArgsSchema, location="query")
    @blp.response(200, sse.STREAM_DOC, content_type="text/event-stream")
    def get(self, args, invocation_id):
        """Follow an invocation: stored log lines, then live logs and state changes (SSE)"""
        invocation = find(invocation_id)
        config = settings()
        frames = stream.follow(invocation, g.project, since=args.get("since"), after_id=sse.last_event_id(request),
                               heartbeat_seconds=config.sse_heartbeat_seconds,
                               poll_seconds=config.stream_poll_seconds)
        return sse.stream(frames)

