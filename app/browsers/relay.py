"""The CDP relay: a client's WebSocket on /browsers/{id}/cdp, spliced through to the
session's browser: through its host's relay when the host is another machine, or
straight to Chromium's DevTools when the host runs on this one (loopback address): the
Unix socket of its sandbox (or its port on 127.0.0.1 without a sandbox),
which saves a hop per message; the host is then told when the client comes and goes,
since a connected client keeps the session active.

Only the handshake is read here; after the host's 101 the bytes flow both ways
unchanged (two copy loops, greenlets under gunicorn's gevent worker), so the relay
costs no JSON work and no frame parsing. Each relayed connection holds a stream slot
(app/core/streamslots.py), like an event stream. The request's database connection is
given back before the splice: a CDP connection can last hours.
"""
import logging
import os
import socket
from urllib.parse import urlsplit

from flask import Response, request

from app.browsers.host_client import HostClient, HostError, control_authorization
from app.browsers.host_errors import api_error, browser_unreachable
from app.core import streamslots
from app.core.db import db
from app.core.errors import ApiError
from app.core.ids import new_id
from lantern_wire.control import ClientChange
from lantern_wire.devtools import DevTools
from lantern_wire.splice import splice, upgrade_request

logger = logging.getLogger(__name__)
HANDSHAKE_LIMIT = 64 * 1024
BAD_GATEWAY = b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
# A host advertised at a loopback IP runs on this machine; "localhost" is taken at its word
# as any other name (and so goes through the host's own relay).
LOOPBACK = {"127.0.0.1", "::1"}


def relay(session, target_path="", *, on_open=None, on_close=None):
    """Answer the WebSocket handshake with the browser's, then relay until either side closes; `on_open()` and
    `on_close()` are called once the browser accepted the connection and when it ends (the live view's)."""
    client = request.environ.get("gunicorn.socket")
    if client is None:
        raise ApiError(501, "websocket_unsupported", "The CDP relay runs under gunicorn (make run, gunicorn.conf.py); "
                                                     "this server cannot take over the connection.")
    slot = streamslots.admit(session.project.org_id)
    host = session.host
    try:
        # Straight to Chromium (then the host is told of the client; its own relay sees it otherwise).
        direct = _open_direct(session, target_path) if urlsplit(host.address).hostname in LOOPBACK else None
        upstream = direct or _open_through_host(session, target_path)
    except BaseException:
        slot.release()
        raise
    db.close()
    try:
        try:
            answer = _read_head(upstream)
        except OSError:  # no answer within the timeout
            answer = BAD_GATEWAY
        upstream.settimeout(None)  # a CDP connection may stay quiet for hours
        client.sendall(answer)
        if answer.startswith(b"HTTP/1.1 101"):
            connection_id = new_id()
            if direct:
                _tell_host(host, session.id, ClientChange(delta=1, connection_id=connection_id,
                                                          worker_pid=os.getpid()))
            if on_open:
                on_open()
            try:
                splice(client, upstream)
            finally:
                if direct:
                    _tell_host(host, session.id, ClientChange(delta=-1, connection_id=connection_id))
                if on_close:
                    on_close()
    finally:
        upstream.close()
        slot.release()
    return Handled(status=101)


def _open_through_host(session, target_path):
    address = urlsplit(session.host.address)
    try:
        upstream = socket.create_connection((address.hostname, address.port or 80), timeout=10)
    except OSError:
        raise browser_unreachable(session.id) from None
    return _handshake(upstream, HostClient.cdp_path(session.id, target_path),
                      [f"Host: {address.netloc}", f"Authorization: {control_authorization(session.host)}"])


def _open_direct(session, target_path):
    """Straight to the browser's DevTools of a host on this machine: its sandbox's Unix socket, or its port
    without a sandbox; None when this worker may not open the socket (only root may: it goes through the
    host's relay then), or when the socket the host names is not one of a sandbox's user (this worker
    connects where the host says: never to a socket of root's or of its own user)."""
    try:
        endpoint = HostClient(session.host).endpoint(session.id)
    except HostError as error:
        raise api_error(error) from None
    try:
        devtools = DevTools.from_json(endpoint)
    except ValueError:
        logger.warning("the browser host of session %s named no browser endpoint: %r", session.id, endpoint)
        raise browser_unreachable(session.id) from None
    if devtools.socket_path and not (type(devtools.owner) is int and devtools.owner not in (0, os.geteuid())):
        return None  # a socket only a sandbox's user owns is opened here; anything else goes through the host
    try:
        upstream = devtools.connect(timeout=10)
    except PermissionError:
        return None
    except OSError:
        raise browser_unreachable(session.id) from None
    return _handshake(upstream, target_path or devtools.browser_path, [f"Host: {devtools.host}"])


def _handshake(upstream, path, headers):
    """`upstream`, the WebSocket handshake sent on it (with its 10 s timeout until it is answered)."""
    upstream.sendall(upgrade_request(path, headers, request.headers))
    return upstream


def _tell_host(host, session_id, change):
    try:
        HostClient(host).client_changed(session_id, change)
    except HostError:
        pass  # the session ended meanwhile, or its host is gone: nothing to keep active


def _read_head(sock):
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        if not chunk or len(head) > HANDSHAKE_LIMIT:
            return BAD_GATEWAY
        head += chunk
    return head


class Handled(Response):
    """The answer of a connection this app took over: nothing more to write.

    gunicorn ends a connection whose application raises StopIteration (flask-sock does
    the same); this app already wrote everything on the socket itself.
    """

    def __call__(self, environ, start_response):
        raise StopIteration()
