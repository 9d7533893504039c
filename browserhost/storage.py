"""A profile's state in and out of a running Chromium, over a browser-level CdpClient.

The state is the storage-state layout profiles keep (app/profiles/models.py):
    {"cookies": [{"name", "value", "domain", "path", "expires", "httpOnly", "secure", "sameSite"}, ...],
     "origins": [{"origin": "http://127.0.0.1:8000", "localStorage": [{"name", "value"}, ...]}, ...]}
Cookies go through the browser's cookie store (Storage.setCookies / getCookies, httpOnly ones
included). localStorage belongs to an origin and DevTools reaches it only from a frame on that
origin, so for an origin with no open page a throwaway tab is pointed at it with its requests
answered by an empty page (Fetch interception): no request leaves the browser, and the site
need not be reachable. That is how Playwright applies and reads storage state. Only the default
browser context is read or written: a client's own contexts (Playwright's new_context) are not
the profile's.
"""
import base64
import logging
import threading
from contextlib import contextmanager
from urllib.parse import urlsplit

from browserhost.cdp import CdpError

log = logging.getLogger(__name__)

SAME_SITE = ("Strict", "Lax", "None")
PAGE_TIMEOUT = 5.0
# A page's own session answers DOMStorage in milliseconds, unless the page is stuck (a dialog open):
# then the origin is read from a fresh tab instead.
OPEN_PAGE_TIMEOUT = 2.0
EMPTY_PAGE = base64.b64encode(b"<!doctype html><title></title>").decode()


def load_state(cdp, state):
    """Put the state's cookies and localStorage into the browser's default context. The origins whose localStorage
    could not be put (one the session's policies keep the browser from opening, URLBlocklist): the others and the
    session go on."""
    cookies = [_cdp_cookie(cookie) for cookie in state.get("cookies") or ()]
    if cookies:
        _set_cookies(cdp, cookies)
    origins = [entry for entry in state.get("origins") or () if entry.get("localStorage")]
    skipped = []
    if origins:
        with _origin_tab(cdp) as visit:
            for entry in origins:
                origin = web_origin(entry["origin"])
                if origin is None:
                    log.warning("localStorage of %r not restored: not an http(s) origin", entry["origin"])
                    continue
                try:
                    storage_id = visit(origin)
                    for item in entry["localStorage"]:
                        cdp.call("DOMStorage.setDOMStorageItem",
                                 {"storageId": storage_id, "key": item["name"], "value": item["value"]},
                                 session_id=visit.session_id)
                except CdpError as error:
                    log.info("localStorage of %s not restored: %s", origin, error)
                    skipped.append(entry["origin"])
    return skipped


def read_state(cdp, extra_origins=(), unread=None):
    """The default context's cookies, and localStorage of every open page's origin and of
    `extra_origins` (origins visited earlier, for instance); origins with nothing stored are left out, and so are
    origins that could not be opened or read (appended to `unread`: what they had is not known)."""
    cookies = [_stored_cookie(cookie) for cookie in cdp.call("Storage.getCookies")["cookies"]]
    items, failed = {}, []
    for target in _profile_pages(cdp):
        origin = web_origin(target["url"])
        if origin and origin not in items:
            try:
                items[origin] = _read_open_page(cdp, target["targetId"], origin)
            except CdpError as error:  # a page that went away or hangs: its origin is read below
                log.info("reading localStorage of %s from its page failed: %s", origin, error)
                failed.append(origin)
    wanted = dict.fromkeys([*failed, *map(web_origin, extra_origins)])
    missing = [origin for origin in wanted if origin and origin not in items]
    if missing:
        with _origin_tab(cdp) as visit:
            for origin in missing:
                try:
                    items[origin] = _local_storage(cdp, visit.session_id, visit(origin))
                except CdpError as error:
                    log.info("localStorage of %s not read: %s", origin, error)
                    if unread is not None:
                        unread.append(origin)
    origins = [{"origin": origin, "localStorage": entries} for origin, entries in items.items() if entries]
    return {"cookies": cookies, "origins": origins}


# -- cookies

def _cdp_cookie(cookie):
    """A stored cookie as Storage.setCookies takes it (-1 or no expiry: a session cookie)."""
    converted = {key: cookie[key] for key in ("name", "value", "domain", "path") if key in cookie}
    converted["secure"] = bool(cookie.get("secure"))
    converted["httpOnly"] = bool(cookie.get("httpOnly"))
    if cookie.get("sameSite") in SAME_SITE:
        converted["sameSite"] = cookie["sameSite"]
    expires = cookie.get("expires")
    if isinstance(expires, (int, float)) and expires > 0:
        converted["expires"] = expires
    for key in ("priority", "sourceScheme", "partitionKey"):
        if cookie.get(key) is not None:
            converted[key] = cookie[key]
    return converted


def _set_cookies(cdp, cookies):
    try:
        cdp.call("Storage.setCookies", {"cookies": cookies})
    except CdpError:
        # One cookie Chromium refuses (SameSite=None without Secure, a bad domain) fails the whole
        # call: set them one by one so the others still arrive.
        for cookie in cookies:
            try:
                cdp.call("Storage.setCookies", {"cookies": [cookie]})
            except CdpError as error:
                log.warning("cookie %s for %s not restored: %s", cookie.get("name"), cookie.get("domain"), error)


def _stored_cookie(cookie):
    """A CDP cookie in the storage-state layout (Playwright's fields)."""
    stored = {key: cookie[key] for key in ("name", "value", "domain", "path", "expires", "httpOnly", "secure")}
    stored["sameSite"] = cookie.get("sameSite", "Lax")  # Chromium omits it for the default, which is Lax
    if cookie.get("partitionKey") is not None:
        stored["partitionKey"] = cookie["partitionKey"]
    return stored


# -- localStorage

def _profile_pages(cdp):
    """Page targets of the default browser context (not of contexts a client created)."""
    other_contexts = set(cdp.call("Target.getBrowserContexts").get("browserContextIds", ()))
    return [target for target in cdp.call("Target.getTargets")["targetInfos"]
            if target["type"] == "page" and target.get("browserContextId") not in other_contexts]


def _read_open_page(cdp, target_id, origin):
    session = cdp.call("Target.attachToTarget", {"targetId": target_id, "flatten": True})["sessionId"]
    try:
        return _local_storage(cdp, session, _storage_id(origin), timeout=OPEN_PAGE_TIMEOUT)
    finally:
        try:
            cdp.call("Target.detachFromTarget", {"sessionId": session})
        except CdpError:
            pass


def _local_storage(cdp, session_id, storage_id, timeout=PAGE_TIMEOUT):
    entries = cdp.call("DOMStorage.getDOMStorageItems", {"storageId": storage_id},
                       session_id=session_id, timeout=timeout)["entries"]
    return [{"name": name, "value": value} for name, value in entries]


def _storage_id(origin):
    return {"securityOrigin": origin, "isLocalStorage": True}


@contextmanager
def _origin_tab(cdp):
    """A throwaway tab whose every request is answered by an empty page; yields visit(origin),
    which points it at `origin` and returns that origin's localStorage id (visit.session_id is
    the tab's session). The tab is gone when the block ends."""
    target = cdp.call("Target.createTarget", {"url": "about:blank", "background": True})["targetId"]
    gone = threading.Event()

    def note_gone(params, session_id):
        if params.get("targetId") == target:
            gone.set()

    cdp.on("Target.detachedFromTarget", note_gone)
    session = None
    try:
        session = cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]

        def fulfil(params, session_id):
            if session_id == session:
                cdp.send("Fetch.fulfillRequest", {
                    "requestId": params["requestId"], "responseCode": 200, "body": EMPTY_PAGE,
                    "responseHeaders": [{"name": "Content-Type", "value": "text/html"}]}, session_id=session)

        cdp.on("Fetch.requestPaused", fulfil)
        try:
            cdp.call("Fetch.enable", {"patterns": [{"urlPattern": "*"}]}, session_id=session)

            def visit(origin):
                navigation = cdp.call("Page.navigate", {"url": origin + "/"}, session_id=session,
                                      timeout=PAGE_TIMEOUT)
                if navigation.get("errorText"):
                    raise CdpError(f"cannot open {origin} in a blank tab: {navigation['errorText']}")
                return _storage_id(origin)

            visit.session_id = session
            yield visit
        finally:
            cdp.off("Fetch.requestPaused", fulfil)
    finally:
        try:
            cdp.call("Target.closeTarget", {"targetId": target})
            if session:
                # closeTarget answers before the tab is gone; until then it is listed as a page, and
                # a read_state that came next would try to read it and wait in vain.
                gone.wait(PAGE_TIMEOUT)
        except CdpError:
            pass
        finally:
            cdp.off("Target.detachedFromTarget", note_gone)

def web_origin(url):
    """scheme://host[:port] of an http(s) URL; None for others (about:, chrome:, data:, opaque)."""
    parts = urlsplit(url or "")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    default_port = {"http": 80, "https": 443}[parts.scheme]
    try:
        port = parts.port
    except ValueError:
        return None
    return f"{parts.scheme}://{host}" + (f":{port}" if port and port != default_port else "")

