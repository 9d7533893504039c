"""Look-alikes of outside services served on 127.0.0.1, so the real HTTP client code is exercised."""
import errno
import json
import random
import socket
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

# The host loopback ports the tests' browser sandboxes may reach (LANTERN_BROWSER_LOOPBACK_PORTS of every
# browser host a test starts): the ports of every LocalServer, and of nothing else.
LOOPBACK_PORTS = (18100, 18299)
LOOPBACK_PORTS_SETTING = f"{LOOPBACK_PORTS[0]}-{LOOPBACK_PORTS[1]}"
# serve_forever() sees shutdown() only between polls: its default 0.5 s made every stop (one per test using a
# fixture server) wait up to half a second. Requests are answered at once whatever the interval.
POLL_SECONDS = 0.05


def loopback_port():
    """A free port of LOOPBACK_PORTS on 127.0.0.1 (tried at random: parallel runs seldom meet)."""
    ports = list(range(LOOPBACK_PORTS[0], LOOPBACK_PORTS[1] + 1))
    random.shuffle(ports)
    for port in ports:
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError as error:
                if error.errno == errno.EADDRINUSE:
                    continue
                raise
            return port
    raise RuntimeError(f"every port of {LOOPBACK_PORTS_SETTING} is taken")


class LocalServer:
    """A threaded HTTP server on a free 127.0.0.1 port that browser sandboxes may reach (LOOPBACK_PORTS);
    subclasses implement `get(handler)` (and `post`, `put`, `delete` to take those methods)."""

    protocol = "HTTP/1.0"  # "HTTP/1.1" keeps connections open, as a reverse proxy's are

    def __init__(self):
        self.paths = []
        self._server = None

    @property
    def url(self):
        host, port = self._server.server_address
        return f"http://{host}:{port}"

    def start(self, bind=None):
        """Serve on `bind` ((address, port)), by default a free port of LOOPBACK_PORTS on 127.0.0.1."""
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = fake.protocol

            def do_GET(self):
                fake.paths.append(self.path)
                fake.get(self)

            def do_POST(self):
                fake.paths.append(self.path)
                fake.post(self)

            def do_PUT(self):
                fake.paths.append(self.path)
                fake.put(self)

            def do_DELETE(self):
                fake.paths.append(self.path)
                fake.delete(self)

            def answer(self, status, body, content_type="application/json"):
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(bind or ("127.0.0.1", loopback_port()), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": POLL_SECONDS},
                         daemon=True).start()
        return self

    def post(self, handler):
        handler.answer(405, {"message": "POST is not served here"})

    def put(self, handler):
        handler.answer(405, {"message": "PUT is not served here"})

    def delete(self, handler):
        handler.answer(405, {"message": "DELETE is not served here"})

    def stop(self):
        self._server.shutdown()
        self._server.server_close()


class FakeChromeStore(LocalServer):
    """Serves CRX files by extension id at /crx?id=<id>; unknown ids answer 204 like the real store."""

    def __init__(self):
        super().__init__()
        self.crx = {}

    def get(self, handler):
        ext_id = parse_qs(urlparse(handler.path).query).get("id", [""])[0]
        if ext_id in self.crx:
            return handler.answer(200, self.crx[ext_id], content_type="application/x-chrome-extension")
        handler.answer(204, b"")


class FakeConnect(LocalServer):
    """Vaults holding items with fields and URLs; a wrong token answers 401; `delay` slows every answer."""

    def __init__(self, token="connect-token"):
        super().__init__()
        self.token = token
        self.vaults = {}
        self.delay = 0.0
        # When set: every answer is a 302 to this URL, or this raw body instead of the vault list.
        self.redirect_to = None
        self.vaults_body = None

    def add_vault(self, name):
        vault_id = uuid.uuid4().hex[:26]
        self.vaults[vault_id] = {"id": vault_id, "name": name, "items": {}}
        return vault_id

    def add_login(self, vault_id, title, urls, username="user", password="pw", otp=None):
        item_id = uuid.uuid4().hex[:26]
        fields = [{"id": "username", "type": "STRING", "purpose": "USERNAME", "label": "username", "value": username},
                  {"id": "password", "type": "CONCEALED", "purpose": "PASSWORD", "label": "password",
                   "value": password}]
        if otp:
            fields.append({"id": "totp", "type": "OTP", "label": "one-time password", "value": otp})
        self.vaults[vault_id]["items"][item_id] = {
            "id": item_id, "title": title, "category": "LOGIN", "vault": {"id": vault_id},
            "urls": [{"primary": i == 0, "href": url} for i, url in enumerate(urls)], "fields": fields,
        }
        return item_id

    def get(self, handler):
        if self.delay:
            time.sleep(self.delay)
        if self.redirect_to:
            handler.send_response(302)
            handler.send_header("Location", self.redirect_to + handler.path)
            handler.send_header("Content-Length", "0")
            return handler.end_headers()
        if handler.headers.get("Authorization") != f"Bearer {self.token}":
            return handler.answer(401, {"status": 401, "message": "Invalid bearer token"})
        parts = handler.path.strip("/").split("/")
        if parts[:2] != ["v1", "vaults"]:
            return handler.answer(404, {"status": 404, "message": "not found"})
        if len(parts) == 2:
            if self.vaults_body is not None:
                return handler.answer(200, self.vaults_body)
            return handler.answer(200, [{"id": v["id"], "name": v["name"]} for v in self.vaults.values()])
        vault = self.vaults.get(parts[2])
        if vault is None or len(parts) < 4 or parts[3] != "items":
            return handler.answer(404, {"status": 404, "message": "vault not found"})
        if len(parts) == 4:
            summaries = [{k: v for k, v in item.items() if k != "fields"} for item in vault["items"].values()]
            return handler.answer(200, summaries)
        item = vault["items"].get(parts[4])
        return handler.answer(200, item) if item else handler.answer(404, {"status": 404, "message": "no item"})
