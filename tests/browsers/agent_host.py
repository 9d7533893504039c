"""A browser host's stand-in for the session agent's route (lantern_wire.control.SESSION_AGENT): it keeps what the
app forwards (method, the agent's path, query, headers, body or its size and SHA-256) and answers what a test set
for that path, so the app's forwarding is tested without a sandbox (the agent itself: tests/browserhost/agent/).
Its fixtures `agent` and `sdk` serve tests/browsers/test_fs_api.py and test_process_api.py."""
import hashlib
import json
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

import httpx
import kernel
import pytest

from app.browsers import hosts
from app.browsers.models import BrowserSession
from app.core.db import db
from tests.browsers.conftest import on_host
from tests.fakes import LocalServer

KEPT = 1024 * 1024  # a body up to this size is kept whole; past it, only its size and SHA-256
AGENT = "/agent/"


@dataclass
class Forwarded:
    method: str
    path: str  # the agent's, such as "fs/read_file"
    query: dict
    headers: dict
    size: int = 0
    sha256: str = ""
    body: bytes = b""
    chunked: bool = False
    peer: tuple = ()  # the app's end of the connection it came on

    def json(self):
        return json.loads(self.body)


class AgentHost(LocalServer):
    """answers[path] is (status, JSON-able or bytes) or a callable(handler, forwarded) writing the answer itself;
    a path not in it is answered 200 with no body. `calls`: what was forwarded, in order."""

    def __init__(self, answers=None):
        super().__init__()
        self.answers, self.calls = answers or {}, []

    def get(self, handler):
        self.forward(handler, "GET")

    def post(self, handler):
        self.forward(handler, "POST")

    def put(self, handler):
        self.forward(handler, "PUT")

    def delete(self, handler):
        self.forward(handler, "DELETE")

    def forward(self, handler, method):
        url = urlsplit(handler.path)
        forwarded = Forwarded(method, url.path.split(AGENT, 1)[1], dict(parse_qsl(url.query)),
                              {name.lower(): value for name, value in handler.headers.items()},
                              peer=handler.client_address)
        self.receive(handler, forwarded)
        self.calls.append(forwarded)
        answer = self.answers.get(forwarded.path, (200, b""))
        if callable(answer):
            answer(handler, forwarded)
            return
        status, body = answer
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/octet-stream" if isinstance(body, bytes)
                            else "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    @staticmethod
    def receive(handler, forwarded):
        sha, kept = hashlib.sha256(), []
        forwarded.chunked = "chunked" in handler.headers.get("Transfer-Encoding", "")
        for data in chunks(handler.rfile) if forwarded.chunked else sized(
                handler.rfile, int(handler.headers.get("Content-Length") or 0)):
            sha.update(data)
            forwarded.size += len(data)
            if forwarded.size <= KEPT:
                kept.append(data)
        forwarded.sha256, forwarded.body = sha.hexdigest(), b"".join(kept)

    def agent_paths(self):
        return [call.path for call in self.calls]


def sized(stream, length):
    while length:
        data = stream.read(min(length, 64 * 1024))
        if not data:
            return
        length -= len(data)
        yield data


def chunks(stream):
    while size := int(stream.readline().split(b";")[0], 16):
        yield from sized(stream, size)
        stream.readline()
    stream.readline()


def event_stream(frames, keep_open=None):
    """An answer writing SSE `frames` ((id, data) pairs) one at a time, then waiting on `keep_open` (an Event) if
    given: the test sees each frame relayed before the stream ends."""
    def answer(handler, forwarded):
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.end_headers()
        for event_id, data in frames:
            handler.wfile.write(f"id: {event_id}\ndata: {json.dumps(data)}\n\n".encode())
            handler.wfile.flush()
        if keep_open is not None:
            keep_open.wait(10)
    return answer


@contextmanager
def agent_host(app, session_id, protocol=AgentHost.protocol):
    """An AgentHost running the session (made a host driver's), stopped at the end; `protocol` "HTTP/1.1" keeps its
    connections open when the app asks it to."""
    host = AgentHost()
    host.protocol = protocol
    host.start()
    try:
        with app.app_context(), db.connection_context():
            hosts.add("h1", host.url)
            BrowserSession.update(driver="host").where(BrowserSession.id == session_id).execute()
        on_host(app, session_id, "h1")
        yield host
    finally:
        host.stop()


def sdk_client(app, api_key):
    """The official SDK calling the app in-process, without retries (a test sees each answer), validating every
    answer against its models (DESIGN section 1.2): what the app relays must be what the SDK reads."""
    http = httpx.Client(transport=httpx.WSGITransport(app=app), base_url="http://lantern.test")
    return kernel.Kernel(api_key=api_key, base_url="http://lantern.test", http_client=http, max_retries=0,
                         _strict_response_validation=True)


@pytest.fixture
def agent(app, new_browser):
    """(the host's stand-in, the id of a session it runs)."""
    session_id = new_browser()["session_id"]
    with agent_host(app, session_id) as host:
        yield host, session_id


@pytest.fixture
def sdk(app, owner_key):
    return sdk_client(app, owner_key.plaintext)
