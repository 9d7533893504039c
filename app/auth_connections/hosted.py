"""The hosted login page (/auth/hosted/{flow_id}): a person answers the flow's prompts on it.

No API key reaches the page: a handoff code of the flow (in the hosted_url's query,
compared by its hash: only hashes are stored) authorises it, and only for that flow: its
state, its events, answers to it while it runs (never to a later flow of the same
connection). The page is one static HTML file with plain JavaScript: it reads the state,
follows the events stream, and submits through the same submit logic as the API.
"""
from pathlib import Path

from flask import Response, jsonify, request
from flask.views import MethodView

from app.auth_connections import loginflow, schemas, stream
from app.auth_connections.models import AuthConnection, LoginFlow
from app.core import sse
from app.core.api import Blueprint
from app.core.errors import not_found
from app.core.settings import settings

PAGE = (Path(__file__).parent / "static" / "hosted.html").read_text()
PUBLIC = {"security": []}

blp = Blueprint("auth_hosted", __name__, url_prefix="/auth/hosted",
                description="The hosted login page, authorised by a flow's handoff code (no API key).")


def authorised_flow(flow_id):
    """The flow whose handoff code the request carries; 404 for any mismatch (nothing to learn from it)."""
    flow = LoginFlow.get_or_none(LoginFlow.id == flow_id)
    code = request.args.get("code", "")
    if flow is None or not flow.accepts_handoff(code):
        raise not_found("No such login page.", code="login_page_not_found")
    return flow


@blp.route("/<flow_id>")
class HostedPage(MethodView):
    @blp.response(200, {"type": "string"}, content_type="text/html")
    @blp.doc(**PUBLIC)
    def get(self, flow_id):
        """The hosted login page (HTML)"""
        authorised_flow(flow_id)
        return Response(PAGE, mimetype="text/html", headers={"Cache-Control": "no-store",
                                                             "Referrer-Policy": "no-referrer"})


@blp.route("/<flow_id>/state")
class HostedState(MethodView):
    @blp.response(200, {"type": "object"})
    @blp.doc(**PUBLIC)
    def get(self, flow_id):
        """The flow's state (as in the events stream) and the connection's domain"""
        flow = authorised_flow(flow_id)
        if flow.is_overdue:
            flow = loginflow.expire(flow)
        connection = AuthConnection.get_by_id(flow.connection_id)
        return jsonify({**loginflow.state_event(flow), "domain": connection.domain})


@blp.route("/<flow_id>/submit")
class HostedSubmit(MethodView):
    @blp.arguments(schemas.SubmitSchema)
    @blp.response(200, schemas.SubmitResponseSchema)
    @blp.doc(**PUBLIC)
    def post(self, args, flow_id):
        """Answer the flow's prompt from the hosted page"""
        flow = authorised_flow(flow_id)
        loginflow.submit(AuthConnection.get_by_id(flow.connection_id), args, flow_id=flow.id)
        return {"accepted": True}


@blp.route("/<flow_id>/events")
class HostedEvents(MethodView):
    @blp.response(200, sse.STREAM_DOC, content_type="text/event-stream")
    @blp.doc(**PUBLIC)
    def get(self, flow_id):
        """Follow the flow from the hosted page (SSE)"""
        flow = authorised_flow(flow_id)
        config = settings()
        return sse.stream(stream.follow(AuthConnection.get_by_id(flow.connection_id), flow=flow,
                                        heartbeat_seconds=config.sse_heartbeat_seconds,
                                        poll_seconds=config.stream_poll_seconds))
