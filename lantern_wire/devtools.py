"""Where one browser's DevTools answer, as its host and the workers on its machine both reach them."""
import http.client
import json
import re
import socket
from dataclasses import dataclass

from lantern_wire.splice import connect_unix

# What Chromium's browser endpoint looks like (/devtools/browser/<uuid>): a worker writes it into a request line.
BROWSER_PATH = re.compile(r"/devtools/browser/[A-Za-z0-9-]{1,64}")
# What is read of an answer to /json/*: a tab's entry takes some 500 bytes besides its URL and title.
MAX_JSON_BYTES = 1024 * 1024


@dataclass(frozen=True)
class DevTools:
    """Where one browser's DevTools answer: a Unix socket (a sandboxed browser's, reachable by its host
    alone) or a port on 127.0.0.1 (a browser without a sandbox)."""

    browser_path: str  # /devtools/browser/<uuid>
    socket_path: str | None = None
    port: int | None = None
    owner: int | None = None  # the user the socket must belong to (its sandbox's)

    @property
    def host(self):
        """The Host header Chromium expects: it answers only requests naming localhost or an IP."""
        return f"127.0.0.1:{self.port}" if self.port else "localhost"

    def ws_url(self, path=None):
        return f"ws://{self.host}{path or self.browser_path}"

    def connect(self, timeout=10.0):
        if self.socket_path:
            return connect_unix(self.socket_path, timeout, owner=self.owner)
        return socket.create_connection(("127.0.0.1", self.port), timeout=timeout)

    def as_json(self):
        """The host's answer to GET /sessions/{id}/endpoint, which a worker on its machine connects with."""
        return {"socket": self.socket_path, "owner": self.owner, "port": self.port, "browser_path": self.browser_path}

    @classmethod
    def from_json(cls, endpoint):
        """The endpoint a host answered; ValueError for one no host makes (a worker connects where it says, and
        writes its path into a request: a socket or a port above 1023, never both, and Chromium's path)."""
        if not isinstance(endpoint, dict):
            raise ValueError("an endpoint is a JSON object")
        path, socket_path, port, owner = (endpoint.get(key) for key in ("browser_path", "socket", "port", "owner"))
        if not (isinstance(path, str) and BROWSER_PATH.fullmatch(path)):
            raise ValueError("browser_path is not Chromium's /devtools/browser/<id>")
        if not (isinstance(socket_path, str) and port is None
                or socket_path is None and type(port) is int and 1024 <= port <= 65535):
            raise ValueError("an endpoint is a socket (and its owner) or a port above 1023")
        return cls(path, socket_path=socket_path, owner=owner, port=port)

    def get_json(self, path, timeout=10.0):
        """Chromium's JSON answer to GET `path` (/json/version, /json/list); OSError or ValueError otherwise (an
        answer past MAX_JSON_BYTES too)."""
        connection = http.client.HTTPConnection(self.host, timeout=timeout)
        connection.sock = self.connect(timeout)
        try:
            connection.request("GET", path)
            response = connection.getresponse()
            if response.status != 200:
                raise OSError(f"GET {path}: HTTP {response.status}")
            answer = response.read(MAX_JSON_BYTES + 1)
            if len(answer) > MAX_JSON_BYTES:  # what a browser of a session answers is the session's to make large
                raise ValueError(f"GET {path}: the answer passed {MAX_JSON_BYTES} bytes")
            return json.loads(answer)
        finally:
            connection.close()
