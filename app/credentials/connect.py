"""A small client for the 1Password Connect REST API (vaults and items, bearer token).

Plain urllib: under gunicorn's gevent worker its sockets are cooperative, so a
slow provider does not block other requests.
"""
import json
import socket
import urllib.error
import urllib.request
from urllib.parse import quote


class ConnectError(Exception):
    """The provider could not answer. `kind`: unauthorized, unreachable or bad_response."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind
        self.message = message


class ConnectClient:
    def __init__(self, url, token, timeout):
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def vaults(self):
        return [{"id": v["id"], "name": v.get("name", "")} for v in self._get("/v1/vaults")]

    def items(self, vault_id):
        return self._get(f"/v1/vaults/{quote(vault_id, safe='')}/items")

    def item(self, vault_id, item_id):
        return self._get(f"/v1/vaults/{quote(vault_id, safe='')}/items/{quote(item_id, safe='')}")

    def _get(self, path):
        request = urllib.request.Request(self.url + path, headers={
            "Authorization": f"Bearer {self.token}", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                body = response.read()
        except urllib.error.HTTPError as error:
            if error.code in (401, 403):
                raise ConnectError("unauthorized", f"The provider rejected the token (HTTP {error.code}).") from None
            raise ConnectError("bad_response", f"The provider answered HTTP {error.code} for {path}.") from None
        except (urllib.error.URLError, socket.timeout, TimeoutError, ConnectionError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise ConnectError("unreachable", f"Could not reach the provider at {self.url}: {reason}.") from None
        try:
            return json.loads(body)
        except ValueError:
            raise ConnectError("bad_response", f"The provider's answer to {path} is not JSON.") from None
