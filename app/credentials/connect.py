"""A small client for the 1Password Connect REST API (vaults and items, bearer token).

Plain urllib: under gunicorn's gevent worker its sockets are cooperative, so a
slow provider does not block other requests. Redirects are refused and no proxy
from the environment is used, so the token goes only to the configured server.

The token never appears in an error: every failure becomes a ConnectError whose
message names neither the token nor a header, raised without its cause, so no
logged message or traceback carries it.
"""
import http.client
import json
import socket
import time
import urllib.error
import urllib.request
from urllib.parse import quote


class ConnectError(Exception):
    """The provider could not answer. `kind`: unauthorized, unreachable or bad_response."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind
        self.message = message


def token_problem(token):
    """Why `token` cannot be sent as a bearer token, or None.

    Bearer tokens are visible ASCII (RFC 6750 b64token); anything else would break or
    inject into the Authorization header. The reason never quotes the token.
    """
    if not token:
        return "The token is empty."
    if token != token.strip():
        return ("The token starts or ends with whitespace (a trailing newline when read from a file?); "
                "remove it.")
    if not all("!" <= character <= "~" for character in token):
        return ("The token may hold only visible ASCII characters: no spaces, line breaks, control or "
                "non-ASCII characters.")
    return None


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        raise ConnectError("bad_response", f"The provider redirected to {newurl}; Lantern does not follow "
                                           "redirects with the token. Configure the final URL instead.")


_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _RefuseRedirects)


class ConnectClient:
    """One client per operation: `timeout` bounds the whole operation, not each request."""

    def __init__(self, url, token, timeout):
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout

    def vaults(self):
        return [{"id": v["id"], "name": v.get("name") or ""} for v in self._records("/v1/vaults")]

    def items(self, vault_id):
        return self._records(f"/v1/vaults/{quote(vault_id, safe='')}/items")

    def item(self, vault_id, item_id):
        detail = self._get(f"/v1/vaults/{quote(vault_id, safe='')}/items/{quote(item_id, safe='')}")
        if not isinstance(detail, dict) or not isinstance(detail.get("fields", []), list):
            raise ConnectError("bad_response", "The provider's item is not an object with fields.")
        return detail

    def _records(self, path):
        """A JSON list of objects that each carry a string id."""
        records = self._get(path)
        if not isinstance(records, list) or not all(isinstance(r, dict) and isinstance(r.get("id"), str)
                                                    for r in records):
            raise ConnectError("bad_response", f"The provider's answer to {path} is not a list of records.")
        return records

    def _get(self, path):
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise ConnectError("unreachable", f"The provider at {self.url} did not answer within {self.timeout} s.")
        problem = token_problem(self.token)
        if problem:
            # Stored before tokens were checked; a rejected token stays rejected, so "unauthorized".
            raise ConnectError("unauthorized", f"The stored token cannot be sent: {problem} Set the token again.")
        try:
            request = urllib.request.Request(self.url + path, headers={
                "Authorization": f"Bearer {self.token}", "Accept": "application/json"})
            with _opener.open(request, timeout=remaining) as response:
                body = response.read()
        except ConnectError:
            raise
        except urllib.error.HTTPError as error:
            if error.code in (401, 403):
                raise ConnectError("unauthorized", f"The provider rejected the token (HTTP {error.code}).") from None
            raise ConnectError("bad_response", f"The provider answered HTTP {error.code} for {path}.") from None
        except (urllib.error.URLError, http.client.HTTPException, socket.timeout, OSError) as error:
            reason = getattr(error, "reason", None) or error or type(error).__name__
            raise ConnectError("unreachable", f"Could not reach the provider at {self.url}: {reason}.") from None
        except Exception as error:  # noqa: BLE001 - its text may quote a header (the token): never pass it on
            raise ConnectError("bad_response", f"The request to the provider at {self.url} failed "
                                               f"({type(error).__name__}).") from None
        try:
            return json.loads(body)
        except ValueError:
            raise ConnectError("bad_response", f"The provider's answer to {path} is not JSON.") from None
