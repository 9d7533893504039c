"""Upload guards against archives built to fool the checker (#11 items 11-13): sizes that lie,
end records that lie, and compression methods browsers never load. Archives are written byte by byte."""
import io
import json
import struct
import zipfile

import pytest

from app.core import settings
from app.extensions.archive import InvalidArchive, validate_zip
from tests.extensions.test_extensions import MANIFEST, make_zip, stored_blobs, upload
from tests.zips import MIB, deflated, handmade_zip, stored, zeros_deflated

# Like the probe (600 MiB declared as 1,024 bytes by both headers), at 256 MiB: the test
# client spools bodies over 500 KB to a temporary file it never closes.
BOMB = handmade_zip([stored("manifest.json", MANIFEST.encode()),
                     ("zeros.bin", zipfile.ZIP_DEFLATED, zeros_deflated(256)[0], 0, 1024)])


def assert_refused(app, client, data, reason):
    response = upload(client, data)
    assert response.status_code == 400, response.get_json()
    body = response.get_json()
    assert body["code"] == "bad_request" and reason in body["message"]
    assert body["details"] == [{"code": "invalid", "field": "file", "message": body["message"]}]
    assert client.get("/extensions").get_json() == []
    assert stored_blobs(app) == []


# --- 11: sizes are what inflating the raw stream gives, not what the headers say ----------------------

def test_an_entry_inflating_past_its_declared_size_is_400(app, client):
    assert_refused(app, client, BOMB, "'zeros.bin' inflates to more than the 1024 bytes its headers declare")


def test_the_check_stops_reading_once_past_the_declared_size(app):
    """Most of the bomb's 265 KB of compressed bytes are never read, so never inflated."""
    class CountingFile(io.BytesIO):
        read_bytes = 0

        def read(self, size=-1):
            data = super().read(size)
            self.read_bytes += len(data)
            return data

    upload_file = CountingFile(BOMB)
    with pytest.raises(InvalidArchive, match="inflates to more than"):
        validate_zip(upload_file, max_uncompressed=app.config["EXTENSION_MAX_UNCOMPRESSED_BYTES"],
                     max_entries=app.config["EXTENSION_MAX_ENTRIES"])
    assert upload_file.read_bytes < len(BOMB) // 2


def test_an_entry_inflating_to_less_than_its_declared_size_is_400(app, client):
    data = handmade_zip([stored("manifest.json", MANIFEST.encode()), deflated("app.js", b"x" * 10, 4096)])
    assert_refused(app, client, data, "'app.js' inflates to 10 bytes, not the 4096 its headers declare")


# --- 12: entries are counted in the central directory, not taken from the end record ------------------

def many_entries_declaring_one(count):
    return handmade_zip([stored("manifest.json", MANIFEST.encode())] +
                        [stored(f"f{i}.js", b"") for i in range(count - 1)], declared_count=1)


def test_a_directory_holding_more_entries_than_the_limit_is_400(app, client):
    settings.change(app, EXTENSION_MAX_ENTRIES=100)
    assert_refused(app, client, many_entries_declaring_one(1000), "more than 100 entries")


def test_a_directory_holding_more_entries_than_its_end_record_says_is_400(app, client):
    assert_refused(app, client, many_entries_declaring_one(50),
                   "central directory holds 50 entries but its end record says 1")


# --- 13: only the methods browsers load; a bounded manifest ------------------------------------------

@pytest.mark.parametrize("method, name", [(zipfile.ZIP_BZIP2, "bzip2"), (zipfile.ZIP_LZMA, "lzma")])
def test_methods_browsers_do_not_load_are_400(app, client, method, name):
    data = make_zip({"manifest.json": MANIFEST, "app.js": "x" * 1000}, compression=method)
    assert_refused(app, client, data, f"'manifest.json' is compressed with {name}; only stored and deflate")


def test_a_manifest_over_one_mebibyte_is_400(app, client):
    manifest = json.dumps({"manifest_version": 3, "name": "Demo", "version": "1.0", "description": "x" * MIB})
    data = handmade_zip([deflated("manifest.json", manifest.encode())])
    assert_refused(app, client, data, "manifest.json is larger than 1048576 bytes")


# --- what the stricter reading still accepts ---------------------------------------------------------

def with_zip64_end_record(data):
    """`data` with a ZIP64 end record and its locator before the end record, as some archivers write."""
    end = data.rfind(b"PK\x05\x06")
    _, _, _, count, _, size, offset, _ = struct.unpack_from("<4s4H2LH", data, end)
    record = struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, count, count, size, offset)
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, end, 1)
    return data[:end] + record + locator + data[end:]


def streamed_zip():
    """Written to an unseekable stream, so sizes and CRCs come in data descriptors after each entry."""
    class Unseekable(io.RawIOBase):
        def __init__(self):
            self.buffer = bytearray()

        def writable(self):
            return True

        def write(self, data):
            self.buffer += data
            return len(data)

    out = Unseekable()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in {"manifest.json": MANIFEST, "app.js": "console.log(1)"}.items():
            with archive.open(name, "w") as member:
                member.write(content.encode())
    return bytes(out.buffer)


def zip64_local_sizes():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in {"manifest.json": MANIFEST, "app.js": "console.log(1)"}.items():
            with archive.open(name, "w", force_zip64=True) as member:
                member.write(content.encode())
    return buffer.getvalue()


@pytest.mark.parametrize("build", [streamed_zip, zip64_local_sizes, lambda: with_zip64_end_record(make_zip())],
                         ids=["data-descriptors", "zip64-local-sizes", "zip64-end-record"])
def test_archives_with_data_descriptors_or_zip64_records_are_accepted(client, build):
    response = upload(client, build())
    assert response.status_code == 201, response.get_json()


def test_a_manifest_nested_too_deeply_is_400_not_500(app, client):
    assert_refused(app, client, handmade_zip([stored("manifest.json", b"[" * 100_000 + b"]" * 100_000)]),
                   "manifest.json nests more than")
