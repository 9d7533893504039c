"""A start names its extensions by their archive's hash (lantern_wire.control.ExtensionRef): the host fetches each
archive from the app once, keeps it (browserhost/extension_cache.py) and unpacks it for every browser that names it;
one the app does not give fails the start with words for the tenant."""
import hashlib
import io
import json
import zipfile
from pathlib import Path

import pytest

from browserhost.extension_cache import ExtensionCache
from browserhost.uplink import AppClient
from lantern_wire.reports import EXTENSIONS
from tests.browserhost.helpers import needs_chromium, unsandboxed_host
from tests.fakes import LocalServer


def extension_zip():
    manifest = {"manifest_version": 3, "name": "marker", "version": "1.0",
                "content_scripts": [{"matches": ["<all_urls>"], "js": ["marker.js"]}]}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("marker/manifest.json", json.dumps(manifest))
        archive.writestr("marker/marker.js", "document.documentElement.dataset.marker = 'yes';")
    return buffer.getvalue()


ARCHIVE = extension_zip()
DIGEST = hashlib.sha256(ARCHIVE).hexdigest()


class App(LocalServer):
    """The app's internal API for extension archives: it gives ARCHIVE by its hash, and counts each fetch."""

    protocol = "HTTP/1.1"

    def __init__(self):
        super().__init__()
        self.fetched = []
        self.start(("127.0.0.1", 0))

    def get(self, handler):
        digest = handler.path.rsplit("/", 1)[1]
        self.fetched.append(digest)
        if handler.path != f"{EXTENSIONS}/{DIGEST}":
            return handler.answer(404, {"code": "not_found", "message": "not an extension of your sessions"})
        handler.answer(200, ARCHIVE, "application/zip")


@pytest.fixture
def host(tmp_path, monkeypatch):
    app = App()
    server = unsandboxed_host(tmp_path, monkeypatch)
    client = AppClient(app.url, "lbh_test", patience=0)
    server.starts.extensions = ExtensionCache(tmp_path / "extensions", client, 1 << 20)
    server.app = app
    yield server
    for session_id in list(server.registry.hosted):
        server.registry.stop_browser(session_id, save=False, reason=None)
    app.stop()


def start(host, session_id, digest=DIGEST):
    return host.starts.start_browser({"session_id": session_id, "headless": True,
                               "extensions": [{"id": "e1", "sha256": digest}]})


@needs_chromium
def test_a_second_start_with_the_same_extension_does_not_fetch_it_again(host):
    status, answer = start(host, "s1")
    assert status == 201, answer
    unpacked = Path(host.registry.hosted["s1"].options.extension_dirs[0])
    assert json.loads((unpacked / "manifest.json").read_text())["name"] == "marker"
    host.registry.stop_browser("s1", save=False, reason=None)
    status, answer = start(host, "s2")
    assert status == 201, answer
    assert (Path(host.registry.hosted["s2"].options.extension_dirs[0]) / "marker.js").exists()
    assert host.app.fetched == [DIGEST]


@needs_chromium
def test_an_extension_the_app_does_not_give_fails_the_start_naming_it_and_no_host_path(host, tmp_path):
    status, answer = start(host, "s1", digest="ab" * 32)
    assert status == 500 and answer["code"] == "browser_start_failed"
    assert "extension e1" in answer["message"] and str(tmp_path) not in answer["message"]
    assert "s1" not in host.registry.hosted and not (host.registry.root / "sessions" / "s1").exists()
