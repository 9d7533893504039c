"""A host's extension archives (browserhost/extension_cache.py): fetched from the app once by hash, streamed to
disk and checked, kept up to a size with the least recently used going first."""
import hashlib

import pytest

from browserhost.extension_cache import ArchiveMismatch, ExtensionCache
from browserhost.uplink import AppClient, Refused
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
