"""A host's extension archives (browserhost/extension_cache.py): fetched from the app once by hash, streamed to
disk and checked, kept up to a size with the least recently used going first."""
import hashlib
import threading
import time
from types import SimpleNamespace

import pytest

from browserhost import extension_cache
from browserhost.extension_cache import ArchiveMismatch, ExtensionCache
from browserhost.uplink import AppClient, AppUnreachable, Refused
from lantern_wire.reports import EXTENSIONS
from tests.fakes import LocalServer

ARCHIVES = {name: bytes([n]) * 1000 for n, name in enumerate(("a", "b", "c"), start=1)}
DIGESTS = {name: hashlib.sha256(data).hexdigest() for name, data in ARCHIVES.items()}


class App(LocalServer):
    """Serves the archives by hash, as the app's internal API does; `wrong` answers another file's bytes."""

    protocol = "HTTP/1.1"

    def __init__(self):
        super().__init__()
        self.wrong = False
        self.fetched = []
        self.start(("127.0.0.1", 0))

    def get(self, handler):
        digest = handler.path.rsplit("/", 1)[1]
        assert handler.path.startswith(f"{EXTENSIONS}/")
        self.fetched.append(digest)
        by_digest = {DIGESTS[name]: data for name, data in ARCHIVES.items()}
        if digest not in by_digest:
            return handler.answer(404, {"code": "not_found", "message": "not an extension of your sessions"})
        handler.answer(200, by_digest[digest][::-1] + b"x" if self.wrong else by_digest[digest], "application/zip")


@pytest.fixture
def app():
    app = App()
    yield app
    app.stop()


def cache(tmp_path, app, max_bytes=2500):
    return ExtensionCache(tmp_path / "extensions", AppClient(app.url, "lbh_test", patience=0), max_bytes)


def test_an_archive_is_fetched_once_and_kept_under_its_hash(tmp_path, app):
    extensions = cache(tmp_path, app)
    for _ in range(3):
        with extensions.open(DIGESTS["a"]) as archive:
            assert archive.read() == ARCHIVES["a"]
    assert app.fetched == [DIGESTS["a"]]
    assert [path.name for path in (tmp_path / "extensions").iterdir()] == [DIGESTS["a"]]


def test_past_its_size_the_least_recently_used_archive_goes(tmp_path, app):
    extensions = cache(tmp_path, app, max_bytes=2500)  # two archives of 1,000 bytes fit, not three
    extensions.open(DIGESTS["a"]).close()
    extensions.open(DIGESTS["b"]).close()
    extensions.open(DIGESTS["a"]).close()  # a is used again: b is now the least recent
    with extensions.open(DIGESTS["c"]) as archive:
        assert archive.read() == ARCHIVES["c"]
    assert sorted(path.name for path in (tmp_path / "extensions").iterdir()) == sorted([DIGESTS["a"], DIGESTS["c"]])
    extensions.open(DIGESTS["b"]).close()  # fetched again
    assert app.fetched == [DIGESTS[name] for name in ("a", "b", "c", "b")]
    again = cache(tmp_path, app)  # a new run keeps what the last one fetched
    again.open(DIGESTS["c"]).close()
    assert len(app.fetched) == 4


def test_bytes_that_are_not_the_archive_of_the_hash_are_not_kept(tmp_path, app):
    extensions = cache(tmp_path, app)
    app.wrong = True
    with pytest.raises(ArchiveMismatch):
        extensions.open(DIGESTS["a"])
    assert list((tmp_path / "extensions").iterdir()) == []
    app.wrong = False
    with extensions.open(DIGESTS["a"]) as archive:
        assert archive.read() == ARCHIVES["a"]


def test_an_archive_the_app_will_not_give_is_refused_and_a_name_that_is_no_hash_is_never_asked(tmp_path, app):
    extensions = cache(tmp_path, app)
    with pytest.raises(Refused) as refused:
        extensions.open("0" * 64)
    assert refused.value.status == 404 and "not an extension" in str(refused.value)
    with pytest.raises(ValueError):
        extensions.open("../../etc/passwd")
    assert app.fetched == ["0" * 64] and list((tmp_path / "extensions").iterdir()) == []


def test_an_archive_fetched_is_opened_before_another_starts_fetch_can_evict_it(tmp_path, app, monkeypatch):
    """#36 review: between a fetch keeping an archive and opening it, another start's open(B) ran _evict(keep=B) and
    removed it: that start failed with FileNotFoundError."""
    extensions = cache(tmp_path, app, max_bytes=1500)  # room for one
    opened_between = []

    class Logger:
        def info(self, *args):  # as A's fetch ends: another start asks for B
            if not opened_between:
                opened_between.append(True)
                extensions.open(DIGESTS["b"]).close()

    monkeypatch.setattr(extension_cache, "logger", Logger())
    with extensions.open(DIGESTS["a"]) as archive:
        assert archive.read() == ARCHIVES["a"]
    assert opened_between and extensions._fetching == {}  # no lock kept per hash once nobody asks


def test_a_start_waits_for_another_starts_fetch_of_the_same_archive_no_longer_than_its_patience(tmp_path, app,
                                                                                              monkeypatch):
    extensions = cache(tmp_path, app)
    fetching, release = threading.Event(), threading.Event()
    download = extensions.client.download

    def slow_download(*args, **kwargs):
        fetching.set()
        assert release.wait(10)
        return download(*args, **kwargs)

    monkeypatch.setattr(extensions.client, "download", slow_download)
    first = threading.Thread(target=lambda: extensions.open(DIGESTS["a"], patience=10).close())
    first.start()
    try:
        assert fetching.wait(10)
        began = time.monotonic()
        with pytest.raises(AppUnreachable):
            extensions.open(DIGESTS["a"], patience=0.3)
        assert time.monotonic() - began < 2
    finally:
        release.set()
        first.join(10)
    assert app.fetched == [DIGESTS["a"]]


def test_a_stray_folder_in_the_cache_does_not_stop_the_host(tmp_path, app):
    stray = tmp_path / "extensions" / "lost+found"
    (stray / "inside").mkdir(parents=True)
    (tmp_path / "extensions" / "x.part").write_bytes(b"cut short")
    cache(tmp_path, app)
    assert list((tmp_path / "extensions").iterdir()) == []


def test_any_failure_of_the_cache_is_told_to_the_tenant_in_its_words(tmp_path, monkeypatch):
    """#36 review: a FileNotFoundError (an archive gone) was a start failure whose words were the host's."""
    from browserhost import starts
    from tests.browserhost.helpers import host_server

    server = host_server(tmp_path)
    server.starts.extensions = SimpleNamespace(open=lambda sha256, patience: (_ for _ in ()).throw(
        FileNotFoundError(f"{tmp_path}/extensions/{sha256}")))
    hosted = SimpleNamespace(start_deadline=time.monotonic() + 30)
    with pytest.raises(starts.ExtensionUnavailable) as unavailable:
        server.starts._unpack(hosted, tmp_path / "e1", SimpleNamespace(id="e1", sha256="0" * 64))
    assert starts.start_failure(unavailable.value) == ("The browser host could not fetch extension e1 from the API; "
                                                       "retry later.")
