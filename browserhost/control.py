"""The browser host's control API over HTTP: the app's calls (and the CDP relay), routed by a table (ROUTES) to the
host's rooms (registry, starts, running, recordings: server.BrowserHostServer wires them), each authorised by the key
derived from the host's credential. The routes and the shapes of their bodies and answers are lantern_wire/control.py's:
a body that is not its route's shape is a 400 naming the field, in the {"code", "message"} shape of every refusal.
"""
import hmac
import json
import logging
import secrets
import socket
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

from pydantic import BaseModel, ValidationError
from werkzeug.exceptions import HTTPException
from werkzeug.routing import Map, Rule

from browserhost import agent_forward
from lantern_wire import control
from lantern_wire.splice import splice, upgrade_request

logger = logging.getLogger(__name__)
NOT_RUNNING = {"code": "not_found", "message": "No such browser on this host."}
BROWSER_UNREACHABLE = 502, {"code": "browser_unreachable", "message": "The browser does not answer."}
DISCARD_CHUNK = 64 * 1024  # what a body no route reads is dropped by


def _rule(template, method, endpoint, **defaults):
    return Rule(template.replace("{", "<").replace("}", ">"), methods=[method], endpoint=endpoint,
                defaults=defaults or None)


# Each endpoint is ControlHandler's on_<endpoint>.
ROUTES = Map([
    _rule(control.SESSIONS, "POST", "start"),
    _rule(control.SESSION, "DELETE", "stop"),
    _rule(control.HEALTH, "GET", "health"),
    _rule(control.SESSION_ENDPOINT, "GET", "endpoint"),
    _rule(control.SESSION_JSON_VERSION, "GET", "devtools_json", chromium_path="/json/version"),
    _rule(control.SESSION_JSON_LIST, "GET", "devtools_json", chromium_path="/json/list"),
    _rule(control.SESSION_CDP, "GET", "cdp"),
    Rule(control.SESSION_CDP.replace("{session_id}", "<session_id>") + "/<path:target>", methods=["GET"],
         endpoint="cdp"),
    _rule(control.SESSION_CLIENTS, "POST", "clients"),
    _rule(control.SESSION_COMPUTER, "POST", "computer"),
    _rule(control.SESSION_REPLAYS, "POST", "start_replay"),
    _rule(control.SESSION_REPLAY_STOP, "POST", "stop_replay"),
    _rule(control.SESSION_CATEGORIES, "PUT", "categories"),
    _rule(control.SESSION_VIEWPORT, "PUT", "viewport"),
    _rule(control.SESSION_PROFILE, "POST", "profile"),
    Rule(control.SESSION_AGENT.replace("{session_id}", "<session_id>").replace("{path}", "<path:rest>"),
         methods=["GET", "POST", "PUT", "DELETE"], endpoint="agent"),
], strict_slashes=False, merge_slashes=False)
# The shape of each route's body (those without one read none).
BODIES = {"start": control.StartRequest, "clients": control.ClientChange, "computer": control.ComputerRequest,
          "start_replay": control.ReplayStart, "categories": control.Categories, "viewport": control.ViewportChange,
          "profile": control.ProfileLoad}
# Routes to a running browser: 404 while it starts or stops (the others reach a session it hosts in any state).
TO_A_BROWSER = {"endpoint", "devtools_json", "cdp"}
# Routes that read their body themselves, of any size (browserhost/agent_forward.py streams it on).
OWN_BODY = {"agent"}
# Routes to a session that is not stopping (its agent's): 404 once it stops.
TO_A_SESSION = {"agent"}


class BadBody(ValueError):
    status, code = 400, "bad_request"


class TooLarge(BadBody):
    status, code = 413, "payload_too_large"


class LengthRequired(BadBody):
    status, code = 411, "length_required"


class ControlHandler(BaseHTTPRequestHandler):
    host = None  # the BrowserHostServer it serves (server.handler_class sets it)
    protocol_version = "HTTP/1.1"
    timeout = control.IDLE_CLOSE_SECONDS  # an idle keep-alive connection gives its thread back
    unread = 0  # bytes of the request's body not read yet (None: a body of no known length)

    def setup(self):
        super().setup()
        # The app keeps its connections: an answer's headers and body are two writes, and Nagle's algorithm would
        # hold the second until the app's delayed ACK of the first (some 40 ms a call).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format, *args):  # noqa: A002 - the stdlib's name
        logger.debug("%s %s", self.address_string(), format % args)

    def authorised(self):
        given = self.headers.get("Authorization", "").removeprefix("Bearer ")
        if hmac.compare_digest(given.encode(), self.host.control_key.encode()):
            return True
        self.answer(401, {"code": "unauthorized", "message": "Wrong or missing key for this host."})
        return False

    def answer(self, status, body, headers=None):
        if isinstance(body, BaseModel):
            body = body.model_dump(mode="json")
        data = json.dumps(body).encode()
        # A body left unread would be read as the next request: the connection ends with this answer.
        self.close_connection = self.close_connection or self.unread != 0
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the caller left (gave up waiting): nothing to tell
            logger.debug("%s left before its answer (%s) was written", self.address_string(), status)
            self.close_connection = True

    def do_GET(self):  # noqa: N802 - the stdlib's name
        self.dispatch()

    do_POST = do_PUT = do_DELETE = do_GET  # noqa: N815

    def dispatch(self):
        self.unread = self.content_length()
        if not self.authorised():
            return
        url = urlsplit(self.path)
        try:
            endpoint, values = ROUTES.bind("host").match(url.path, method=self.command)
        except HTTPException:  # no such route, or not with this method
            self.discard_body()
            self.answer(404, {"code": "not_found", "message": url.path})
            return
        try:
            body = None if endpoint in OWN_BODY else self.body(BODIES.get(endpoint))
        except BadBody as error:
            self.answer(error.status, {"code": error.code, "message": str(error)})
            return
        session_id = values.pop("session_id", None)
        hosted = None
        if session_id is not None:
            hosted = self.host.registry.hosted.get(session_id)
            running = hosted is not None and hosted.browser is not None and not hosted.stopping
            if hosted is None or (endpoint in TO_A_BROWSER and not running) or \
                    (endpoint in TO_A_SESSION and hosted.stopping):
                self.answer(404, NOT_RUNNING)
                return
        getattr(self, f"on_{endpoint}")(hosted, body, query=url.query, **values)

    def content_length(self):
        """The body's length in bytes; None when it has none we can read (chunked, or a length that is no number):
        such a body is never read, and the connection ends after the answer."""
        if "Transfer-Encoding" in self.headers:
            return None
        length = self.headers.get("Content-Length", "0").strip() or "0"
        return int(length) if length.isdigit() else None

    def discard_body(self):
        """Drop a body no route reads, a chunk at a time; one past control.MAX_JSON_BYTES is left unread instead."""
        if self.unread is None or self.unread > control.MAX_JSON_BYTES:
            return
        while self.unread:
            chunk = self.rfile.read(min(self.unread, DISCARD_CHUNK))
            if not chunk:  # the caller stopped sending: nothing more comes on this connection
                self.close_connection = True
                return
            self.unread -= len(chunk)

    def body(self, shape):
        """The request's body as `shape` (dropped when the route takes none); BadBody naming the field, TooLarge past
        control.MAX_JSON_BYTES (left unread), LengthRequired when it has no length."""
        if shape is None:
            self.discard_body()
            return None
        if self.unread is None:
            raise LengthRequired("the body needs a Content-Length")
        if self.unread > control.MAX_JSON_BYTES:
            raise TooLarge(f"the body is {self.unread} bytes, past this host's {control.MAX_JSON_BYTES}")
        data = self.rfile.read(self.unread)
        self.unread -= len(data)
        try:
            return shape.model_validate_json(data or b"{}")
        except ValidationError as error:
            first = error.errors()[0]
            field = ".".join(str(part) for part in first["loc"])
            raise BadBody(f"{field}: {first['msg']}" if field else f"the body is not JSON: {first['msg']}") from None

    # -- routes (ROUTES): (hosted or None, body, query= as it came (still escaped), path values) ---------------------

    def on_start(self, _, request, query):
        self.answer(*self.host.starts.start_browser(request))

    def on_stop(self, hosted, _, query):
        save = parse_qs(query).get(control.SAVE_STATE) == ["1"]
        state = self.host.registry.stop_browser(hosted.session_id, save=save, reason=None)
        self.answer(200, control.StopAnswer(profile_state=state))

    def on_health(self, _, __, query):
        registry = self.host.registry
        self.answer(200, control.Health(name=registry.name, capacity=registry.capacity,
                                        sessions=sorted(registry.hosted)))

    def on_endpoint(self, hosted, _, query):
        self.answer(200, hosted.browser.devtools.as_json())

    def on_devtools_json(self, hosted, _, query, chromium_path):
        try:
            answer = hosted.browser.devtools.get_json(chromium_path)
        except (OSError, ValueError):  # not answering, or answering past the bound a session's browser is held to
            self.answer(*BROWSER_UNREACHABLE)
            return
        self.answer(200, answer)

    def on_cdp(self, hosted, _, query, target=None):
        if self.headers.get("Upgrade", "").lower() != "websocket":
            self.answer(404, {"code": "not_found", "message": urlsplit(self.path).path})
            return
        self.relay(hosted, f"/{target}" if target else hosted.browser.browser_path)

    def on_clients(self, hosted, change, query):
        # A worker on this machine relays straight to Chromium and says when a client comes and goes.
        if change.delta > 0:
            self.host.registry.client_joined(hosted, change.connection_id, worker_pid=change.worker_pid)
        else:
            self.host.registry.client_left(hosted, change.connection_id)
        self.answer(200, control.ClientsAnswer(clients=len(hosted.connections)))

    def on_computer(self, hosted, request, query):
        self.answer(*self.host.running.computer(hosted, request))

    def on_start_replay(self, hosted, start, query):
        self.answer(*self.host.recordings.start_replay(hosted, start))

    def on_stop_replay(self, hosted, _, query, replay_id):
        self.answer(*self.host.recordings.stop_replay(hosted, replay_id))

    def on_categories(self, hosted, categories, query):
        self.host.registry.set_categories(hosted, categories)
        self.answer(200, control.CategoriesAnswer(categories=sorted(hosted.categories)))

    def on_viewport(self, hosted, change, query):
        self.answer(*self.host.running.resize(hosted, change))

    def on_profile(self, hosted, load, query):
        self.answer(*self.host.running.load_profile(hosted, load))

    def on_agent(self, hosted, _, query, rest):
        # The path (werkzeug's routing leaves it escaped) and query as they came: the agent reads them as the app
        # wrote them.
        agent_forward.forward(self, hosted, rest, query)

    def relay(self, hosted, target):
        """Hand the WebSocket handshake to Chromium (without Origin) and splice until either side ends."""
        self.close_connection = True
        devtools = hosted.browser.devtools
        try:
            upstream = devtools.connect(timeout=10)
        except OSError:
            self.answer(*BROWSER_UNREACHABLE)
            return
        upstream.sendall(upgrade_request(target, [f"Host: {devtools.host}"], self.headers))
        upstream.settimeout(None)
        connection_id = secrets.token_hex(8)
        self.host.registry.client_joined(hosted, connection_id)
        self.connection.settimeout(None)  # the control API's idle timeout is not the CDP client's
        try:
            splice(self.connection, upstream)
        finally:
            upstream.close()
            self.host.registry.client_left(hosted, connection_id)
