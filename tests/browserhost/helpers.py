"""What the browser-host tests share: the skip when there is no Chromium, a small website, and pages over CDP."""
import json

import pytest

from browserhost import settings as host_settings
from browserhost.launch import find_chromium
from browserhost.server import BrowserHostServer
from lantern_wire.hosts import HEARTBEAT, REGISTER, REPORTS
from tests.fakes import LocalServer

CHROMIUM = find_chromium()
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium at /usr/lib/chromium/chromium (`apt-get install chromium` on Debian)")


class Site(LocalServer):
    """Serves a small HTML page (or `page`) at every path on 127.0.0.1, and keeps each request's headers."""

    def __init__(self, page=b"<!doctype html><title>site</title><p>hello</p>"):
        super().__init__()
        self.page = page
        self.headers = []

    @property
    def port(self):
        return self._server.server_address[1]

    def get(self, handler):
        self.headers.append(handler.headers)
        handler.answer(200, self.page, "text/html")


def open_page(cdp, url):
    """A new tab on `url` in the default context; its flattened session id."""
    target = cdp.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    navigate(cdp, session, url)
    return session


def navigate(cdp, session, url):
    """Page.navigate's errorText (None when the page loaded), once the document is complete."""
    error = cdp.call("Page.navigate", {"url": url}, session_id=session).get("errorText")
    if not error:
        evaluate(cdp, session, "new Promise(done => document.readyState === 'complete' ? done() "
                               ": addEventListener('load', () => done()))")
    return error


def evaluate(cdp, session, expression):
    result = cdp.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True},
                      session_id=session)
    assert "exceptionDetails" not in result, json.dumps(result["exceptionDetails"])
    return result["result"].get("value")


class FakeApp:
    """The app's internal API as a host test needs it (an uplink.AppClient's stand-in): every post is kept
    and answered as the app would when all goes well."""

    credential = "lbh_test"

    def __init__(self, name="t"):
        self.name = name
        self.posts = []

    def post(self, path, body, patience=None):
        self.posts.append((path, body))
        if path == REGISTER:
            return {"name": self.name, "heartbeat_seconds": 2}
        if path == HEARTBEAT:
            return {"stop": [], "categories": {}}
        if path == REPORTS:
            return {"results": [{"status": "ok"} for _ in body["reports"]]}
        return {}


def unsandboxed_host(tmp_path, monkeypatch):
    """A host without sandboxes running Chromium, whose browsers are not watched (a watch waits for their exit)."""
    server = host_server(tmp_path, BROWSER_SANDBOX="off")
    server.starts.binary = CHROMIUM
    monkeypatch.setattr(server.registry, "watch", lambda hosted: None)
    return server


def host_server(tmp_path, app=None, **settings):
    """A BrowserHostServer with its folders in `tmp_path`, talking to `app` (a FakeApp by default); not run."""
    return BrowserHostServer(host_settings.load({}, BROWSER_HOST_DIR=str(tmp_path), **settings), app or FakeApp(),
                             bind=("127.0.0.1", 0), advertise="http://127.0.0.1:1", capacity=2)
