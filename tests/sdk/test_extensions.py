"""client.extensions.* through the official SDK, strict validation, against the live server (contract 6.5).

Extensions live in a project; most tests work in a project of their own (`exts`,
a client whose requests carry `X-Kernel-Project: <name>`), so lists are exact.
`download_from_chrome_store` runs against a second live server of this module,
whose store URL points at a Chrome Web Store look-alike on 127.0.0.1.
"""
import hashlib
import io
import json
import os
import struct
import uuid
import zipfile
import zlib
from urllib.parse import parse_qs, urlparse

import httpx
import kernel
import pytest
from kernel.types import (
    ExtensionGetResponse,
    ExtensionListResponse,
    ExtensionUploadResponse,
)

from app.config import Settings
from tests.fakes import FakeChromeStore
from tests.live_server import gunicorn, private_database, run_cli, server_env
from tests.sdk.conftest import unique
from tests.zips import MIB, handmade_zip, zeros_deflated

MANIFEST = json.dumps({"manifest_version": 3, "name": "Demo", "version": "1.0"})
# The servers these tests start run with the default settings.
DEFAULTS = Settings()


def make_zip(entries=None, *, compression=zipfile.ZIP_DEFLATED):
    """A ZIP of `entries` (name -> str/bytes); a small valid extension by default, unique per call."""
    if entries is None:
        entries = {"manifest.json": MANIFEST, "background.js": f"console.log({uuid.uuid4().hex!r})"}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        for name, content in entries.items():
            archive.writestr(name, content)
    return buffer.getvalue()


def manifest_entry():
    data = MANIFEST.encode()
    return ("manifest.json", zipfile.ZIP_STORED, data, zlib.crc32(data), len(data))


def chrome_id():
    """A fresh 32-letter extension id (hex digits mapped to a..p, as Chrome derives them)."""
    return "".join(chr(ord("a") + int(digit, 16)) for digit in uuid.uuid4().hex)


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def ids(items):
    return [item.id for item in items]


def fields(extension):
    return extension.model_dump()


def downloaded(client, id_or_name):
    """(bytes, headers) of `client.extensions.download`, with the binary response closed."""
    response = client.extensions.download(id_or_name)
    try:
        return response.read(), response.headers
    finally:
        response.close()


def blob_path(live_server, checksum):
    return os.path.join(live_server.env["LANTERN_BLOB_DIR"], checksum[:2], checksum)


def temp_blobs(live_server):
    folder = os.path.join(live_server.env["LANTERN_BLOB_DIR"], "tmp")
    return os.listdir(folder) if os.path.isdir(folder) else []


def counting_client(make_client, api_key, max_retries=2, **options):
    """A client that retries like the SDK's default, and a list of the requests it sent."""
    sent = []
    http_client = httpx.Client(event_hooks={"request": [lambda request: sent.append(request)]})
    return make_client(api_key, max_retries=max_retries, http_client=http_client, **options), sent


@pytest.fixture
def exts(in_project):
    return in_project


# --- upload / download / get ----------------------------------------------------------------------

def test_upload_download_and_metadata_round_trip(exts):
    data = make_zip()
    name = unique("demo")
    raw = exts.extensions.with_raw_response.upload(file=("demo.zip", data, "application/zip"), name=name)
    assert raw.http_response.status_code == 201
    assert raw.http_request.headers["content-type"].startswith("multipart/form-data; boundary=")
    uploaded = raw.parse()
    assert isinstance(uploaded, ExtensionUploadResponse)
    assert uploaded.id and uploaded.name == name
    assert uploaded.checksum == sha256(data)
    assert uploaded.size_bytes == len(data)
    assert uploaded.created_at.tzinfo is not None
    assert uploaded.last_used_at is None

    for ref in (name, uploaded.id):
        body, headers = downloaded(exts, ref)
        assert body == data
        assert headers["content-type"] == "application/octet-stream"
        assert headers["content-length"] == str(len(data))
        assert headers["content-disposition"] == f"attachment; filename={name}.zip"

        metadata = exts.extensions.get(ref)
        assert isinstance(metadata, ExtensionGetResponse)
        assert fields(metadata) == fields(uploaded)

    [listed] = exts.extensions.list()
    assert isinstance(listed, ExtensionListResponse)
    assert fields(listed) == fields(uploaded)


def test_download_sends_the_binary_accept_header(exts):
    data = make_zip()
    uploaded = exts.extensions.upload(file=data)
    with exts.extensions.with_streaming_response.download(uploaded.id) as response:
        assert response.http_request.headers["accept"] == "application/octet-stream"
        assert response.status_code == 200
        assert response.read() == data


@pytest.mark.parametrize("kind", ["bytes", "tuple", "file-object", "path"])
def test_upload_without_a_name_in_every_file_form(exts, tmp_path, kind):
    data = make_zip()
    path = tmp_path / "ext.zip"
    path.write_bytes(data)
    if kind == "file-object":
        with open(path, "rb") as handle:
            uploaded = exts.extensions.upload(file=handle)
    else:
        file = {"bytes": data, "tuple": ("my-ext.zip", data), "path": path}[kind]
        uploaded = exts.extensions.upload(file=file)
    assert uploaded.name is None
    assert uploaded.checksum == sha256(data) and uploaded.size_bytes == len(data)
    assert downloaded(exts, uploaded.id)[0] == data
    assert fields(exts.extensions.get(uploaded.id)) == fields(uploaded)
    assert ids(exts.extensions.list()) == [uploaded.id]


def test_download_is_byte_for_byte_for_a_larger_stored_archive(exts):
    """Incompressible content, stored without compression: what goes up comes down unchanged."""
    data = make_zip({"manifest.json": MANIFEST, "blob.bin": os.urandom(3 * MIB)}, compression=zipfile.ZIP_STORED)
    uploaded = exts.extensions.upload(file=("big.zip", data), name=unique("big"))
    assert uploaded.size_bytes == len(data) and uploaded.checksum == sha256(data)
    body, headers = downloaded(exts, uploaded.name)
    assert headers["content-length"] == str(len(data))
    assert sha256(body) == sha256(data) and body == data


def test_manifest_in_a_single_top_level_folder_is_accepted(exts):
    data = make_zip({"demo/manifest.json": MANIFEST, "demo/app.js": "1"})
    uploaded = exts.extensions.upload(file=("demo.zip", data), name=unique("nested"))
    assert downloaded(exts, uploaded.id)[0] == data


# --- invalid uploads ------------------------------------------------------------------------------

INVALID = {
    "not-a-zip": (lambda: b"this is not a zip file " + uuid.uuid4().bytes, "ZIP"),
    "path-traversal": (lambda: make_zip({"manifest.json": MANIFEST, "../evil.js": uuid.uuid4().hex}), ".."),
    "nested-traversal": (lambda: make_zip({"manifest.json": MANIFEST, "a/../../evil.js": uuid.uuid4().hex}), ".."),
    "absolute-path": (lambda: make_zip({"manifest.json": MANIFEST, "/etc/passwd": uuid.uuid4().hex}), "absolute"),
    "windows-path": (lambda: make_zip({"manifest.json": MANIFEST, "C:\\evil.js": uuid.uuid4().hex}), "absolute"),
    "no-manifest": (lambda: make_zip({"readme.txt": uuid.uuid4().hex}), "manifest.json"),
    "manifest-in-one-of-two-folders": (lambda: make_zip({"a/manifest.json": MANIFEST, "b/x.js": uuid.uuid4().hex}),
                                       "manifest.json"),
    "manifest-not-json": (lambda: make_zip({"manifest.json": "{not json", "x.js": uuid.uuid4().hex}),
                          "not valid JSON"),
    "empty-file": (lambda: b"", "ZIP"),
}


@pytest.mark.parametrize("case", list(INVALID))
def test_invalid_archives_are_400_and_store_nothing(live_server, exts, case):
    build, reason = INVALID[case]
    data = build()
    name = unique("bad")
    with pytest.raises(kernel.BadRequestError) as caught:
        exts.extensions.upload(file=("bad.zip", data), name=name)
    assert caught.value.body["code"] == "bad_request"
    assert reason in caught.value.body["message"]
    assert list(exts.extensions.list()) == []
    with pytest.raises(kernel.NotFoundError):
        exts.extensions.get(name)
    assert not os.path.exists(blob_path(live_server, sha256(data)))
    assert temp_blobs(live_server) == []


def test_zip_bomb_is_refused(live_server, exts):
    """Under a megabyte that really inflates to more than the server's uncompressed limit."""
    limit = DEFAULTS.extension_max_uncompressed_bytes
    mebibytes = limit // MIB + 64
    stream, crc = zeros_deflated(mebibytes)
    bomb = handmade_zip([manifest_entry(), ("zeros.bin", zipfile.ZIP_DEFLATED, stream, crc, mebibytes * MIB)])
    assert len(bomb) < MIB
    with zipfile.ZipFile(io.BytesIO(bomb)) as archive:  # a well-formed archive of that size
        assert archive.getinfo("zeros.bin").file_size > limit
        with archive.open("zeros.bin") as member:
            assert member.read(MIB) == bytes(MIB)
    with pytest.raises(kernel.BadRequestError) as caught:
        exts.extensions.upload(file=("bomb.zip", bomb), name=unique("bomb"))
    assert "expands to more than" in caught.value.body["message"]
    assert list(exts.extensions.list()) == []
    assert not os.path.exists(blob_path(live_server, sha256(bomb)))
    assert temp_blobs(live_server) == []


def test_zip_bomb_whose_headers_claim_it_is_small_is_refused(live_server, exts):
    """Both headers declare 10 bytes; the stream inflates to far more than the server's limit."""
    mebibytes = DEFAULTS.extension_max_uncompressed_bytes // MIB + 64
    stream, crc = zeros_deflated(mebibytes)
    liar = handmade_zip([manifest_entry(), ("zeros.bin", zipfile.ZIP_DEFLATED, stream, crc, 10)])
    with pytest.raises(kernel.BadRequestError) as caught:
        exts.extensions.upload(file=("liar.zip", liar))
    assert "damaged" in caught.value.body["message"]
    assert list(exts.extensions.list()) == []
    assert not os.path.exists(blob_path(live_server, sha256(liar)))


def test_archive_declaring_a_huge_size_is_refused_without_inflating(exts):
    """The central directory claims gigabytes for a tiny entry."""
    payload = b"x"
    liar = handmade_zip([manifest_entry(), ("huge.bin", zipfile.ZIP_STORED, payload, zlib.crc32(payload),
                                            0xF0000000)])
    with pytest.raises(kernel.BadRequestError) as caught:
        exts.extensions.upload(file=("huge.zip", liar))
    assert "expands to more than" in caught.value.body["message"]
    assert list(exts.extensions.list()) == []


@pytest.mark.parametrize("extra", [1, 64 * 1024], ids=["file-over-limit", "request-over-limit"])
def test_oversize_upload_is_413_with_the_error_body(live_server, exts, tmp_path, extra):
    """Just over the upload limit, and over it by more than the room left for the multipart framing
    (a sparse file, streamed from disk by the SDK's HTTP client)."""
    limit = DEFAULTS.extension_max_upload_bytes
    path = tmp_path / "oversize.zip"
    with open(path, "wb") as handle:
        handle.truncate(limit + extra)
    with open(path, "rb") as handle, pytest.raises(kernel.APIStatusError) as caught:
        exts.extensions.upload(file=handle, name=unique("oversize"))
    assert caught.value.status_code == 413
    assert caught.value.body["code"] == "payload_too_large"
    assert list(exts.extensions.list()) == []
    assert temp_blobs(live_server) == []


def test_missing_file_is_400(exts):
    # The SDK requires `file`; an upload without one is what another client could send.
    with pytest.raises(kernel.BadRequestError) as caught:
        exts.post("/extensions", cast_to=ExtensionUploadResponse, body={"name": unique("x")},
                  options={"headers": {"Content-Type": "multipart/form-data"}})
    assert caught.value.status_code == 400
    assert [d["field"] for d in caught.value.body["details"]] == ["file"]
    assert list(exts.extensions.list()) == []


@pytest.mark.parametrize("name", ["a/b", "   ", "x" * 256], ids=["slash", "blank", "long"])
def test_invalid_names_are_400(exts, name):
    with pytest.raises(kernel.BadRequestError) as caught:
        exts.extensions.upload(file=make_zip(), name=name)
    assert [d["field"] for d in caught.value.body["details"]] == ["name"]
    assert list(exts.extensions.list()) == []


def test_an_empty_name_is_not_sent_by_the_sdk(exts):
    uploaded = exts.extensions.upload(file=make_zip(), name="")
    assert uploaded.name is None


def test_an_extension_may_not_take_the_store_route_as_its_name(exts):
    """GET /extensions/from_chrome_store is the store route, so that name could never be downloaded."""
    with pytest.raises(kernel.BadRequestError) as caught:
        exts.extensions.upload(file=make_zip(), name="from_chrome_store")
    assert caught.value.body["details"][0]["field"] == "name"


# --- names ----------------------------------------------------------------------------------------

def test_duplicate_name_is_a_conflict_the_sdk_does_not_retry_and_stores_nothing(
        make_client, live_server, project):
    client, sent = counting_client(make_client, live_server.api_key, project=project.name)
    name = unique("dup")
    original = client.extensions.upload(file=make_zip(), name=name)
    other = make_zip()
    sent.clear()
    with pytest.raises(kernel.ConflictError) as caught:
        client.extensions.upload(file=("other.zip", other), name=name)
    assert caught.value.response.headers["x-should-retry"] == "false"
    assert caught.value.body["code"] == "extension_name_taken"
    assert len(sent) == 1
    assert ids(client.extensions.list()) == [original.id]
    assert not os.path.exists(blob_path(live_server, sha256(other)))
    assert os.path.exists(blob_path(live_server, original.checksum))


def test_extensions_are_per_project(sdk, exts, project):
    name = unique("per-project")
    data = make_zip()
    mine = exts.extensions.upload(file=data, name=name)
    other_bytes = make_zip()
    elsewhere = sdk.extensions.upload(file=other_bytes, name=name)  # same name, default project
    assert elsewhere.id != mine.id
    assert downloaded(exts, name)[0] == data
    assert downloaded(sdk, name)[0] == other_bytes
    with pytest.raises(kernel.NotFoundError):
        sdk.extensions.get(mine.id)
    with pytest.raises(kernel.NotFoundError):
        sdk.extensions.download(mine.id)
    with pytest.raises(kernel.NotFoundError):
        sdk.extensions.delete(mine.id)
    assert mine.id not in ids(sdk.extensions.list(query=mine.id))
    assert ids(exts.extensions.list()) == [mine.id]
    by_id = sdk.with_options(project_id=project.id)
    assert fields(by_id.extensions.get(name)) == fields(mine)
    sdk.extensions.delete(elsewhere.id)


def test_identical_uploads_share_a_blob_until_both_are_gone(live_server, exts):
    data = make_zip()
    one = exts.extensions.upload(file=data, name=unique("one"))
    two = exts.extensions.upload(file=data, name=unique("two"))
    assert one.id != two.id and one.checksum == two.checksum == sha256(data)
    exts.extensions.delete(one.name)
    assert downloaded(exts, two.name)[0] == data
    assert os.path.exists(blob_path(live_server, two.checksum))
    exts.extensions.delete(two.id)
    assert not os.path.exists(blob_path(live_server, two.checksum))


# --- list -----------------------------------------------------------------------------------------

def test_list_filters(exts):
    suffix = unique("")
    alpha = exts.extensions.upload(file=make_zip(), name=f"alpha{suffix}")
    beta = exts.extensions.upload(file=make_zip(), name=f"beta{suffix}")
    unnamed = exts.extensions.upload(file=make_zip())

    everything = exts.extensions.list()
    assert ids(everything) == [alpha.id, beta.id, unnamed.id]
    assert fields(everything.items[0]) == fields(alpha)
    assert everything.has_next_page() is False
    assert ids(exts.extensions.list(name=alpha.name)) == [alpha.id]
    assert ids(exts.extensions.list(name=alpha.name[:-1])) == []  # `name` is exact
    assert ids(exts.extensions.list(query="eta")) == [beta.id]
    assert ids(exts.extensions.list(query=suffix)) == [alpha.id, beta.id]
    assert ids(exts.extensions.list(query=unnamed.id)) == [unnamed.id]  # ids match exactly
    assert ids(exts.extensions.list(query=unnamed.id[:-1])) == []
    assert ids(exts.extensions.list(query=unique("nothing"))) == []


def test_list_query_is_case_insensitive_and_takes_wildcards_literally(exts):
    suffix = unique("")
    percent = exts.extensions.upload(file=make_zip(), name=f"Hundred%_{suffix}")
    exts.extensions.upload(file=make_zip(), name=f"hundredXY{suffix}")
    assert ids(exts.extensions.list(query=f"hundred%_{suffix}")) == [percent.id]
    assert ids(exts.extensions.list(query="_")) == [percent.id]
    assert downloaded(exts, percent.name)[0] == downloaded(exts, percent.id)[0]  # '%' survives the path


def test_list_pages_and_the_auto_pager(make_client, live_server, project):
    client, sent = counting_client(make_client, live_server.api_key, project=project.name)
    uploaded = [client.extensions.upload(file=make_zip(), name=unique(f"page{i}")) for i in range(5)]
    sent.clear()

    first = client.extensions.list(limit=2)
    assert ids(first.items) == ids(uploaded[:2]) and first.has_next_page() is True
    raw = client.extensions.with_raw_response.list(limit=2, offset=2)
    assert raw.http_response.headers["X-Has-More"] == "true"
    assert raw.http_response.headers["X-Next-Offset"] == "4"

    sent.clear()
    assert ids(first) == ids(uploaded)
    assert [dict(httpx.QueryParams(r.url.query)) for r in sent] == [
        {"limit": "2", "offset": "2"}, {"limit": "2", "offset": "4"}]
    last = client.extensions.list(limit=2, offset=4)
    assert ids(last.items) == [uploaded[4].id] and last.has_next_page() is False
    assert ids(client.extensions.list(limit=100)) == ids(uploaded)


# --- delete ---------------------------------------------------------------------------------------

def test_delete_by_name_and_by_id(live_server, exts):
    name = unique("gone")
    by_name = exts.extensions.upload(file=make_zip(), name=name)
    by_id = exts.extensions.upload(file=make_zip())
    keep = exts.extensions.upload(file=make_zip(), name=unique("keep"))

    raw = exts.extensions.with_raw_response.delete(name)
    assert raw.http_response.status_code == 204 and raw.parse() is None
    assert exts.extensions.delete(by_id.id) is None

    for ref in (name, by_name.id, by_id.id):
        with pytest.raises(kernel.NotFoundError):
            exts.extensions.get(ref)
        with pytest.raises(kernel.NotFoundError):
            exts.extensions.download(ref)
        with pytest.raises(kernel.NotFoundError):
            exts.extensions.delete(ref)
    for gone in (by_name, by_id):
        assert not os.path.exists(blob_path(live_server, gone.checksum))
    assert ids(exts.extensions.list()) == [keep.id]
    assert exts.extensions.upload(file=make_zip(), name=name).id != by_name.id  # the name is free again


def test_unknown_extension_is_not_found_everywhere(exts):
    missing = unique("missing")
    for call in (exts.extensions.get, exts.extensions.download, exts.extensions.delete):
        with pytest.raises(kernel.NotFoundError) as caught:
            call(missing)
        assert caught.value.body["code"] == "not_found"


# --- download_from_chrome_store -------------------------------------------------------------------

class ChromeStore(FakeChromeStore):
    """The Chrome Web Store look-alike, plus ids that answer HTTP 500 or garbage."""

    def __init__(self):
        super().__init__()
        self.failing = set()
        self.garbage = set()

    def get(self, handler):
        ext_id = parse_qs(urlparse(handler.path).query).get("id", [""])[0]
        if ext_id in self.failing:
            return handler.answer(500, b"store exploded", content_type="text/plain")
        if ext_id in self.garbage:
            return handler.answer(200, b"<html>not a crx</html>", content_type="text/html")
        return super().get(handler)


def crx3(zip_bytes):
    header = b"\x0a\x05proto" + os.urandom(16)
    return b"Cr24" + struct.pack("<II", 3, len(header)) + header + zip_bytes


def crx2(zip_bytes):
    key, signature = os.urandom(10), os.urandom(7)
    return b"Cr24" + struct.pack("<III", 2, len(key), len(signature)) + key + signature + zip_bytes


@pytest.fixture(scope="module")
def store():
    server = ChromeStore().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def store_server(live_server, store, tmp_path_factory):
    """(base_url, api_key) of a second live server whose Chrome Web Store is `store`."""
    workdir = tmp_path_factory.mktemp("sdk_store_server")
    with private_database(workdir) as database_url:
        env = server_env(database_url, workdir)
        env["LANTERN_CHROME_STORE_CRX_URL"] = store.url + "/crx?id={id}&os={os}"
        run_cli(env, "db", "upgrade")
        output = run_cli(env, "orgs", "create", "--name", "SDK store", "--owner-email", "store@sdk.test")
        api_key = output.strip().splitlines()[-1].strip()
        with gunicorn(env, workdir / "gunicorn.log") as base_url:
            yield base_url, api_key


@pytest.fixture
def store_sdk(store_server):
    base_url, api_key = store_server
    client = kernel.Kernel(api_key=api_key, base_url=base_url, _strict_response_validation=True, max_retries=0)
    yield client
    client.close()


def from_store(client, **params):
    response = client.extensions.download_from_chrome_store(**params)
    try:
        return response.read(), response.headers
    finally:
        response.close()


@pytest.mark.parametrize("packer", [crx3, crx2], ids=["crx3", "crx2"])
def test_crx_from_the_store_comes_back_as_the_zip_it_carries(store_sdk, store, packer):
    data, ext_id = make_zip(), chrome_id()
    store.crx[ext_id] = packer(data)
    url = f"https://chromewebstore.google.com/detail/demo-extension/{ext_id}"
    body, headers = from_store(store_sdk, url=url, os="mac")
    assert body == data
    assert headers["content-type"] == "application/zip"
    assert headers["content-disposition"] == f'attachment; filename="{ext_id}.zip"'
    assert store.paths[-1] == f"/crx?id={ext_id}&os=mac"


def test_store_defaults_to_linux_and_takes_a_bare_id(store_sdk, store):
    data, ext_id = make_zip(), chrome_id()
    store.crx[ext_id] = crx3(data)
    raw = store_sdk.extensions.with_raw_response.download_from_chrome_store(url=ext_id)
    try:
        assert raw.http_request.headers["accept"] == "application/octet-stream"
        assert dict(httpx.QueryParams(raw.http_request.url.query)) == {"url": ext_id}
        assert raw.read() == data
    finally:
        raw.http_response.close()
    assert store.paths[-1] == f"/crx?id={ext_id}&os=linux"
    for os_name in ("win", "linux"):
        assert from_store(store_sdk, url=ext_id, os=os_name)[0] == data
        assert store.paths[-1] == f"/crx?id={ext_id}&os={os_name}"


def test_a_zip_from_the_store_uploads_as_an_extension(store_sdk, store):
    data, ext_id = make_zip(), chrome_id()
    store.crx[ext_id] = crx3(data)
    body = from_store(store_sdk, url=f"https://chromewebstore.google.com/detail/x/{ext_id}")[0]
    uploaded = store_sdk.extensions.upload(file=(f"{ext_id}.zip", body), name=unique("from-store"))
    assert uploaded.checksum == sha256(data)
    assert downloaded(store_sdk, uploaded.id)[0] == data
    store_sdk.extensions.delete(uploaded.id)


def test_extension_the_store_does_not_have_is_404(store_sdk, store):
    ext_id = chrome_id()
    with pytest.raises(kernel.NotFoundError) as caught:
        store_sdk.extensions.download_from_chrome_store(url=f"https://chromewebstore.google.com/detail/x/{ext_id}")
    assert caught.value.body["code"] == "extension_not_in_store"
    assert ext_id in caught.value.body["message"]
    assert store.paths[-1] == f"/crx?id={ext_id}&os=linux"


@pytest.mark.parametrize("params", [
    {"url": "https://example.com/nothing-here"},
    {"url": "https://chromewebstore.google.com/detail/x/not-an-extension-id"},
    {"url": "abcdefghijklmnopabcdefghijklmnoz"},  # 'z' is not an extension-id letter
    {"url": "abcdefghijklmnopabcdefghijklmnop", "os": "beos"},
], ids=["other-site", "no-id", "bad-id", "bad-os"])
def test_bad_store_requests_are_400_and_never_reach_the_store(store_sdk, store, params):
    before = len(store.paths)
    with pytest.raises(kernel.BadRequestError):
        store_sdk.extensions.download_from_chrome_store(**params)
    assert len(store.paths) == before


def test_store_failures_are_502(store_sdk, store):
    failing, garbage = chrome_id(), chrome_id()
    store.failing.add(failing)
    store.garbage.add(garbage)
    with pytest.raises(kernel.InternalServerError) as caught:
        store_sdk.extensions.download_from_chrome_store(url=failing)
    assert caught.value.status_code == 502
    assert caught.value.body["code"] == "chrome_store_unreachable"
    with pytest.raises(kernel.InternalServerError) as caught:
        store_sdk.extensions.download_from_chrome_store(url=garbage)
    assert caught.value.status_code == 502
    assert caught.value.body["code"] == "chrome_store_bad_response"


def test_the_store_route_is_never_an_extension_name(store_sdk, store):
    """`/extensions/from_chrome_store` is its own route, even when an extension has a similar name."""
    data, ext_id = make_zip(), chrome_id()
    store.crx[ext_id] = crx3(data)
    stored = store_sdk.extensions.upload(file=make_zip(), name="from_chrome_store_x")
    assert from_store(store_sdk, url=ext_id)[0] == data
    assert fields(store_sdk.extensions.get("from_chrome_store_x")) == fields(stored)
    store_sdk.extensions.delete(stored.id)
