"""How gunicorn runs Lantern: `gunicorn --config gunicorn.conf.py wsgi:app` (make run does).

Workers are gevent workers with two changes that keep one client from stalling a
worker or getting an answer no API client can read:
- a request whose body the app answered without reading (a 401 or 413 before a
  large upload, a POST to a route that does not exist) ends its connection instead
  of keeping it alive, and its answer says so (`Connection: close`, decided when the
  app starts its answer): gunicorn would otherwise read and discard the rest of the
  body before the next request, which blocks the worker for as long as the client
  cares to send;
- what gunicorn refuses before the app sees it (a request line past
  limit_request_line, headers past their limits, a malformed request) is answered
  with the API's JSON error body instead of an HTML page.
Command-line flags override these settings.
"""
import gc
import json
import socket
import time

import gevent
from gunicorn.errors import AppImportError
from gunicorn.http import errors
from gunicorn.http.body import ChunkedReader, LengthReader
from gunicorn.workers.ggevent import GeventWorker

# Longest request line (method, path and query) gunicorn reads: its maximum. Longer is 414.
limit_request_line = 8190
graceful_timeout = 30
# Browser hosts beat every 2 s (BROWSER_HOST_HEARTBEAT_SECONDS) on kept-alive connections: gunicorn's default of
# 2 s closed each just as the next beat was sent on it (a retried call and a warning in the host's log each time).
keepalive = 5
# How long a quick stop (Ctrl-C) lets requests in flight finish (a CDP relay is cut after it).
QUICK_STOP_SECONDS = 1
# How long a connection closed on an unread body reads on (and discards), so that the
# close does not reset it before the client has read the answer.
LINGER_SECONDS = 1.0


class LanternWorker(GeventWorker):
    def handle_quit(self, sig, frame):
        """A quick stop (Ctrl-C, or the arbiter's SIGQUIT after one): the worker's loop ends as for SIGTERM,
        open streams at once and what is left after QUICK_STOP_SECONDS cut. gunicorn's own exits with
        sys.exit() from a greenlet, which gevent reports as a SystemExit traceback from every worker."""
        from app.core import shutdown  # (not at the top: the app is imported only once gevent patched the worker)

        shutdown.stopping.set()
        self.cfg.set("graceful_timeout", QUICK_STOP_SECONDS)
        self.alive = False

    def load_wsgi(self):
        from lantern_wire.settings_errors import SettingsError

        try:
            super().load_wsgi()
        except SettingsError as error:  # gunicorn prints its one line and stops, instead of starting workers again
            raise AppImportError(str(error)) from None
        self.wsgi = _closing_when_body_unread(self.wsgi)

    def handle_request(self, listener_name, req, sock, addr):
        try:
            super().handle_request(listener_name, req, sock, addr)
        except StopIteration:  # the connection ends: an answer to an unread body lingers first
            if _body_left_unread(req.body):
                _linger(sock)
            raise

    def handle_error(self, req, client, addr, exc):
        refusal = _refusal(exc)
        if refusal is None:
            return super().handle_error(req, client, addr, exc)
        status, reason, code, message = refusal
        self.log.warning("Refused request from ip=%s: %s %s", (addr or ("",))[0], status, exc)
        # As the app writes its bodies (docs/api.md): compact, keys sorted, one newline at the end.
        body = json.dumps({"code": code, "details": [], "message": message}, separators=(",", ":")).encode() + b"\n"
        head = (f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        try:
            client.sendall(head + body)
        except OSError:
            pass


worker_class = LanternWorker


def post_worker_init(worker):
    from app.core import streamslots

    streamslots.set_worker_connections(worker.cfg.worker_connections)
    # The loaded application lives as long as the worker: the cyclic collector's full
    # collections need not walk its objects again and again (what gc.freeze is for).
    gc.freeze()


def _closing_when_body_unread(app):
    """The WSGI app, whose answers to a request with an unread body close the connection. gunicorn passes
    its Response's own start_response; the app's own Connection header it would drop (hop-by-hop)."""

    def wsgi(environ, start_response):
        def start(status, headers, exc_info=None):
            if _body_left_unread(environ["wsgi.input"]):
                start_response.__self__.force_close()  # the head then says Connection: close
            return start_response(status, headers, exc_info)

        return app(environ, start)

    return wsgi


def _body_left_unread(body):
    reader = getattr(body, "reader", None)
    if isinstance(reader, LengthReader):
        return reader.length > 0
    if isinstance(reader, ChunkedReader):
        return reader.parser is not None
    return False


# What gunicorn refuses before the app sees the request, as (status, reason, code);
# other parse errors are 400, and gunicorn's own faults keep its handling.
_REFUSALS = [
    (errors.LimitRequestLine, 414, "URI Too Long", "uri_too_long"),
    (errors.LimitRequestHeaders, 431, "Request Header Fields Too Large", "request_header_fields_too_large"),
    (errors.UnsupportedTransferCoding, 501, "Not Implemented", "not_implemented"),
    (errors.ExpectationFailed, 417, "Expectation Failed", "expectation_failed"),
    (errors.ForbiddenProxyRequest, 403, "Forbidden", "forbidden"),
    ((errors.InvalidResponseHeader, errors.InvalidResponseHeaderName, errors.ConfigurationProblem), None, None, None),
    (errors.ParseException, 400, "Bad Request", "bad_request"),
]


def _linger(sock):
    """Half-close, then discard what the client still sends for a moment, yielding between reads
    (data already there would otherwise be read without ever letting other greenlets run)."""
    deadline = time.monotonic() + LINGER_SECONDS
    try:
        sock.shutdown(socket.SHUT_WR)
        while (remaining := deadline - time.monotonic()) > 0:
            sock.settimeout(remaining)
            if not sock.recv(65536):
                break
            gevent.sleep(0)
    except OSError:
        pass


def _refusal(exc):
    """(status, reason, code, message) for a request gunicorn refuses; None for its own faults."""
    status, reason, code = next(((s, r, c) for kind, s, r, c in _REFUSALS if isinstance(exc, kind)), (None,) * 3)
    if status is None:
        return None
    if status == 414:
        message = f"The request line (method, path and query) is longer than {limit_request_line} bytes."
    else:
        message = f"The request was refused before it reached Lantern: {reason}."
    return status, reason, code, message
