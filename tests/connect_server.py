"""A 1Password Connect look-alike served on 127.0.0.1, so the real HTTP client is exercised."""
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeConnect:
    """Vaults holding items with fields and URLs; a wrong token answers 401; `delay` slows every answer."""

    def __init__(self, token="connect-token"):
        self.token = token
        self.vaults = {}
        self.paths = []
        self.delay = 0.0
        self._server = None

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

    @property
    def url(self):
        host, port = self._server.server_address
        return f"http://{host}:{port}"

    def start(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                fake.paths.append(self.path)
                if fake.delay:
                    time.sleep(fake.delay)
                if self.headers.get("Authorization") != f"Bearer {fake.token}":
                    return self.answer(401, {"status": 401, "message": "Invalid bearer token"})
                parts = self.path.strip("/").split("/")
                if parts[:2] != ["v1", "vaults"]:
                    return self.answer(404, {"status": 404, "message": "not found"})
                if len(parts) == 2:
                    return self.answer(200, [{"id": v["id"], "name": v["name"]} for v in fake.vaults.values()])
                vault = fake.vaults.get(parts[2])
                if vault is None or len(parts) < 4 or parts[3] != "items":
                    return self.answer(404, {"status": 404, "message": "vault not found"})
                if len(parts) == 4:
                    summaries = [{k: v for k, v in item.items() if k != "fields"} for item in vault["items"].values()]
                    return self.answer(200, summaries)
                item = vault["items"].get(parts[4])
                return self.answer(200, item) if item else self.answer(404, {"status": 404, "message": "no item"})

            def answer(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self):
        self._server.shutdown()
        self._server.server_close()
