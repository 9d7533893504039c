"""Extensions: upload with validation, list, download, metadata, delete, Chrome Web Store (contract 6.5)."""
import hashlib
import io
import json
import os
import struct
import zipfile

import pytest

from app.core import settings
from tests.fakes import FakeChromeStore

MANIFEST = json.dumps({"manifest_version": 3, "name": "Demo", "version": "1.0"})
EXT_ID = "abcdefghijklmnopabcdefghijklmnop"


def make_zip(entries=None, *, compression=zipfile.ZIP_DEFLATED):
    entries = {"manifest.json": MANIFEST, "background.js": "console.log('hi')"} if entries is None else entries
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as archive:
        for name, content in entries.items():
            archive.writestr(name, content)
    return buffer.getvalue()


def downloaded(client, path):
    """GET a file response, read it, and close it (the server streams it from disk)."""
    response = client.get(path)
    data = response.data
    response.close()
    return response, data


def upload(client, data, name=None, filename="ext.zip"):
    form = {"file": (io.BytesIO(data), filename, "application/zip")}
    if name is not None:
        form["name"] = name
    return client.post("/extensions", data=form, content_type="multipart/form-data")


def test_upload_download_metadata_round_trip(client):
    data = make_zip()
    response = upload(client, data, name="demo")
    assert response.status_code == 201, response.get_json()
    created = response.get_json()
    assert created["name"] == "demo" and created["size_bytes"] == len(data)
    assert created["checksum"] == hashlib.sha256(data).hexdigest()
    download, body = downloaded(client, "/extensions/demo")
    assert download.status_code == 200 and body == data
    assert download.mimetype == "application/octet-stream"
    assert download.headers["Content-Length"] == str(len(data))
    assert download.headers["Content-Disposition"] == "attachment; filename=demo.zip"
    assert downloaded(client, f"/extensions/{created['id']}")[1] == data
    assert client.get("/extensions/demo/metadata").get_json() == created


def test_manifest_in_a_single_top_level_folder_is_accepted(client):
    data = make_zip({"demo/manifest.json": MANIFEST, "demo/app.js": "1"})
    assert upload(client, data).status_code == 201


@pytest.mark.parametrize("entries, reason", [
    ({"readme.txt": "no manifest"}, "manifest.json"),
    ({"a/manifest.json": MANIFEST, "b/x.js": "1"}, "manifest.json"),
    ({"manifest.json": MANIFEST, "../evil.js": "1"}, ".."),
    ({"manifest.json": MANIFEST, "a/../../evil.js": "1"}, ".."),
    ({"manifest.json": MANIFEST, "/etc/passwd": "1"}, "absolute"),
    ({"manifest.json": MANIFEST, "C:\\evil.js": "1"}, "absolute"),
    ({"manifest.json": "{not json"}, "not valid JSON"),
])
def test_invalid_archives_are_400_and_store_nothing(app, client, entries, reason):
    response = upload(client, make_zip(entries))
    assert response.status_code == 400
    assert reason in response.get_json()["message"]
    assert client.get("/extensions").get_json() == []
    assert stored_blobs(app) == []


def stored_blobs(app):
    root = app.extensions["blobs"].root
    return [f for d in os.listdir(root) if d != "tmp" for f in os.listdir(os.path.join(root, d))] + \
        os.listdir(os.path.join(root, "tmp"))


def test_not_a_zip_is_400(client):
    response = upload(client, b"this is not a zip file")
    assert response.status_code == 400 and "ZIP" in response.get_json()["message"]


def test_zip_bomb_is_refused(app, client):
    settings.change(app, EXTENSION_MAX_UNCOMPRESSED_BYTES=1024 * 1024)
    bomb = make_zip({"manifest.json": MANIFEST, "zeros.bin": b"\0" * (4 * 1024 * 1024)})
    assert len(bomb) < 64 * 1024
    response = upload(client, bomb)
    assert response.status_code == 400 and "expands to more than" in response.get_json()["message"]
    assert stored_blobs(app) == []


def test_zip_bomb_with_lying_headers_is_refused(app, client):
    """Declared sizes say small; inflating says otherwise."""
    settings.change(app, EXTENSION_MAX_UNCOMPRESSED_BYTES=1024 * 1024)
    bomb = bytearray(make_zip({"manifest.json": MANIFEST, "zeros.bin": b"\0" * (4 * 1024 * 1024)}))
    # Rewrite the declared uncompressed size of zeros.bin in the central directory to 10 bytes.
    central = bomb.rfind(b"PK\x01\x02")
    struct.pack_into("<I", bomb, central + 24, 10)
    response = upload(client, bytes(bomb))
    assert response.status_code == 400


@pytest.mark.parametrize("archive_kib", [40, 60], ids=["request-over-limit", "file-over-limit"])
def test_oversize_upload_is_413_with_error_body(app, client, archive_kib):
    settings.change(app, EXTENSION_MAX_UPLOAD_BYTES=50 * 1024 if archive_kib == 60 else 10 * 1024)
    big = make_zip({"manifest.json": MANIFEST, "noise.bin": os.urandom(archive_kib * 1024)},
                   compression=zipfile.ZIP_STORED)
    response = upload(client, big)
    assert response.status_code == 413
    assert response.get_json()["code"] == "payload_too_large"
    assert client.get("/extensions").get_json() == []


def test_missing_file_is_400(client):
    response = client.post("/extensions", data={"name": "x"}, content_type="multipart/form-data")
    assert response.status_code == 400 and response.get_json()["details"][0]["field"] == "file"


def test_names_are_unique_and_a_clash_stores_nothing_new(app, client):
    settings.change(app, BLOB_GRACE_SECONDS=0)
    assert upload(client, make_zip(), name="dup").status_code == 201
    other = make_zip({"manifest.json": MANIFEST, "other.js": "2"})
    clash = upload(client, other, name="dup")
    assert clash.status_code == 409 and clash.headers["x-should-retry"] == "false"
    assert not os.path.exists(app.extensions["blobs"].path(hashlib.sha256(other).hexdigest()))


def test_list_filters_and_delete(app, client):
    settings.change(app, BLOB_GRACE_SECONDS=0)
    a = upload(client, make_zip(), name="alpha").get_json()
    b = upload(client, make_zip({"manifest.json": MANIFEST, "b.js": "b"}), name="beta").get_json()
    assert [e["id"] for e in client.get("/extensions?name=alpha").get_json()] == [a["id"]]
    assert [e["id"] for e in client.get("/extensions?query=et").get_json()] == [b["id"]]
    assert client.get("/extensions?limit=1").headers["X-Has-More"] == "true"
    path = app.extensions["blobs"].path(a["checksum"])
    assert client.delete("/extensions/alpha").status_code == 204
    assert client.get("/extensions/alpha").status_code == 404
    assert not os.path.exists(path)


def test_identical_uploads_share_a_blob_until_both_are_gone(app, client):
    settings.change(app, BLOB_GRACE_SECONDS=0)
    data = make_zip()
    upload(client, data, name="one")
    upload(client, data, name="two")
    client.delete("/extensions/one")
    assert downloaded(client, "/extensions/two")[1] == data


def test_extensions_keep_a_project_from_being_deleted(client):
    project = client.post("/org/projects", json={"name": "with-ext"}).get_json()
    form = {"file": (io.BytesIO(make_zip()), "e.zip")}
    client.post("/extensions", data=form, content_type="multipart/form-data",
                headers={"X-Kernel-Project-Id": project["id"]})
    assert client.delete(f"/org/projects/{project['id']}").status_code == 409


class TestChromeStore:
    @pytest.fixture
    def store(self, app):
        server = FakeChromeStore().start()
        settings.change(app, CHROME_STORE_CRX_URL=server.url + "/crx?id={id}&os={os}")
        yield server
        server.stop()

    def crx3(self, zip_bytes):
        header = b"\x0a\x05proto"
        return b"Cr24" + struct.pack("<II", 3, len(header)) + header + zip_bytes

    def crx2(self, zip_bytes):
        key, signature = b"k" * 10, b"s" * 7
        return b"Cr24" + struct.pack("<III", 2, len(key), len(signature)) + key + signature + zip_bytes

    @pytest.mark.parametrize("packer", ["crx3", "crx2"])
    def test_crx_is_converted_to_the_zip_it_carries(self, client, store, packer):
        data = make_zip()
        store.crx[EXT_ID] = getattr(self, packer)(data)
        url = f"https://chromewebstore.google.com/detail/demo-extension/{EXT_ID}"
        response = client.get("/extensions/from_chrome_store", query_string={"url": url, "os": "mac"})
        assert response.status_code == 200 and response.data == data
        assert store.paths[-1] == f"/crx?id={EXT_ID}&os=mac"

    def test_unknown_extension_is_404_and_bad_url_is_400(self, client, store):
        response = client.get("/extensions/from_chrome_store", query_string={"url": EXT_ID})
        assert response.status_code == 404 and response.get_json()["code"] == "extension_not_in_store"
        bad = client.get("/extensions/from_chrome_store", query_string={"url": "https://example.com/nothing"})
        assert bad.status_code == 400
        beos = client.get("/extensions/from_chrome_store", query_string={"url": EXT_ID, "os": "beos"})
        assert beos.status_code == 400

    def test_unreachable_store_is_502(self, app, client, closed_port_url):
        settings.change(app, CHROME_STORE_CRX_URL=closed_port_url + "/crx?id={id}")
        response = client.get("/extensions/from_chrome_store", query_string={"url": EXT_ID})
        assert response.status_code == 502 and response.get_json()["code"] == "chrome_store_unreachable"

    def test_route_is_not_an_extension_name(self, client, store):
        upload(client, make_zip(), name="from_chrome_store_x")
        assert client.get("/extensions/from_chrome_store").status_code == 400  # url is required


def test_the_store_route_is_not_a_usable_name(client):
    response = upload(client, make_zip(), name="from_chrome_store")
    assert response.status_code == 400 and response.get_json()["details"][0]["field"] == "name"


def entry(name, content, *, mode=None, flags=0):
    info = zipfile.ZipInfo(name)
    if mode is not None:
        info.external_attr = mode << 16
    info.flag_bits |= flags
    return info, content


def zip_of(*entries):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for info, content in entries:
            archive.writestr(info, content)
    return buffer.getvalue()


def encrypted(data, name):
    """Set the 'encrypted' flag of entry `name` (zipfile cannot write encrypted entries)."""
    data = bytearray(data)
    for signature, flag_offset, name_offset in ((b"PK\x03\x04", 6, 30), (b"PK\x01\x02", 8, 46)):
        at = data.find(signature)
        while at >= 0:
            length = struct.unpack_from("<H", data, at + name_offset - (2 if signature == b"PK\x03\x04" else 18))[0]
            if data[at + name_offset:at + name_offset + length] == name.encode():
                struct.pack_into("<H", data, at + flag_offset, struct.unpack_from("<H", data, at + flag_offset)[0] | 1)
            at = data.find(signature, at + 4)
    return bytes(data)


def test_encrypted_entries_are_400(client):
    data = encrypted(zip_of(entry("manifest.json", MANIFEST), entry("secret.js", "x")), "secret.js")
    response = upload(client, data)
    assert response.status_code == 400 and "encrypted" in response.get_json()["message"]


@pytest.mark.parametrize("extra, reason", [
    (entry("link", "/etc/passwd", mode=0o120777), "symlinks"),
    (entry("manifest.json", "{not json"), "twice"),
])
def test_symlinks_encrypted_and_duplicate_entries_are_400(client, extra, reason):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate name we make on purpose
        data = zip_of(entry("manifest.json", MANIFEST, mode=0o100644), extra)
    response = upload(client, data)
    assert response.status_code == 400, response.get_json()
    assert reason in response.get_json()["message"]


def test_too_many_entries_are_refused_before_the_directory_is_loaded(app, client):
    settings.change(app, EXTENSION_MAX_ENTRIES=100)
    data = zip_of(entry("manifest.json", MANIFEST), *[entry(f"f{i}", "") for i in range(100)])
    response = upload(client, data)
    assert response.status_code == 400 and "more than 100 entries" in response.get_json()["message"]
    fits = zip_of(entry("manifest.json", MANIFEST), *[entry(f"f{i}", "") for i in range(99)])
    assert upload(client, fits).status_code == 201


def test_names_with_control_characters_are_refused(client):
    for name in ("a\r\nb", "tab\tname", "nul\x00"):
        assert upload(client, make_zip(), name=name).status_code == 400, repr(name)


def test_a_fresh_blob_outlives_its_release_until_the_sweep(app, client):
    """A blob written moments ago may be about to gain a row that names it: only the sweep, later, removes it."""
    data = make_zip()
    created = upload(client, data, name="short-lived").get_json()
    path = app.extensions["blobs"].path(created["checksum"])
    client.delete("/extensions/short-lived")
    assert os.path.exists(path)
    runner = app.test_cli_runner()
    assert "removed 0" in runner.invoke(args=["blobs", "sweep"]).output
    kept_data = make_zip({"manifest.json": MANIFEST, "kept.js": "1"})
    kept = upload(client, kept_data, name="kept").get_json()
    old = os.path.getmtime(path) - 7200
    for blob in (path, app.extensions["blobs"].path(kept["checksum"])):
        os.utime(blob, (old, old))
    assert "removed 1" in runner.invoke(args=["blobs", "sweep"]).output
    assert not os.path.exists(path)
    assert downloaded(client, "/extensions/kept")[1] == kept_data
