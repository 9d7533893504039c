"""Managed auth connections (/auth/connections): CRUD, login, submit, events, timeline."""
from flask import g
from flask.views import MethodView

from app.auth_connections import connections, loginflow, schemas, stream
from app.auth_connections.models import AuthConnection
from app.core import clock, sse, urls
from app.core.api import Blueprint
from app.core.paging import PAGE_HEADERS, page
from app.core.settings import settings

blp = Blueprint("auth_connections", __name__, url_prefix="/auth/connections",
                description="Profiles kept logged in to a site: login flows, submissions, events, health checks.")


def public_base_url():
    """Where the hosted login page is reached: AUTH_PUBLIC_BASE_URL, else where the API is (app/core/urls.py)."""
    return settings().auth_public_base_url or urls.public_base_url()


@blp.route("")
class Connections(MethodView):
    @blp.arguments(schemas.ConnectionListArgsSchema, location="query")
    @blp.response(200, schemas.ConnectionSchema(many=True), headers=PAGE_HEADERS)
    def get(self, args):
        """List auth connections of the project"""
        found = connections.listing(g.project.id, domain=args.get("domain"), profile_name=args.get("profile_name"),
                                    query=args.get("query"))
        return [connections.record(connection) for connection in page(found, args)]

    @blp.arguments(schemas.ConnectionCreateSchema)
    @blp.response(201, schemas.ConnectionSchema)
    @blp.alt_response(409, description="the profile already has a connection for this domain")
    def post(self, args):
        """Create an auth connection (the profile is created if missing)"""
        return connections.record(connections.create(g.project, args))


@blp.route("/<connection_id>")
class ConnectionById(MethodView):
    @blp.response(200, schemas.ConnectionSchema)
    def get(self, connection_id):
        """Get an auth connection, with the state of its login flow"""
        return connections.record(AuthConnection.lookup(g.project, connection_id))

    @blp.arguments(schemas.ConnectionUpdateSchema)
    @blp.response(200, schemas.ConnectionSchema)
    def patch(self, args, connection_id):
        """Update an auth connection's settings"""
        connection = AuthConnection.lookup(g.project, connection_id)
        return connections.record(connections.update(connection, g.project, args))

    @blp.response(204)
    def delete(self, connection_id):
        """Delete an auth connection (a login flow in progress ends CANCELED)"""
        connections.delete(AuthConnection.lookup(g.project, connection_id))


@blp.route("/<connection_id>/login")
class Login(MethodView):
    @blp.arguments(schemas.LoginSchema)
    @blp.response(200, schemas.LoginResponseSchema)
    def post(self, args, connection_id):
        """Start a login flow (or get the one in progress): a hosted page URL for a person"""
        connection = AuthConnection.lookup(g.project, connection_id)
        flow = loginflow.start(connection)
        # The only place the code and the hosted URL exist: each call hands out a new one.
        hosted_url, code = loginflow.hand_off(flow, public_base_url())
        return {"id": connection.id, "flow_expires_at": clock.isoformat(flow.expires_at), "flow_type": flow.flow_type,
                "hosted_url": hosted_url, "handoff_code": code}


@blp.route("/<connection_id>/submit")
class Submit(MethodView):
    @blp.arguments(schemas.SubmitSchema)
    @blp.response(200, schemas.SubmitResponseSchema)
    def post(self, args, connection_id):
        """Answer the flow's current prompt (processed in the background)"""
        loginflow.submit(AuthConnection.lookup(g.project, connection_id), args)
        return {"accepted": True}


@blp.route("/<connection_id>/events")
class Events(MethodView):
    @blp.response(200, sse.STREAM_DOC, content_type="text/event-stream")
    def get(self, connection_id):
        """Follow the login flow: its state now and at every change, until it ends (SSE)"""
        connection = AuthConnection.lookup(g.project, connection_id)
        config = settings()
        return sse.stream(stream.follow(connection, heartbeat_seconds=config.sse_heartbeat_seconds,
                                        poll_seconds=config.stream_poll_seconds))


@blp.route("/<connection_id>/timeline")
class Timeline(MethodView):
    @blp.arguments(schemas.TimelineArgsSchema, location="query")
    @blp.response(200, schemas.TimelineEventSchema(many=True), headers=PAGE_HEADERS)
    def get(self, args, connection_id):
        """Logins, re-auths and health checks of the connection, newest first"""
        connection = AuthConnection.lookup(g.project, connection_id)
        return connections.timeline_entries(page(connections.timeline(connection, kind=args.get("type")), args))
