"""Browser sessions (/browsers): records, telemetry (ingest, archive, stream) and log streams."""
import re

from flask import g, request
from flask.views import MethodView

from app.browsers import hosts, lifecycle, logs, relay, schemas, sessions, stream, telemetry
from app.browsers.drivers import HostDriver, driver_named
from app.browsers.host_client import HostClient, HostError
from app.browsers.host_errors import api_error
from app.browsers.models import BrowserSession
from app.core import sse
from app.core.api import Blueprint, as_dumped
from app.core.errors import ApiError, error_response
from app.core.paging import PAGE_HEADERS, page
from app.core.settings import settings
from app.invocations.schemas import LogsAcceptedSchema
from app.orgs.auth import takes_tokens, unauthorized

blp = Blueprint("browsers", __name__, url_prefix="/browsers",
                description="Browser sessions, their telemetry and their logs.")
TARGET_ID = re.compile(r"[A-Za-z0-9._-]{1,128}")  # Chromium's are 32 hex digits


def find(session_ref, *, include_deleted=False, activity=True):
    """The session (ended ones too when `include_deleted`), ended first if it timed out.

    A call naming an active session is activity that keeps it alive; the ingest views
    pass `activity=False` because ingest records its own activity.
    """
    session = BrowserSession.lookup(g.project, session_ref, include_deleted=include_deleted)
    if session.is_idle_too_long and lifecycle.end_if_idle(session):
        if not include_deleted:
            raise BrowserSession.missing(session_ref)
        session = BrowserSession.get_by_id(session.id)
    if session.is_active and activity:
        lifecycle.touch(session)
    return session


@blp.route("")
class Browsers(MethodView):
    @blp.arguments(schemas.BrowserListArgsSchema, location="query")
    @blp.response(200, schemas.BrowserSchema(many=True), headers=PAGE_HEADERS)
    def get(self, args):
        """List browser sessions of the project, newest first (`tags[key]=value` filters, ANDed)"""
        lifecycle.expire_idle(g.project.org_id)
        status = args.get("status") or ("all" if args.get("include_deleted") else "active")
        found = sessions.listing(g.project.id, status=status, query=args.get("query"), region=args.get("region"),
                                 tags=schemas.tag_filters(request.args))
        return as_dumped([sessions.record_dumped(session) for session in page(found, args)])

    @blp.arguments(schemas.BrowserCreateSchema, required=False)
    @blp.response(201, schemas.BrowserSchema)
    @blp.alt_response(429, description="a concurrency cap of the project or organization is reached")
    def post(self, args):
        """Create a browser session"""
        return sessions.record(sessions.create(g.project, args))


@blp.route("/<session_ref>")
class BrowserByRef(MethodView):
    @blp.arguments(schemas.IncludeDeletedArgsSchema, location="query")
    @blp.response(200, schemas.BrowserSchema)
    def get(self, args, session_ref):
        """Get a browser session by id or name"""
        return as_dumped(sessions.record_dumped(find(session_ref, include_deleted=args["include_deleted"])))

    @blp.arguments(schemas.BrowserUpdateSchema, required=False)
    @blp.response(200, schemas.BrowserSchema)
    def patch(self, args, session_ref):
        """Update a browser session (name, tags, telemetry, viewport, location, network allowlist, ...)"""
        return sessions.record(sessions.update(find(session_ref), args))

    @blp.response(204)
    def delete(self, session_ref):
        """End a browser session (its record stays, with deleted_at)"""
        lifecycle.end(find(session_ref))


@blp.route("/<session_ref>/telemetry/events")
class TelemetryEvents(MethodView):
    @blp.arguments(schemas.TelemetryEventsArgsSchema, location="query")
    @blp.response(200, schemas.EnvelopeSchema(many=True), headers=PAGE_HEADERS)
    def get(self, args, session_ref):
        """Read archived telemetry, paged by the X-Next-Offset cursor (ended sessions too)"""
        return telemetry.page(find(session_ref, include_deleted=True), args)

    @blp.arguments(schemas.TelemetryIngestSchema)
    @blp.response(201, schemas.TelemetryAcceptedSchema)
    @blp.alt_response(409, description="the session has ended")
    def post(self, events, session_ref):
        """Add telemetry events (Lantern: for the session's driver); seq is assigned here"""
        session = find(session_ref, include_deleted=True, activity=False)
        accepted, dropped, last_seq = telemetry.ingest(session, events)
        return {"accepted": accepted, "dropped": dropped, "last_seq": last_seq}


@blp.route("/<session_ref>/telemetry/stream")
class TelemetryStream(MethodView):
    @blp.arguments(schemas.TelemetryStreamArgsSchema, location="query")
    @blp.response(200, sse.STREAM_DOC, content_type="text/event-stream")
    def get(self, args, session_ref):
        """Stream telemetry envelopes live (SSE; id: is the seq; resume with Last-Event-ID)"""
        session = find(session_ref, include_deleted=True)
        config = settings()
        frames = stream.follow_telemetry(
            session, last_event_id=sse.last_event_id(request), replay_all=args.get("replay") == "all",
            types=set(args.get("type") or ()), heartbeat_seconds=config.sse_heartbeat_seconds,
            poll_seconds=config.stream_poll_seconds)
        return sse.stream(frames)


@blp.route("/<session_ref>/logs/stream")
class LogStream(MethodView):
    @blp.arguments(schemas.LogStreamArgsSchema, location="query")
    @blp.response(200, sse.STREAM_DOC, content_type="text/event-stream")
    def get(self, args, session_ref):
        """Stream a log of the session: the newest stored lines, then new ones with follow (SSE)"""
        session = find(session_ref, include_deleted=True)
        config = settings()
        frames = stream.follow_logs(
            session, source=args["source"], log_name=args["log_name"], follow=args["follow"],
            last_event_id=sse.last_event_id(request), replay_lines=config.browser_log_replay_lines,
            heartbeat_seconds=config.sse_heartbeat_seconds, poll_seconds=config.stream_poll_seconds)
        return sse.stream(frames)


@blp.route("/<session_ref>/logs")
class LogLines(MethodView):
    @blp.arguments(schemas.LogIngestSchema)
    @blp.response(201, LogsAcceptedSchema)
    @blp.alt_response(409, description="the session has ended")
    def post(self, args, session_ref):
        """Add lines to a log of the session (Lantern: for the session's driver)"""
        session = find(session_ref, include_deleted=True, activity=False)
        return {"accepted": logs.ingest(session, args["source"], args["log_name"], args["lines"])}


def cdp_session(session_ref):
    """The active host-driver session a CDP request names: by a bearer key (any session of the
    project), else by the session's own token in the query string (that session only)."""
    if "api_key" not in g:
        owner = BrowserSession.get_or_none(BrowserSession.id == session_ref)
        if owner is None or not hosts.token_matches(owner, request.args.get("token", "")):
            raise unauthorized("Invalid or expired CDP token (or no API key).")
        g.project = owner.project  # the token stands for its session's project, as a key for its own
    try:
        session = find(session_ref)  # the idle rule and activity, as for any call naming the session
    except ApiError:
        if "api_key" in g:
            raise
        raise unauthorized("Invalid or expired CDP token (or no API key).") from None
    if session.driver != HostDriver.name:
        raise ApiError(404, "cdp_not_relayed", f"Browser session {session.id!r} is not run by a browser host; "
                                               "reach it at its own cdp_ws_url.")
    return session


@blp.route("/<session_ref>/cdp", websocket=True)
@takes_tokens
@blp.doc(security=[{"bearerAuth": []}, {}], description=relay.__doc__)
@blp.response(101, description="switching to the WebSocket, relayed to the browser")
def cdp(session_ref):
    """The session's browser over CDP (WebSocket; bearer key or ?token=): Playwright, Puppeteer"""
    return relay.relay(cdp_session(session_ref))


@blp.route("/<session_ref>/cdp/devtools/page/<target_id>", websocket=True)
@takes_tokens
@blp.doc(security=[{"bearerAuth": []}, {}])
@blp.response(101, description="switching to the WebSocket, relayed to the target")
def cdp_target(session_ref, target_id):
    """One target of the session's browser over CDP (the webSocketDebuggerUrl of /cdp/json/list)"""
    session = cdp_session(session_ref)
    if not TARGET_ID.fullmatch(target_id):  # it goes into the request line to the browser: no CR, LF or space
        raise ApiError(404, "not_found", f"Browser session {session.id!r} has no target {target_id!r}.")
    return relay.relay(session, f"/devtools/page/{target_id}")


@blp.route("/<session_ref>/cdp/json/version")
@blp.route("/<session_ref>/cdp/json/version/")
@takes_tokens
@blp.doc(security=[{"bearerAuth": []}, {}])
@blp.response(200, schemas.CdpVersionSchema)
def cdp_version(session_ref):
    """What the HTTP form of connect_over_cdp reads: the browser's version and its WebSocket URL"""
    session = cdp_session(session_ref)
    version = HostClient(session.host).devtools_version(session.id)
    return dict(version, webSocketDebuggerUrl=driver_named(HostDriver.name).cdp_ws_url(session))


@blp.route("/<session_ref>/cdp/json/list")
@blp.route("/<session_ref>/cdp/json")
@takes_tokens
@blp.doc(security=[{"bearerAuth": []}, {}])
@blp.response(200, schemas.CdpTargetSchema(many=True))
def cdp_targets(session_ref):
    """The browser's targets (pages, workers), each with a WebSocket URL through this relay"""
    session = cdp_session(session_ref)
    driver = driver_named(HostDriver.name)
    targets = HostClient(session.host).devtools_targets(session.id)
    if not all(isinstance(target, dict) and TARGET_ID.fullmatch(str(target.get("id"))) for target in targets):
        raise HostError(f"the browser host of session {session.id} answered a target list that is not one")
    return [dict(target, webSocketDebuggerUrl=driver.cdp_ws_url(session, f"/devtools/page/{target['id']}"))
            for target in targets]


@blp.errorhandler(HostError)
def host_unreachable(error):
    """A host that does not answer (or no longer runs the browser) behind a CDP route."""
    refusal = api_error(error)
    return error_response(refusal.status, refusal.code, refusal.message, headers=refusal.headers)


@blp.route("/<session_ref>/webdriver")
@blp.response(501)
def webdriver(session_ref):
    """WebDriver BiDi is not served by Lantern (use CDP); this answers 501 saying so"""
    raise ApiError(501, "webdriver_not_served", "Lantern does not relay WebDriver BiDi; use cdp_ws_url (CDP).")
