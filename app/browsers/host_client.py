"""The app's client of a browser host's control API (lantern_wire/control.py): a method per route, taking and
answering the contract's shapes, over a keep-alive connection pool per host (urllib3); and the one translation of a
host's errors into the API's error shape (api_error), by the route that failed.

Plain http:// only (lantern_wire.hosts.control_url), no proxies, no redirects: a host's key goes to that host and
nowhere else.
No call is retried here: a start moves to another host within its deadline (drivers.HostDriver.start), and
computer actions or a recording's start are not idempotent.
"""
import json
import logging
import re
from dataclasses import dataclass

import urllib3
from pydantic import BaseModel, ValidationError
from urllib3.exceptions import ConnectTimeoutError, HTTPError, NewConnectionError, ProxyError

from app.core import crypto
from app.core.errors import NO_RETRY, ApiError, bad_request, conflict, not_found
from app.core.settings import settings
from lantern_wire import control
from lantern_wire.hosts import control_url
from lantern_wire.pacing import READ_ONLY

logger = logging.getLogger(__name__)
# What a streamed answer (HostClient.stream) is read by: all a worker holds of it at once.
STREAM_CHUNK = 256 * 1024
HOST_CODE = re.compile(r"[a-z_]{1,64}")
MAX_MESSAGE = 1000
# A host machine that is off answers no connection at all: a call gives up on it after this, whatever its own
# timeout (a start may take BROWSER_HOST_START_SECONDS once connected).
CONNECT_SECONDS = 5
# Idle keep-alive connections kept per host: more are opened when needed and closed after their call.
CONNECTIONS_PER_HOST = 8
# Retry-After of a change refused while the session's browser starts (again).
RESTART_RETRY_SECONDS = 2
# The codes of a host's refusals of a recording worded for the session's user (browserhost/server.py).
TENANTS_WORDS = {"browser_unreachable", "not_found", "replay_in_progress", "bad_request"}
# What a host refusing a start answers when it started nothing there (another host may take the session). Not
# browser_host_busy: that host spent the whole start deadline.
HOST_DID_NOT_TAKE = ("no_browser_capacity", "browser_host_stopping", "browser_host_unavailable")

_pools = urllib3.PoolManager(num_pools=256, maxsize=CONNECTIONS_PER_HOST, block=False, retries=False)


class HostError(Exception):
    """A host could not do what was asked; `status` and `code` come from its answer when it gave one. `reached`:
    the request may have reached the host (False only when no connection was made), so what it asked may happen
    there all the same. `route` (a lantern_wire.control path template), `session_id` and `request` say what was
    asked; `malformed`: the host answered, with what the route does not answer."""

    def __init__(self, message, status=None, code=None, *, reached=True, route=None, session_id=None, request=None,
                 malformed=False):
        super().__init__(message)
        self.status, self.code, self.reached = status, code, reached
        self.route, self.session_id, self.request, self.malformed = route, session_id, request, malformed

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
                          session_id=request.session_id)

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

    def stream(self, method, route, body=None, *, limit, timeout, length=None,
               content_type="application/octet-stream", session_id=None, query="", **values) -> "StreamedAnswer":
        """`method route` with a body of any size and an answer of up to `limit` bytes, neither held whole (a
        session's files): `body` (a binary file or an iterable of bytes) is sent as it is read, with its `length`
        when known, else chunked; the answer is a StreamedAnswer once the host accepted the call. A refusal is a
        HostError as for every route (api_error translates it)."""
        path = control.path(route, session_id=session_id, **values) + query
        headers = {} if body is None else {"Content-Type": content_type}
        if length is not None:
            headers["Content-Length"] = str(length)
        try:
            response = _open(self.host, method, path, body, headers, timeout=timeout)
            if response.status >= 300:
                data = _read_bounded(self.host, response)
                try:
                    answer = json.loads(data or b"null")
                except ValueError:
                    answer = None
                raise _refusal(response.status, answer)
        except HostError as error:
            error.route, error.session_id = route, session_id
            raise
        return StreamedAnswer(self.host, response, limit)

    @staticmethod
    def cdp_path(session_id, target_path=""):
        """The path of the host's CDP relay for the session's browser (or one of its targets)."""
        return control.path(control.SESSION_CDP, session_id=session_id) + target_path

    def _call(self, method, route, request, answers, *, timeout, session_id=None, query="", **values):
        def failed(message, **details):
            return HostError(message, route=route, session_id=session_id, request=request, **details)

        path = control.path(route, session_id=session_id, **values) + query
        try:
            body = request.model_dump(mode="json") if request is not None else {} if method in ("POST", "PUT") else None
            answer = send(self.host, method, path, body, timeout=timeout)
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


def send(host, method, path, body=None, *, timeout):
    """The host's JSON answer to `method path` (`body`: JSON-able); HostError when it cannot be reached, refuses, or
    answers what is not JSON (the app reads at most control.MAX_JSON_BYTES)."""
    response = _open(host, method, path, None if body is None else json.dumps(body).encode(),
                     {"Content-Type": "application/json"}, timeout=timeout)
    data = _read_bounded(host, response)
    try:
        answer = json.loads(data or b"null")
    except ValueError:
        answer = ValueError
    if response.status >= 400:
        raise _refusal(response.status, answer)
    if answer is ValueError or response.status >= 300:
        raise HostError(f"browser host {host.name} answered {method} {path} with HTTP {response.status} and no JSON")
    return answer


def _open(host, method, path, body, headers, *, timeout):
    """The host's answer to `method path` (a urllib3 response, its body unread), `body` (bytes, a binary file or an
    iterable of bytes) sent as it is read."""

    if not control_url(host.address):
        raise HostError(f"browser host {host.name} has an address that is not a plain http:// one", reached=False)
    try:
        return _pools.request(method, host.address.rstrip("/") + path, body=body, redirect=False, retries=False,
                              headers={"Authorization": control_authorization(host), **headers}, preload_content=False,
                              timeout=urllib3.Timeout(connect=min(timeout, CONNECT_SECONDS), read=timeout))
    except (HTTPError, OSError) as error:
        raise _unanswered(host, error) from None


def _unanswered(host, error):
    # No connection made: the host has nothing to act on. Past that (a timeout waiting for the answer, a connection
    # lost), it may act all the same.
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
    refusal = answer if isinstance(answer, dict) else {}
    message, code = refusal.get("message"), refusal.get("code")
    if not (isinstance(code, str) and HOST_CODE.fullmatch(code)):
        code = None  # not a host's answer: a client is told its status alone (HostError.public_message)
    message = message[:MAX_MESSAGE] if isinstance(message, str) and message else f"HTTP {status}"
    return HostError(message, status, code)


class StreamedAnswer:
    """A host's answer read as it comes (HostClient.stream): `status` and `headers`; iterating gives its body in
    chunks of at most STREAM_CHUNK bytes, and a HostError past `limit` bytes or when the host stops part-way. It
    is closed once iterated to its end; else close() it (a context manager closes it too)."""

    def __init__(self, host, response, limit):
        self.status, self.headers = response.status, response.headers
        self._host, self._response, self._limit = host, response, limit
        self._whole = False

    def __iter__(self):
        received = 0
        try:
            for chunk in self._response.stream(STREAM_CHUNK):
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


# -- the one translation of a host's errors ----------------------------------------------------------------------

def api_error(error):
    """The API's error for what a host did not do (`error`, a HostError of one of HostClient's calls), in the host's
    words where they are meant for a tenant; x-should-retry false where the same request again could do something
    twice."""
    route = error.route
    if route == control.SESSIONS:
        return _start_failed(error)
    if route == control.SESSION_COMPUTER:
        return _computer_failed(error)
    if route in (control.SESSION_REPLAYS, control.SESSION_REPLAY_STOP):
        return _recording_failed(error)
    if route in (control.SESSION_VIEWPORT, control.SESSION_PROFILE):
        return _not_changed(error, "resized" if route == control.SESSION_VIEWPORT else "given the profile")
    if route == control.SESSION_ENDPOINT:
        return ApiError(502, "browser_host_unreachable", f"The browser of session {error.session_id!r} does not "
                        "answer.", headers={"Retry-After": "5"})
    return ApiError(502, "browser_host_unreachable", f"The browser's host did not answer: {error.public_message}",
                    headers=_retry_after())


def _retry_after():
    return {"Retry-After": str(settings().browser_capacity_retry_after_seconds)}


def _start_failed(error):
    if error.status == 400:
        return ApiError(400, "bad_request", error.public_message)
    if error.status is None:  # it did not answer at all: it died, and is not yet known as lost
        return ApiError(503, "no_browser_host", "The browser host placed to run it did not answer; retry: a "
                        "host that stays silent stops getting sessions.", headers=_retry_after())
    return ApiError(503, "browser_start_failed", f"The browser could not be started: {error.public_message}",
                    headers=_retry_after())


def _computer_failed(error):
    """A 502 for actions the host did not do carries Retry-After only when sending them again cannot do one twice
    (they never reached the host, or only read). Else the SDKs must not resend it: a host that failed part-way, or
    did not answer, may have clicked or typed already."""
    if error.status == 400:
        return bad_request(error.public_message)
    if error.status in (404, 501):
        return ApiError(error.status, error.code or "not_found", error.public_message)
    if error.malformed:  # they ran
        return ApiError(502, "computer_action_failed", "The browser host answered without the actions' results.",
                        headers=NO_RETRY)
    message = f"The browser could not do it: {error.public_message.rstrip('.')}"
    actions = error.request.actions if error.request is not None else ()
    if not error.reached or all(action["type"] in READ_ONLY for action in actions):
        return ApiError(502, "computer_action_failed", message, headers=_retry_after())
    return ApiError(502, "computer_action_failed", f"{message}. Some actions may have run: look at the screen "
                    "before sending them again.", headers=NO_RETRY)


def _recording_failed(error):
    if error.status == 409:
        return conflict(error.code or "replay_in_progress", error.public_message)
    if error.status == 404:
        return ApiError(404, "not_found", error.public_message)
    # A host's failure to run ffmpeg or reach the browser may name its folders and processes: the tenant is told
    # what failed, this server's log (and the host's) why. Only a host's words meant for tenants go on.
    logger.warning("a browser host could not start or stop a recording: %s", error)
    said = f": {error.public_message}" if error.code in TENANTS_WORDS else f" ({error.code or 'no answer'})"
    # A host's own refusal started nothing, nor did a request that never reached it; one it had and did not answer
    # may be recording, and the SDKs' retry of the 502 would find it so.
    return ApiError(502, "replay_failed", f"The browser host could not do it{said}",
                    headers=_retry_after() if error.took_nothing else NO_RETRY)


def _not_changed(error, done):
    """What a client is told of a running browser that could not be `done` (a host's refusal in its own words)."""
    if error.status == 409:  # a browser starting again takes the change once it runs
        return conflict(error.code or "conflict", error.public_message,
                        retry_after=RESTART_RETRY_SECONDS if error.code == "browser_restarting" else None)
    if error.status == 404:
        return not_found(f"Browser session {error.session_id!r} has no running browser.", code="browser_not_found")
    logger.warning("browser host could not change session %s: %s", error.session_id, error)
    # The same request again asks for the same end state: worth retrying, unless the session ended (a restart that
    # failed).
    ended = error.code == "browser_start_failed"
    return ApiError(502, error.code or "browser_host_error", f"The browser could not be {done}: "
                    f"{error.public_message}", headers=NO_RETRY if ended else None)
