"""The browser host's control API over HTTP: the app's calls (and the CDP relay), routed to the host
(server.BrowserHostServer), each authorised by the key derived from the host's credential:

    POST   /sessions                      start a browser (settings, extension archives, profile state), within
                                          "start_seconds" (else 503 browser_host_busy: the machine is too busy)
    DELETE /sessions/{id}?save_state=1    stop it; the profile's state comes back when asked
    GET    /sessions/{id}/json/version    Chromium's answers, for the app's /cdp/json routes
    GET    /sessions/{id}/json/list
    GET    /sessions/{id}/cdp[/devtools/page/{target}]   WebSocket: relayed to Chromium
    GET    /sessions/{id}/endpoint        Chromium's DevTools port, for workers on this machine
    POST   /sessions/{id}/clients         {"delta": 1 | -1, "connection_id", "worker_pid"}: such a
                                          worker's CDP client came or left
    POST   /sessions/{id}/computer        {"actions": [...], "resend": bool}: run on its screen (computer.py), in order;
                                          {"results": [...]}, or the failed action's index and why
    POST   /sessions/{id}/replays         {"replay_id", "framerate", "max_seconds", "max_bytes"}: record
                                          its screen (replays.py) -> {"started_at"}
    POST   /sessions/{id}/replays/{replay_id}/stop   end a recording; answered once the app has it
    PUT    /sessions/{id}/categories      {"categories": [...]}: the telemetry its capture produces
    PUT    /sessions/{id}/viewport        {"width", "height", "restart", "start_seconds"}: its windows resized
                                          (reshape.py), or Chromium started again when its screen cannot hold
                                          them and `restart` allows it (else 409 viewport_needs_restart)
                                          -> {"restarted"}
    POST   /sessions/{id}/profile         {"profile_state"}: loaded into the running browser
    GET    /health
"""
import hmac
import json
import logging
import secrets
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

from lantern_wire.splice import splice, upgrade_request

logger = logging.getLogger(__name__)


class ControlHandler(BaseHTTPRequestHandler):
    host = None  # the BrowserHostServer it serves (server.handler_class sets it)
    protocol_version = "HTTP/1.1"
    timeout = 30  # an idle keep-alive connection gives its thread back

    def log_message(self, format, *args):  # noqa: A002 - the stdlib's name
        logger.debug("%s %s", self.address_string(), format % args)

    def authorised(self):
        given = self.headers.get("Authorization", "").removeprefix("Bearer ")
        if hmac.compare_digest(given.encode(), self.host.control_key.encode()):
            return True
        self.answer(401, {"code": "unauthorized", "message": "Wrong or missing key for this host."})
        return False

    def answer(self, status, body):
        data = json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the caller left (gave up waiting): nothing to tell
            logger.debug("%s left before its answer (%s) was written", self.address_string(), status)
            self.close_connection = True

    def route(self):
        path = urlsplit(self.path)
        parts = [p for p in path.path.split("/") if p]
        return parts, parse_qs(path.query)

    def json_request(self):
        """(path parts, JSON body, the browser of the session /sessions/{id}/... names, or None)."""
        parts, _ = self.route()
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        hosted = self.host.hosted.get(parts[1]) if len(parts) >= 3 and parts[0] == "sessions" else None
        return parts, body, hosted

    def do_POST(self):  # noqa: N802 - the stdlib's name
        if not self.authorised():
            return
        parts, body, hosted = self.json_request()
        if parts == ["sessions"]:
            self.answer(*self.host.start_browser(body))
        elif hosted is not None and parts[2:] == ["computer"]:
            self.answer(*self.host.computer(hosted, body.get("actions") or [], resend=body.get("resend") is True))
        elif hosted is not None and parts[2:] == ["replays"]:
            self.answer(*self.host.start_replay(hosted, body))
        elif hosted is not None and parts[2:] == ["profile"]:
            self.answer(*self.host.load_profile(hosted, body))
        elif hosted is not None and len(parts) == 5 and parts[2] == "replays" and parts[4] == "stop":
            self.answer(*self.host.stop_replay(hosted, parts[3]))
        elif hosted is not None and parts[2:] == ["clients"]:
            # A worker on this machine relays straight to Chromium and says when a client comes and goes.
            connection_id = str(body.get("connection_id") or "")
            if body.get("delta", 0) > 0:
                self.host.client_joined(hosted, connection_id, worker_pid=body.get("worker_pid"))
            else:
                self.host.client_left(hosted, connection_id)
            self.answer(200, {"clients": len(hosted.connections)})
        else:
            self.answer(404, {"code": "not_found", "message": self.path})

    def do_PUT(self):  # noqa: N802
        if not self.authorised():
            return
        parts, body, hosted = self.json_request()
        if hosted is not None and parts[2:] == ["categories"]:
            self.host.set_categories(hosted, body.get("categories") or ())
            self.answer(200, {"categories": sorted(hosted.categories)})
        elif hosted is not None and parts[2:] == ["viewport"]:
            self.answer(*self.host.resize(hosted, body))
        else:
            self.answer(404, {"code": "not_found", "message": self.path})

    def do_DELETE(self):  # noqa: N802
        if not self.authorised():
            return
        parts, query = self.route()
        if len(parts) == 2 and parts[0] == "sessions" and parts[1] in self.host.hosted:
            state = self.host.stop_browser(parts[1], save=query.get("save_state") == ["1"], reason=None)
            self.answer(200, {"profile_state": state})
        else:
            self.answer(404, {"code": "not_found", "message": "No such browser on this host."})

    def do_GET(self):  # noqa: N802
        if not self.authorised():
            return
        parts, _ = self.route()
        if parts == ["health"]:
            self.answer(200, {"name": self.host.name, "capacity": self.host.capacity,
                              "sessions": sorted(self.host.hosted)})
            return
        hosted = self.host.hosted.get(parts[1]) if len(parts) >= 3 and parts[0] == "sessions" else None
        if hosted is None or hosted.browser is None or hosted.stopping:
            self.answer(404, {"code": "not_found", "message": "No such browser on this host."})
        elif parts[2:] == ["endpoint"]:
            self.answer(200, hosted.browser.devtools.as_json())
        elif parts[2:] in (["json", "version"], ["json", "list"]):
            self.answer(200, hosted.browser.devtools.get_json("/" + "/".join(parts[2:])))
        elif parts[2] == "cdp" and self.headers.get("Upgrade", "").lower() == "websocket":
            target = "/" + "/".join(parts[3:]) if len(parts) > 3 else hosted.browser.browser_path
            self.relay(hosted, target)
        else:
            self.answer(404, {"code": "not_found", "message": self.path})

    def relay(self, hosted, target):
        """Hand the WebSocket handshake to Chromium (without Origin) and splice until either side ends."""
        self.close_connection = True
        devtools = hosted.browser.devtools
        try:
            upstream = devtools.connect(timeout=10)
        except OSError:
            self.answer(502, {"code": "browser_unreachable", "message": "The browser does not answer."})
            return
        upstream.sendall(upgrade_request(target, [f"Host: {devtools.host}"], self.headers))
        upstream.settimeout(None)
        connection_id = secrets.token_hex(8)
        self.host.client_joined(hosted, connection_id)
        self.connection.settimeout(None)  # the control API's idle timeout is not the CDP client's
        try:
            splice(self.connection, upstream)
        finally:
            upstream.close()
            self.host.client_left(hosted, connection_id)
