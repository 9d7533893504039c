"""Where one browser's DevTools answer, as its host and the workers on its machine both reach them."""
import http.client
import json
import socket
from dataclasses import dataclass

from lantern_wire.splice import connect_unix


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
        return cls(endpoint["browser_path"], socket_path=endpoint.get("socket"), owner=endpoint.get("owner"),
                   port=endpoint.get("port"))

    def get_json(self, path, timeout=10.0):
        """Chromium's JSON answer to GET `path` (/json/version, /json/list); OSError or ValueError otherwise."""
        connection = http.client.HTTPConnection(self.host, timeout=timeout)
        connection.sock = self.connect(timeout)
        try:
            connection.request("GET", path)
            response = connection.getresponse()
            if response.status != 200:
                raise OSError(f"GET {path}: HTTP {response.status}")
            return json.loads(response.read())
        finally:
            connection.close()
