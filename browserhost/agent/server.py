"""The agent's HTTP server: HTTP/1.1 on a Unix socket, one request per connection, a thread per connection; it
routes each request to the handler of files, watches or processes and writes the handler's answer as it comes."""
import logging
import re
import socket
import time
from http.server import BaseHTTPRequestHandler
from socketserver import ThreadingMixIn, UnixStreamServer
from urllib.parse import parse_qs, unquote, urlsplit

from . import files, processes, transfer, watches
from .http import AgentError, Answer, Headers, Request, json_answer, os_refusal

log = logging.getLogger("agent")
SOCKET_TIMEOUT = 120.0  # a client that neither sends nor reads for this long is gone
DRAIN_SECONDS = 30.0  # how long an unread request body is read and dropped so the client sees the answer
DRAIN_IDLE_SECONDS = 5.0


def load_routes() -> list[tuple[str, re.Pattern, object]]:
    """The route tables of the agent's modules, each pattern compiled."""
    return [(method, compile_pattern(pattern), handler)
            for module in (files, transfer, watches, processes) for method, pattern, handler in module.ROUTES]


def compile_pattern(pattern: str) -> re.Pattern:
    """"/process/{id}/status" -> a regular expression with a named group per {value} (one path segment)."""
    parts = re.split(r"\{(\w+)\}", pattern)
    regex = "".join(re.escape(part) if index % 2 == 0 else f"(?P<{part}>[^/]+)" for index, part in enumerate(parts))
    return re.compile(f"^{regex}$")


class AgentServer(ThreadingMixIn, UnixStreamServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, listener: socket.socket):
        super().__init__(listener.getsockname(), AgentHandler, bind_and_activate=False)
        self.socket.close()
        self.socket = listener  # made and bound by the host (or a test), listening already
        self.routes = load_routes()

    def find(self, method: str, path: str):
        """(handler, params) of the route, or AgentError 404/405."""
        path_known = False
        for route_method, pattern, handler in self.routes:
            match = pattern.match(path)
            if match:
                path_known = True
                if route_method == method:
                    return handler, {key: unquote(value) for key, value in match.groupdict().items()}
        if path_known:
            raise AgentError(405, "method_not_allowed", f"{method} is not allowed on {path}")
        raise AgentError(404, "not_found", f"no route {path}")


class AgentHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "lantern-agent"
    timeout = SOCKET_TIMEOUT

    def do_GET(self):
        self.answer()

    do_PUT = do_POST = do_DELETE = do_GET

    def answer(self):
        self.close_connection = True
        request = None
        try:
            parts = urlsplit(self.path)
            handler, params = self.server.find(self.command, parts.path)
            query = {key: values[0] for key, values in parse_qs(parts.query, keep_blank_values=True,
                                                                errors="surrogateescape").items()}
            request = Request(self.command, parts.path, query, Headers(self.headers.items()), self.rfile, params)
            answer = handler(request)
        except AgentError as error:
            answer = json_answer(error.status, error.body())
        except OSError as error:
            refusal = os_refusal(error)
            answer = json_answer(refusal.status, refusal.body())
        except Exception:
            log.exception("%s %s failed", self.command, self.path)
            answer = json_answer(500, {"code": "internal_error", "message": "the session's agent failed"})
        self.write(answer)
        self.drain(request)

    def write(self, answer: Answer):
        chunked = answer.length is None
        try:
            self.send_response(answer.status)
            for name, value in answer.headers:
                self.send_header(name, value)
            self.send_header("Transfer-Encoding" if chunked else "Content-Length",
                             "chunked" if chunked else str(answer.length))
            self.send_header("Connection", "close")
            self.end_headers()
            for chunk in answer.chunks:
                if chunk:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
        except OSError as error:
            log.info("%s %s: the answer was cut (%s)", self.command, self.path, error)
        except Exception:
            log.exception("%s %s failed while answering", self.command, self.path)
        finally:
            close = getattr(answer.chunks, "close", None)
            if close:
                close()  # a file or a generator's clean-up runs now, not whenever it is collected

    def drain(self, request: Request | None, to_end: bool = False):
        """Read and drop the request's unread rest (its body's, or all the client sends with `to_end`): closing
        a socket with unread data resets it, and a client still sending (a body refused early with a 413, a
        request line too long) would lose the answer."""
        if to_end:
            left = None
        else:
            left = request.unread() if request else declared_length(self.headers.get("Content-Length"))
        try:
            self.connection.shutdown(socket.SHUT_WR)
            self.connection.settimeout(DRAIN_IDLE_SECONDS)
            deadline = time.monotonic() + DRAIN_SECONDS
            while time.monotonic() < deadline and (left is None or left > 0):
                data = self.rfile.read1(65536 if left is None else min(left, 65536))
                if not data:
                    break
                if left is not None:
                    left -= len(data)
        except (OSError, ValueError):
            pass

    def send_error(self, code, message=None, explain=None):
        """Errors of HTTP itself (a request line too long, a malformed request) in the API's shape too."""
        self.close_connection = True
        self.write(json_answer(code, {"code": "bad_http_request", "message": message or self.responses.get(
            code, ("",))[0]}))
        self.drain(None, to_end=True)

    def log_message(self, format, *args):
        log.info("%s " + format, "agent", *args)


def declared_length(value: str | None) -> int:
    return int(value) if value and value.strip().isdigit() else 0


def serve(listener: socket.socket) -> None:
    """Serve on a listening Unix socket until the process ends."""
    server = AgentServer(listener)
    log.info("serving %d routes", len(server.routes))
    server.serve_forever()
