"""The network category: requests, responses with their bodies, failed loads.

    Network.requestWillBeSent       network_request (a redirect reuses the requestId: the hop's
                                    3xx becomes a network_response, then is_redirect/redirect_url)
    Network.responseReceived        kept until the load ends
    Network.loadingFinished         network_response (status, status_text, headers, mime_type,
                                    method, resource_type; body for text types, first 8 KB)
    Network.loadingFailed           network_loading_failed

Bodies are fetched on the calling thread (connection.py), so a response event waits for its body and
may reach the sink after events read later; its ts is still the loadingFinished one. There is no
timing field in the SDK's network_response: a request's timing is the ts of its network_request and
network_response.
"""
import logging

from browserhost.capture.connection import CALL_TIMEOUT, IGNORED_SCHEMES
from browserhost.capture.text import MAX_SHORT, MAX_URL, Cut
from browserhost.cdp import CdpError

log = logging.getLogger(__package__)  # the name these lines had before capture.py became a package

MAX_POST_DATA = 8192
MAX_BODY = 8192
MAX_BODY_FETCH = 256 * 1024  # bodies larger than this on the wire are not fetched at all
MAX_PENDING_REQUESTS = 2000  # per target: requests whose load has not ended
TEXT_MIME_TYPES = ("application/json", "application/javascript", "application/xml", "application/x-www-form-urlencoded")

IGNORED = object()  # a request of an ignored scheme, in Target.requests


class _Request:
    __slots__ = ("frame_id", "loader_id", "method", "resource_type", "response", "url")

    def __init__(self, url, method, resource_type, frame_id, loader_id):
        self.url, self.method, self.resource_type = url, method, resource_type
        self.frame_id, self.loader_id = frame_id, loader_id
        self.response = None


class Network:
    """Handlers of the Network events above, for the sessions in `targets` (session id -> Target);
    `call` makes a CDP call and `calls` runs it off the reader."""

    def __init__(self, targets, categories, emit, *, call, calls, clock):
        self._targets, self._categories, self._emit = targets, categories, emit
        self._call, self._calls, self._clock = call, calls, clock

    def handlers(self):
        return {"Network.requestWillBeSent": self._on_request, "Network.responseReceived": self._on_response,
                "Network.loadingFinished": self._on_loading_finished, "Network.loadingFailed": self._on_loading_failed}

    def set_up(self, send, target):
        send("Network.enable", {"maxPostDataSize": MAX_POST_DATA * 2}, session_id=target.session_id)

    def _on_request(self, params, session_id):
        if "network" not in self._categories:
            return
        target = self._targets.get(session_id)
        if target is None:
            return
        request = params.get("request", {})
        url, request_id = request.get("url", ""), params.get("requestId", "")
        previous = target.requests.pop(request_id, None)
        if len(target.requests) >= MAX_PENDING_REQUESTS:  # loads that never ended: forget the oldest
            del target.requests[next(iter(target.requests))]
        if url.startswith(IGNORED_SCHEMES):
            target.requests[request_id] = IGNORED  # so that its end is not reported either
            return
        redirect = params.get("redirectResponse")
        if redirect is not None and isinstance(previous, _Request):
            previous.response = redirect
            self._emit_response(target, request_id, previous, "Network.requestWillBeSent")
        entry = _Request(url, request.get("method"), params.get("type"), params.get("frameId"), params.get("loaderId"))
        target.requests[request_id] = entry
        cut = Cut()
        data = target.context(cut, frame_id=entry.frame_id, url=url)
        data.update(request_id=request_id, method=entry.method or "", headers=cut.headers(request.get("headers")))
        if entry.loader_id:
            data["loader_id"] = entry.loader_id
        for key, name in (("type", "resource_type"), ("documentURL", "document_url")):
            if params.get(key):
                data[name] = cut(params[key], MAX_URL)
        if (params.get("initiator") or {}).get("type"):
            data["initiator_type"] = params["initiator"]["type"]
        if request.get("postData"):
            data["post_data"] = cut(request["postData"], MAX_POST_DATA)
        if redirect is not None:
            data.update(is_redirect=True, redirect_url=cut(redirect.get("url", ""), MAX_URL))
        self._emit("network_request", "network", target.source("Network.requestWillBeSent"), data, cut.cut)

    def _on_response(self, params, session_id):
        target = self._targets.get(session_id)
        if target is None or "network" not in self._categories:
            return
        entry = target.requests.get(params.get("requestId"))
        if isinstance(entry, _Request):
            entry.response = params.get("response", {})
            entry.resource_type = params.get("type") or entry.resource_type

    def _on_loading_finished(self, params, session_id):
        target = self._targets.get(session_id)
        if target is None:
            return
        request_id = params.get("requestId")
        entry = target.requests.pop(request_id, None)
        if not isinstance(entry, _Request) or "network" not in self._categories:
            return
        response = entry.response or {}
        if (_has_text_body(response) and 0 < params.get("encodedDataLength", 0) <= MAX_BODY_FETCH
                and self._calls.put(self._fetch_body, target, request_id, entry, self._clock())):
            return
        self._emit_response(target, request_id, entry, "Network.loadingFinished")  # without its body

    def _emit_response(self, target, request_id, entry, method, *, body=None, read_at=None):
        response = entry.response or {}
        cut = Cut()
        data = target.context(cut, frame_id=entry.frame_id, url=entry.url)
        data.update(request_id=request_id, method=entry.method or "", headers=cut.headers(response.get("headers")))
        if entry.loader_id:
            data["loader_id"] = entry.loader_id
        if isinstance(response.get("status"), int):
            data["status"] = response["status"]
        for key, name in (("statusText", "status_text"), ("mimeType", "mime_type")):
            if response.get(key):
                data[name] = cut(response[key], MAX_SHORT)
        if entry.resource_type:
            data["resource_type"] = entry.resource_type
        if body is not None:
            data["body"] = cut(body, MAX_BODY)
        self._emit("network_response", "network", target.source(method), data, cut.cut, read_at=read_at)

    def _fetch_body(self, target, request_id, entry, read_at):
        body = None
        try:
            result = self._call("Network.getResponseBody", {"requestId": request_id},
                                session_id=target.session_id, timeout=CALL_TIMEOUT)
            if not result.get("base64Encoded"):
                body = result.get("body")
        except CdpError as error:  # gone after a navigation, evicted, or the connection closed
            log.debug("no body for %s: %s", request_id, error)
        self._emit_response(target, request_id, entry, "Network.loadingFinished", body=body, read_at=read_at)

    def _on_loading_failed(self, params, session_id):
        target = self._targets.get(session_id)
        if target is None:
            return
        request_id = params.get("requestId", "")
        entry = target.requests.pop(request_id, None)
        if entry is IGNORED or "network" not in self._categories:
            return
        cut = Cut()
        data = target.context(cut, frame_id=entry.frame_id if entry else None, url=entry.url if entry else "")
        if entry is None:  # in flight before capture began: the SDK leaves these out
            for key in ("url", "frame_id", "loader_id"):
                data.pop(key, None)
        elif entry.loader_id:
            data["loader_id"] = entry.loader_id
        data.update(request_id=request_id, error_text=cut(params.get("errorText", ""), MAX_SHORT),
                    canceled=bool(params.get("canceled")))
        if params.get("type"):
            data["resource_type"] = params["type"]
        self._emit("network_loading_failed", "network", target.source("Network.loadingFailed"), data, cut.cut)


def _has_text_body(response):
    mime = (response.get("mimeType") or "").lower()
    return mime.startswith("text/") or mime in TEXT_MIME_TYPES or mime.endswith(("+json", "+xml"))
