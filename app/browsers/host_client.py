"""The app's client of a browser host's control API (lantern_wire/control.py): a method per route, taking and
answering the contract's shapes, over a keep-alive connection pool per host (urllib3). Its HostErrors become the API's
error shape in one place, app/browsers/host_errors.py.

Plain http:// only (lantern_wire.hosts.control_url), no proxies, no redirects: a host's key goes to that host and
nowhere else.

A pooled connection idle for IDLE_SECONDS is not used again (the host closes one idle for its IDLE_CLOSE_SECONDS,
and a call sent as it does so would be lost). Only the GET routes (read-only) are sent again, once, when the
connection fails before the answer (urllib3's Retry): a start moves to another host within its deadline instead
(drivers.HostDriver.start), and computer actions or a recording's start are not idempotent. A start goes on a
connection of its own, so that a host machine gone silent fails it at connecting (HostError.reached False: the start
moves) rather than after its deadline. So does every call of a session's agent: what it answers is the tenant's to
control, and however the host frames it, no byte of it may ever reach another call's connection.
"""
import json
import time
from dataclasses import dataclass

import urllib3
from pydantic import BaseModel, ValidationError
from urllib3.connection import HTTPConnection
from urllib3.exceptions import ConnectTimeoutError, HTTPError, MaxRetryError, NewConnectionError, ProxyError
from urllib3.util import Retry

from app.core import crypto
from lantern_wire import control
from lantern_wire.hosts import control_url

# What a streamed answer (HostClient.stream) is read by: all a worker holds of it at once.
STREAM_CHUNK = 256 * 1024
MAX_MESSAGE = 1000
# A host machine that is off answers no connection at all: a call gives up on it after this, whatever its own
# timeout (a start may take BROWSER_HOST_START_SECONDS once connected).
CONNECT_SECONDS = 5
# Idle keep-alive connections kept per host: more are opened when needed and closed after their call (urllib3 logs
# a warning for each). A gevent worker may run many computer calls to one host at once.
CONNECTIONS_PER_HOST = 32
# A pooled connection idle this long is closed instead of used: well within the host's own idle close, which may
# meet a call on its way.
IDLE_SECONDS = control.IDLE_CLOSE_SECONDS * 2 / 3
# A GET whose connection failed before its answer (reset, closed, timed out) is sent once more, on another one.
GET_RETRY = Retry(total=1, connect=0, read=1, status=0, other=0, redirect=0, respect_retry_after_header=False)


class HostConnection(HTTPConnection):
    """A keep-alive connection to a host that its pool drops once idle for IDLE_SECONDS (urllib3's pool asks
    is_connected before using a pooled connection again)."""

    answered_at = None

    def getresponse(self, *args, **kwargs):
        response = super().getresponse(*args, **kwargs)
        self.answered_at = time.monotonic()
        return response

    @property
    def is_connected(self):
        if self.answered_at is not None and time.monotonic() - self.answered_at > IDLE_SECONDS:
            return False
        return super().is_connected


class FreshConnection(HTTPConnection):
    """A connection used for one call: its pool closes it and connects again for the next."""

    @property
    def is_connected(self):
        return False


class HostPool(urllib3.HTTPConnectionPool):
    ConnectionCls = HostConnection


class FreshPool(urllib3.HTTPConnectionPool):
    ConnectionCls = FreshConnection


def host_pools(pool_class, **options):
    pools = urllib3.PoolManager(num_pools=256, block=False, retries=False, **options)
    pools.pool_classes_by_scheme = {"http": pool_class}  # control_url: plain http:// only
    return pools


_pools = host_pools(HostPool, maxsize=CONNECTIONS_PER_HOST)
# Connections without a socket once their call is done (the host closes them): kept only so that many calls at once
# (a worker's agent calls) do not each log urllib3's "pool is full" warning.
_fresh_pools = host_pools(FreshPool, maxsize=CONNECTIONS_PER_HOST)


class HostError(Exception):
    """A host could not do what was asked; `status` and `code` come from its answer when it gave one. `reached`:
    the request may have reached the host (False only when no connection was made), so what it asked may happen
    there all the same. `route` (a lantern_wire.control path template), `session_id` and `request` say what was
    asked; `malformed`: the host answered, with what the route does not answer. `extra`: the refusal's fields
    beyond its code and message (a session agent's `room_bytes`); `method`: the call's, for a forwarded one."""

    def __init__(self, message, status=None, code=None, *, reached=True, route=None, session_id=None, request=None,
                 malformed=False, extra=None):
        super().__init__(message)
        self.status, self.code, self.reached = status, code, reached
        self.route, self.session_id, self.request, self.malformed = route, session_id, request, malformed
        self.extra, self.method = extra or {}, None

    @property
    def public_message(self):
        """What a client may be told: the host's own words when it answered as a host does (with a code), else
        only the status. A host's address, a connection's error and what a service answering in a host's place
        says stay in the server's log."""
        if self.code:
            return str(self)
        return f"the browser host answered HTTP {self.status}" if self.status else "the browser host did not answer"

    @property
    def took_nothing(self):
        """Whether the host surely did nothing of it: it refused in its own words, or was never reached."""
        return self.code is not None or not self.reached


def control_authorization(host):
    """The Authorization header the app calls `host` with (its own key, never another host's)."""
    if not host.control_key:
        raise HostError(f"browser host {host.name} has no credential: add it (flask browsers hosts add)")
    return f"Bearer {crypto.decrypt(host.control_key)}"


@dataclass
class HostClient:
    """The control API of `host` (a BrowserHost row)."""

    host: object

    def start(self, request: control.StartRequest, *, timeout) -> control.StartAnswer:
        return self._call("POST", control.SESSIONS, request, control.StartAnswer, timeout=timeout,
                          session_id=request.session_id, fresh=True)

    def stop(self, session_id, *, save, timeout) -> control.StopAnswer:
        return self._call("DELETE", control.SESSION, None, control.StopAnswer, timeout=timeout, session_id=session_id,
                          query=f"?{control.SAVE_STATE}={int(save)}")

    def devtools_version(self, session_id) -> dict:
        return self._call("GET", control.SESSION_JSON_VERSION, None, dict, timeout=10, session_id=session_id)

    def devtools_targets(self, session_id) -> list:
        return self._call("GET", control.SESSION_JSON_LIST, None, list, timeout=10, session_id=session_id)

    def endpoint(self, session_id) -> dict:
        """The browser's DevTools endpoint (lantern_wire.devtools.DevTools JSON), for a worker on the host's machine."""
        return self._call("GET", control.SESSION_ENDPOINT, None, dict, timeout=10, session_id=session_id)

    def client_changed(self, session_id, change: control.ClientChange) -> control.ClientsAnswer:
        return self._call("POST", control.SESSION_CLIENTS, change, control.ClientsAnswer, timeout=10,
                          session_id=session_id)

    def computer(self, session_id, request: control.ComputerRequest, *, timeout) -> control.ComputerAnswer:
        return self._call("POST", control.SESSION_COMPUTER, request, control.ComputerAnswer, timeout=timeout,
                          session_id=session_id)

    def start_replay(self, session_id, start: control.ReplayStart, *, timeout) -> control.ReplayStarted:
        return self._call("POST", control.SESSION_REPLAYS, start, control.ReplayStarted, timeout=timeout,
                          session_id=session_id)

    def stop_replay(self, session_id, replay_id, *, timeout) -> control.ReplayStopped:
        return self._call("POST", control.SESSION_REPLAY_STOP, None, control.ReplayStopped, timeout=timeout,
                          session_id=session_id, replay_id=replay_id)

    def set_categories(self, session_id, categories: control.Categories) -> control.CategoriesAnswer:
        return self._call("PUT", control.SESSION_CATEGORIES, categories, control.CategoriesAnswer, timeout=10,
                          session_id=session_id)

    def change_viewport(self, session_id, change: control.ViewportChange, *, timeout) -> control.ViewportChanged:
        return self._call("PUT", control.SESSION_VIEWPORT, change, control.ViewportChanged, timeout=timeout,
                          session_id=session_id)

    def load_profile(self, session_id, load: control.ProfileLoad, *, timeout) -> control.ProfileLoaded:
        return self._call("POST", control.SESSION_PROFILE, load, control.ProfileLoaded, timeout=timeout,
                          session_id=session_id)

    def health(self) -> control.Health:
        return self._call("GET", control.HEALTH, None, control.Health, timeout=10)

    def agent(self, session_id, method, path, body=None, *, query="", **options) -> "StreamedAnswer":
        """`method path` (such as "fs/read_file") of the session's agent, forwarded by its host as it is, on a
        connection of its own; `options` as stream's. The answer streams: a file, an SSE stream, or exec's answer
        trickling in."""
        return self.stream(method, control.SESSION_AGENT, body, session_id=session_id, path=path, query=query,
                           fresh=True, **options)

    def agent_json(self, session_id, method, path, body=None, *, query="", timeout):
        """The JSON answer (None for an empty one) of the session's agent to `method path` with the JSON `body`, on a
        connection of its own."""
        url = control.path(control.SESSION_AGENT, session_id=session_id, path=path) + query
        try:
            return send(self.host, method, url, body, timeout=timeout, fresh=True)
        except HostError as error:
            error.route, error.session_id, error.method = control.SESSION_AGENT, session_id, method
            raise

    def stream(self, method, route, body=None, *, limit, timeout, length=None,
               content_type="application/octet-stream", headers=None, session_id=None, query="", fresh=False,
               **values) -> "StreamedAnswer":
        """`method route` with a body of any size and an answer of up to `limit` bytes, neither held whole (a
        session's files): `body` (a binary file or an iterable of bytes) is sent as it is read, with its `length`
        when known, else chunked; `headers` go with it. The answer is a StreamedAnswer once the host accepted the
        call. A refusal is a HostError as for every route (api_error translates it). `fresh`: on a connection of
        its own."""
        path = control.path(route, session_id=session_id, **values) + query
        headers = dict(headers or {}, **({} if body is None else {"Content-Type": content_type}))
        if length is not None:
            headers["Content-Length"] = str(length)
        try:
            response = _open(self.host, method, path, body, headers, timeout=timeout, fresh=fresh)
            if response.status >= 300:
                data = _read_bounded(self.host, response)
                try:
                    answer = json.loads(data or b"null")
                except ValueError:
                    answer = None
                raise _refusal(response.status, answer)
        except HostError as error:
            error.route, error.session_id, error.method = route, session_id, method
            raise
        return StreamedAnswer(self.host, response, limit)

    @staticmethod
    def cdp_path(session_id, target_path=""):
        """The path of the host's CDP relay for the session's browser (or one of its targets)."""
        return control.path(control.SESSION_CDP, session_id=session_id) + target_path

    def _call(self, method, route, request, answers, *, timeout, session_id=None, query="", fresh=False, **values):
        def failed(message, **details):
            return HostError(message, route=route, session_id=session_id, request=request, **details)

        path = control.path(route, session_id=session_id, **values) + query
        try:
            body = request.model_dump(mode="json") if request is not None else {} if method in ("POST", "PUT") else None
            answer = send(self.host, method, path, body, timeout=timeout, fresh=fresh)
        except HostError as error:
            error.route, error.session_id, error.request = route, session_id, request
            raise
        if isinstance(answers, type) and issubclass(answers, BaseModel):
            try:
                return answers.model_validate(answer)
            except ValidationError as error:
                raise failed(f"browser host {self.host.name} answered {method} {path} with what it does not answer: "
                             f"{error.errors()[0]['loc']}", malformed=True) from None
        if not isinstance(answer, answers):
            raise failed(f"browser host {self.host.name} answered {method} {path} with a JSON "
                         f"{type(answer).__name__}", malformed=True)
        return answer


def send(host, method, path, body=None, *, timeout, fresh=False):
    """The host's JSON answer to `method path` (`body`: JSON-able); HostError when it cannot be reached, refuses, or
    answers what is not JSON (the app reads at most control.MAX_JSON_BYTES); an empty answer is None. `fresh`: on a
    connection of its own."""
    response = _open(host, method, path, None if body is None else json.dumps(body).encode(),
                     {"Content-Type": "application/json"}, timeout=timeout, fresh=fresh)
    data = _read_bounded(host, response)
    try:
        answer = json.loads(data or b"null")
    except ValueError:
        answer = ValueError
    if response.status >= 400:
        raise _refusal(response.status, answer)
    if answer is ValueError or response.status >= 300:
        raise HostError(f"browser host {host.name} answered {method} {path} with HTTP {response.status} and no JSON",
                        malformed=response.status < 300)  # a 2xx: it did what was asked
    return answer


def _open(host, method, path, body, headers, *, timeout, fresh=False):
    """The host's answer to `method path` (a urllib3 response, its body unread), `body` (bytes, a binary file or an
    iterable of bytes) sent as it is read."""

    if not control_url(host.address):
        raise HostError(f"browser host {host.name} has an address that is not a plain http:// one", reached=False)
    try:
        return (_fresh_pools if fresh else _pools).request(
            method, host.address.rstrip("/") + path, body=body, redirect=False,
            retries=GET_RETRY if method == "GET" else False, preload_content=False,
            headers={"Authorization": control_authorization(host), **headers,
                     **({"Connection": "close"} if fresh else {})},  # the host need not keep it open
            timeout=urllib3.Timeout(connect=min(timeout, CONNECT_SECONDS), read=timeout))
    except (HTTPError, OSError) as error:
        raise _unanswered(host, error) from None


def _unanswered(host, error):
    # No connection made: the host has nothing to act on. Past that (a timeout waiting for the answer, a connection
    # lost), it may act all the same.
    if isinstance(error, MaxRetryError):  # a GET's second try failed too (or its first could not connect)
        error = error.reason
    unsent = isinstance(error, (NewConnectionError, ConnectTimeoutError, ProxyError))
    return HostError(f"browser host {host.name} at {host.address} did not answer: {type(error).__name__}",
                     reached=not unsent)


def _read_bounded(host, response):
    """The body of `response`, at most control.MAX_JSON_BYTES; its connection kept for the next call when read whole."""
    try:
        try:
            data = response.read(control.MAX_JSON_BYTES + 1)
        except BaseException:
            response.close()
            raise
    except (HTTPError, OSError) as error:
        raise _unanswered(host, error) from None
    if len(data) > control.MAX_JSON_BYTES:
        response.close()  # the rest of it unread: the connection cannot be used again
        raise HostError(f"browser host {host.name} answered past {control.MAX_JSON_BYTES} bytes")
    response.release_conn()
    return data


def _refusal(status, answer):
    """The HostError of an answer of HTTP `status` >= 400 (`answer`: its JSON, or anything else)."""
    try:
        refusal = control.HostRefusal.model_validate(answer)
    except ValidationError:  # not a host's answer: a client is told its status alone (HostError.public_message)
        return HostError(f"HTTP {status}", status)
    return HostError(refusal.message[:MAX_MESSAGE] or f"HTTP {status}", status, refusal.code,
                     extra=refusal.model_extra)


class StreamedAnswer:
    """A host's answer read as it comes (HostClient.stream): `status` and `headers`; iterating gives its body in
    chunks of at most STREAM_CHUNK bytes (as_it_comes: each as soon as it arrives), and a HostError past `limit`
    bytes or when the host stops part-way. It is closed once iterated to its end; else close() it (a context
    manager closes it too)."""

    def __init__(self, host, response, limit):
        self.status, self.headers = response.status, response.headers
        self._host, self._response, self._limit = host, response, limit
        self._whole = False

    def __iter__(self):
        return self._chunks(self._response.stream(STREAM_CHUNK))

    def as_it_comes(self):
        """The body's bytes as soon as they arrive, not gathered into full chunks: an event stream's frames, or a
        wait's keep-alive spaces, reach the client when the host sends them."""
        return self._chunks(iter(lambda: self._response.read1(STREAM_CHUNK) or b"", b""))

    def _chunks(self, reads):
        received = 0
        try:
            for chunk in reads:
                received += len(chunk)
                if received > self._limit:
                    raise HostError(f"browser host {self._host.name} answered past {self._limit} bytes")
                yield chunk
            self._whole = True
        except (HTTPError, OSError) as error:
            raise HostError(f"browser host {self._host.name} stopped answering part-way: "
                            f"{type(error).__name__}") from None
        finally:
            self.close()

    def close(self):
        if self._whole:
            self._response.release_conn()
        else:
            self._response.close()  # left part-way: that connection cannot be used again

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
