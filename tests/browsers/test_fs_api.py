"""The files API (/browsers/{id}/fs/..., app/browsers/fs_views.py) against a host's stand-in for the session's agent
(tests/browsers/agent_host.py): what each SDK call becomes on its way to the agent, what the app refuses before
anything is forwarded, and that bytes stream through the app without being held. The agent itself is tested in
tests/browserhost/agent/, the whole way on real Chromium in tests/browsers/live/test_files.py."""
import hashlib
import io
import json
import stat
import threading
import zipfile

import pytest

from app.browsers import host_errors, lifecycle, session_agent, uploads
from app.core import streamslots
from app.core.errors import ApiError
from tests.browsers import agent_host
from tests.browsers.agent_host import event_stream
from tests.browsers.test_host_stream import peak_allocated
from tests.conftest import client_for
from tests.waiting import eventually

agent, sdk = agent_host.agent, agent_host.sdk  # its fixtures, under the names the tests take

MiB = 1024 * 1024
BLOCK = bytes(range(256)) * 256  # 64 KiB
INFO = {"name": "a.txt", "path": "/home/kernel/a.txt", "is_dir": False, "size_bytes": 3,
        "mod_time": "2026-01-02T03:04:05Z", "mode": "-rw-r--r--"}


def test_the_openapi_document_has_the_sdks_fifteen_files_operations(anonymous):
    paths = anonymous.get("/openapi.json").get_json()["paths"]
    operations = {(method.upper(), path.split("/fs/", 1)[1]) for path, ops in paths.items() if "/fs/" in path
                  for method in ops if method != "parameters"}
    assert operations == {
        ("PUT", "create_directory"), ("PUT", "delete_directory"), ("PUT", "delete_file"), ("PUT", "move"),
        ("PUT", "set_file_permissions"), ("GET", "file_info"), ("GET", "list_files"), ("GET", "read_file"),
        ("GET", "download_dir_zip"), ("PUT", "write_file"), ("POST", "upload"), ("POST", "upload_zip"),
        ("POST", "watch"), ("GET", "watch/{watch_id}/events"), ("DELETE", "watch/{watch_id}")}


@pytest.mark.parametrize("call, method, path, body, query", [
    (lambda fs, s: fs.create_directory(s, path="/home/kernel/d", mode="700"), "PUT", "fs/create_directory",
     {"path": "/home/kernel/d", "mode": "700"}, {}),
    (lambda fs, s: fs.delete_directory(s, path="/tmp/d"), "PUT", "fs/delete_directory", {"path": "/tmp/d"}, {}),
    (lambda fs, s: fs.delete_file(s, path="/tmp/f"), "PUT", "fs/delete_file", {"path": "/tmp/f"}, {}),
    (lambda fs, s: fs.move(s, src_path="/tmp/a", dest_path="/tmp/b"), "PUT", "fs/move",
     {"src_path": "/tmp/a", "dest_path": "/tmp/b"}, {}),
    (lambda fs, s: fs.set_file_permissions(s, path="/tmp/f", mode="0755", owner="kernel"), "PUT",
     "fs/set_file_permissions", {"path": "/tmp/f", "mode": "0755", "owner": "kernel"}, {}),
    (lambda fs, s: fs.watch.stop("w_1", id_or_name=s), "DELETE", "fs/watch/w_1", None, {}),
], ids=["create_directory", "delete_directory", "delete_file", "move", "set_file_permissions", "watch.stop"])
def test_a_change_goes_to_the_agents_route_with_the_sdks_body(agent, sdk, call, method, path, body, query):
    host, session_id = agent
    assert call(sdk.browsers.fs, session_id) is None
    [forwarded] = host.calls
    assert (forwarded.method, forwarded.path, forwarded.query) == (method, path, query)
    assert (forwarded.json() if body is not None else None) == body


def test_reads_go_as_queries_and_their_answers_come_back_as_the_sdk_reads_them(agent, sdk):
    host, session_id = agent
    host.answers.update({"fs/file_info": (200, INFO), "fs/list_files": (200, [INFO, dict(INFO, name="d", is_dir=True)]),
                         "fs/watch": (201, {"watch_id": "w_7"})})
    info = sdk.browsers.fs.file_info(session_id, path="/home/kernel/a b.txt")
    assert (info.name, info.size_bytes, info.mode, info.mod_time.year) == ("a.txt", 3, "-rw-r--r--", 2026)
    listing = sdk.browsers.fs.list_files(session_id, path="/home/kernel")
    assert [item.is_dir for item in listing] == [False, True]
    assert sdk.browsers.fs.watch.start(session_id, path="/tmp", recursive=True).watch_id == "w_7"
    assert [(c.method, c.path, c.query) for c in host.calls] == [
        ("GET", "fs/file_info", {"path": "/home/kernel/a b.txt"}), ("GET", "fs/list_files", {"path": "/home/kernel"}),
        ("POST", "fs/watch", {})]
    assert host.calls[2].json() == {"path": "/tmp", "recursive": True}


LONG = "/" + "a" * 4096


@pytest.mark.parametrize("method, url, body", [
    ("PUT", "fs/create_directory", {"path": "relative/d"}), ("PUT", "fs/create_directory", {"path": ""}),
    ("PUT", "fs/create_directory", {"path": LONG}), ("PUT", "fs/create_directory", {"path": "/d", "mode": "999"}),
    ("PUT", "fs/create_directory", {"path": "/d", "mode": "rwx"}), ("PUT", "fs/create_directory", {"path": "/d",
                                                                                                   "mode": 755}),
    ("PUT", "fs/create_directory", {"path": "/d", "extra": 1}), ("PUT", "fs/delete_file", {}),
    ("PUT", "fs/move", {"src_path": "/a", "dest_path": "b"}),
    ("PUT", "fs/set_file_permissions", {"path": "/a"}), ("PUT", "fs/set_file_permissions", {"path": "/a", "mode": "8"}),
    ("GET", "fs/file_info?path=rel", None), ("GET", "fs/list_files", None), ("GET", f"fs/read_file?path={LONG}", None),
    ("GET", "fs/download_dir_zip?path=", None), ("POST", "fs/watch", {"path": "/tmp", "recursive": "yes"}),
    ("PUT", "fs/write_file?path=x.txt", b"data"), ("PUT", "fs/write_file?path=/x&mode=abc", b"data"),
    ("PUT", "fs/write_file", b"data"),
])
def test_bad_input_is_a_400_and_nothing_reaches_the_session(agent, client, method, url, body):
    host, session_id = agent
    options = {"data": body, "content_type": "application/octet-stream"} if isinstance(body, bytes) else {"json": body}
    response = client.open(f"/browsers/{session_id}/{url}", method=method, **options)
    assert response.status_code == 400, response.get_json()
    assert response.get_json()["code"] == "bad_request" and host.calls == []


def test_a_nul_byte_in_a_path_is_a_400(agent, client):
    host, session_id = agent
    assert client.get(f"/browsers/{session_id}/fs/file_info?path=/tmp/a%00b").status_code == 400
    assert client.put(f"/browsers/{session_id}/fs/delete_file", json={"path": "/tmp/a\x00b"}).status_code == 400
    assert host.calls == []


def test_another_organizations_session_and_an_ended_one_are_404(app, agent, client, make_org):
    host, session_id = agent
    stranger = client_for(app, make_org("Other", "owner@other.test").plaintext)
    for caller in (stranger, client):
        response = caller.get(f"/browsers/{session_id}/fs/file_info?path=/tmp")
        if caller is client:
            assert response.status_code == 200
            assert client.delete(f"/browsers/{session_id}").status_code == 204
            response = caller.get(f"/browsers/{session_id}/fs/file_info?path=/tmp")
        assert response.status_code == 404 and response.get_json()["code"] == "browser_not_found"
    assert caller.put(f"/browsers/{session_id}/fs/write_file?path=/tmp/x", data=b"x",
                      content_type="application/octet-stream").status_code == 404
    assert host.agent_paths() == ["fs/file_info"]


def test_a_session_of_another_driver_has_no_files_here(client, new_browser):
    response = client.get(f"/browsers/{new_browser()['session_id']}/fs/list_files?path=/tmp")
    assert response.status_code == 501 and response.get_json()["code"] == "fs_not_served"


@pytest.mark.parametrize("status, refusal", [
    (404, {"code": "not_found", "message": "/tmp/x does not exist"}),
    (400, {"code": "path_not_allowed", "message": "path: paths under /run/lantern are the session's own"}),
    (400, {"code": "too_many_watches", "message": "a session has at most 16 watches"}),
    (413, {"code": "insufficient_room", "message": "the file needs 10 bytes, 4 bytes left", "room_bytes": 4}),
    (411, {"code": "length_required", "message": "a body needs its Content-Length"}),
    (403, {"code": "permission_denied", "message": "/root/x: permission denied"}),
    (405, {"code": "method_not_allowed", "message": "PUT is not allowed here"}),
    (414, {"code": "uri_too_long", "message": "the path is too long"}),
    (501, {"code": "not_implemented", "message": "not here"}),
    (503, {"code": "agent_unavailable", "message": "the session's agent is starting"}),
])
def test_the_agents_refusals_reach_the_client_in_its_words(agent, client, status, refusal):
    host, session_id = agent
    host.answers["fs/write_file"] = (status, refusal)
    response = client.put(f"/browsers/{session_id}/fs/write_file?path=/tmp/x", data=b"0123456789",
                          content_type="application/octet-stream")
    assert response.status_code == status
    assert {name: response.get_json()[name] for name in refusal} == refusal
    assert "x-should-retry" not in response.headers


@pytest.mark.parametrize("status", [408, 409, 429])
def test_an_agents_refusal_in_a_status_the_sdks_send_again_is_a_400_in_its_words(agent, client, status):
    host, session_id = agent
    host.answers["fs/move"] = (status, {"code": "busy", "message": "try later"})
    response = client.put(f"/browsers/{session_id}/fs/move", json={"src_path": "/a", "dest_path": "/b"})
    assert response.status_code == 400 and (response.get_json()["code"], response.get_json()["message"]) == (
        "busy", "try later")


def test_a_session_whose_browser_restarts_is_a_409_with_retry_after(agent, client):
    host, session_id = agent
    host.answers["fs/move"] = (409, {"code": "browser_restarting", "message": "the browser is starting again"})
    response = client.put(f"/browsers/{session_id}/fs/move", json={"src_path": "/a", "dest_path": "/b"})
    assert response.status_code == 409 and response.get_json()["code"] == "browser_restarting"
    assert response.headers["Retry-After"] == str(host_errors.RESTART_RETRY_SECONDS)


def test_every_agent_call_goes_on_a_connection_of_its_own(app, new_browser, sdk):
    """What a session's agent answers is its tenant's to control: its connection is never used for another call."""
    session_id = new_browser()["session_id"]
    with agent_host.agent_host(app, session_id, protocol="HTTP/1.1") as host:  # it keeps connections open if asked
        host.answers.update({"fs/file_info": (200, INFO), "fs/read_file": (200, b"abc")})
        for _ in range(2):
            sdk.browsers.fs.file_info(session_id, path="/tmp/a")
            assert sdk.browsers.fs.read_file(session_id, path="/tmp/a").read() == b"abc"
    assert len({call.peer for call in host.calls}) == 4
    assert {call.headers["connection"] for call in host.calls} == {"close"}


def test_a_failure_on_the_way_is_a_502_that_is_not_sent_again_unless_it_only_read(agent, client):
    host, session_id = agent

    def hang_up(handler, forwarded):
        handler.close_connection = True

    host.answers.update({"fs/move": hang_up, "fs/list_files": hang_up})
    moved = client.put(f"/browsers/{session_id}/fs/move", json={"src_path": "/a", "dest_path": "/b"})
    assert moved.status_code == 502 and moved.headers["x-should-retry"] == "false"
    listed = client.get(f"/browsers/{session_id}/fs/list_files?path=/tmp")
    assert listed.status_code == 502 and "Retry-After" in listed.headers


def test_a_64_mib_file_is_written_through_the_app_without_being_held(agent, client, tmp_path):
    host, session_id = agent
    source = tmp_path / "big"
    with source.open("wb") as out:
        for _ in range(64 * MiB // len(BLOCK)):
            out.write(BLOCK)

    def write():
        with source.open("rb") as body:
            return client.put(f"/browsers/{session_id}/fs/write_file?path=/home/kernel/big&mode=600",
                              input_stream=body, headers={"Content-Length": str(64 * MiB),
                                                          "Content-Type": "application/octet-stream"})

    response, peak = peak_allocated(write)
    assert response.status_code == 201, response.get_json()
    [forwarded] = host.calls
    assert (forwarded.method, forwarded.path, forwarded.query) == ("PUT", "fs/write_file",
                                                                   {"path": "/home/kernel/big", "mode": "600"})
    assert forwarded.headers["content-length"] == str(64 * MiB) and not forwarded.chunked
    assert (forwarded.size, forwarded.sha256) == (64 * MiB, hashlib.sha256(source.read_bytes()).hexdigest())
    assert peak < 8 * MiB, f"{peak / MiB:.1f} MiB held"


def test_a_64_mib_file_is_read_through_the_app_with_its_length_without_being_held(agent, client):
    host, session_id = agent
    size = 64 * MiB + 3

    def send_file(handler, forwarded):
        handler.send_response(200)
        handler.send_header("Content-Type", "application/octet-stream")
        handler.send_header("Content-Length", str(size))
        handler.end_headers()
        for start in range(0, size, len(BLOCK)):
            handler.wfile.write(BLOCK[:size - start])

    host.answers["fs/read_file"] = send_file

    def read():
        response = client.get(f"/browsers/{session_id}/fs/read_file?path=/home/kernel/big", buffered=False)
        sha, received = hashlib.sha256(), 0
        for chunk in response.response:
            sha.update(chunk)
            received += len(chunk)
        response.close()
        return response, received, sha.hexdigest()

    (response, received, digest), peak = peak_allocated(read)
    assert response.status_code == 200 and response.headers["Content-Length"] == str(size)
    assert response.mimetype == "application/octet-stream"
    assert (received, digest) == (size, hashlib.sha256(BLOCK * 1024 + BLOCK[:3]).hexdigest())
    assert peak < 8 * MiB, f"{peak / MiB:.1f} MiB held"


def test_the_sdk_writes_reads_and_downloads_a_folder(agent, sdk):
    host, session_id = agent
    host.answers.update({"fs/read_file": (200, b"hello"), "fs/download_dir_zip": (200, b"PK\x05\x06" + bytes(18))})
    sdk.browsers.fs.write_file(session_id, b"hello", path="/home/kernel/Downloads/h.txt")
    assert sdk.browsers.fs.read_file(session_id, path="/home/kernel/Downloads/h.txt").read() == b"hello"
    archive = sdk.browsers.fs.download_dir_zip(session_id, path="/home/kernel/Downloads")
    assert archive.read().startswith(b"PK") and archive.http_response.headers["content-type"] == "application/zip"
    assert host.calls[0].body == b"hello" and host.calls[0].query == {"path": "/home/kernel/Downloads/h.txt"}


def test_a_file_without_its_length_is_411_and_one_larger_than_the_session_is_413(agent, client, monkeypatch):
    host, session_id = agent
    chunked = client.put(f"/browsers/{session_id}/fs/write_file?path=/tmp/x", input_stream=io.BytesIO(b"abc"),
                         headers={"Transfer-Encoding": "chunked", "Content-Type": "application/octet-stream"})
    assert chunked.status_code == 411 and chunked.get_json()["code"] == "length_required"
    monkeypatch.setattr(uploads, "memory_bytes", lambda session: 2)
    huge = client.put(f"/browsers/{session_id}/fs/write_file?path=/tmp/x", data=b"abc",
                      content_type="application/octet-stream")
    assert huge.status_code == 413 and "3 bytes" in huge.get_json()["message"]
    assert (huge.get_json()["code"], huge.get_json()["room_bytes"]) == ("insufficient_room", 2)
    json_body = client.put(f"/browsers/{session_id}/fs/write_file?path=/tmp/x", json={"content": "x"})
    assert json_body.status_code == 415
    assert host.calls == []


def big_file(size, cut_at=None, failed=None):
    """An answer of a file of `size` bytes, cut (its connection closed) after `cut_at` bytes if given; `failed` (an
    Event) is set when the app closed the connection before the file was sent."""
    def answer(handler, forwarded):
        handler.send_response(200)
        handler.send_header("Content-Type", "application/octet-stream")
        handler.send_header("Content-Length", str(size))
        handler.end_headers()
        try:
            for start in range(0, size if cut_at is None else cut_at, len(BLOCK)):
                handler.wfile.write(BLOCK[:size - start])
        except OSError:
            if failed is not None:
                failed.set()
        handler.close_connection = True
    return answer


def test_head_of_a_file_is_refused_without_asking_the_agent(agent, client):
    host, session_id = agent
    for url in ("fs/read_file?path=/tmp/a", "fs/download_dir_zip?path=/tmp", "process/p_1/stdout/stream"):
        response = client.head(f"/browsers/{session_id}/{url}")
        assert response.status_code == 405 and response.headers["Allow"] == "GET"
    assert host.calls == []


def test_a_file_left_unread_gives_its_host_connection_back_when_the_response_closes(agent, client):
    host, session_id = agent
    failed = threading.Event()
    host.answers["fs/read_file"] = big_file(64 * MiB, failed=failed)
    response = client.get(f"/browsers/{session_id}/fs/read_file?path=/tmp/big", buffered=False)
    assert response.status_code == 200
    response.close()  # the client went away before the body
    assert eventually(failed.is_set), "the host's connection was left open"


def test_a_file_the_host_stops_sending_part_way_ends_short_with_one_line_in_the_log(agent, client, caplog):
    host, session_id = agent
    host.answers["fs/read_file"] = big_file(4 * MiB, cut_at=MiB)
    response = client.get(f"/browsers/{session_id}/fs/read_file?path=/tmp/big", buffered=False)
    received = sum(len(chunk) for chunk in response.response)
    response.close()
    assert response.headers["Content-Length"] == str(4 * MiB) and received == MiB
    [record] = [r for r in caplog.records if r.name == "app.browsers.session_agent"]
    assert "stopped part-way" in record.getMessage() and record.exc_info is None


def manifest_and_bytes(forwarded):
    head, _, data = forwarded.body.partition(b"\n")
    return json.loads(head), data


def test_an_upload_is_one_put_files_pairing_each_file_with_its_dest_path(agent, sdk):
    host, session_id = agent
    sdk.browsers.fs.upload(session_id, files=[
        {"file": ("a.txt", b"first"), "dest_path": "/home/kernel/a.txt"},
        {"file": ("b.bin", b"\x00second"), "dest_path": "/tmp/in/b.bin"}])
    [forwarded] = host.calls
    assert (forwarded.method, forwarded.path) == ("POST", "fs/put_files")
    manifest, data = manifest_and_bytes(forwarded)
    assert manifest == {"files": [{"path": "/home/kernel/a.txt", "size": 5}, {"path": "/tmp/in/b.bin", "size": 7}],
                        "directories": []}
    assert data == b"first\x00second" and int(forwarded.headers["content-length"]) == forwarded.size


@pytest.mark.parametrize("fields, files, named", [
    ({"files[0][dest_path]": "/tmp/a", "files[1][dest_path]": "/tmp/b"}, {"files[0][file]": b"a"}, "files[1][file]"),
    ({}, {"files[0][file]": b"a"}, "files[0][dest_path]"),
    ({"files[0][dest_path]": "tmp/a"}, {"files[0][file]": b"a"}, "files[0][dest_path]"),
    ({"files[0][dest_path]": "/tmp/a", "dest_path": "/tmp"}, {"files[0][file]": b"a"}, "dest_path"),
    ({}, {}, "files"),
])
def test_an_upload_with_a_half_missing_or_a_field_of_no_file_is_a_400_naming_it(agent, client, fields, files,
                                                                                 named):
    host, session_id = agent
    body = dict(fields, **{name: (io.BytesIO(data), "f") for name, data in files.items()})
    response = client.post(f"/browsers/{session_id}/fs/upload", data=body, content_type="multipart/form-data")
    assert response.status_code == 400 and response.get_json()["details"][0]["field"] == named
    assert host.calls == []


def zip_of(*entries):
    """A ZIP archive of (name, data or None for a folder, mode or None: made elsewhere than on a Unix) entries."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data, mode in entries:
            info = zipfile.ZipInfo(name)
            info.create_system = 3 if mode is not None else 0
            info.external_attr = (mode or 0) << 16
            archive.writestr(info, data or b"", zipfile.ZIP_DEFLATED)
    return buffer.getvalue()


def test_an_archive_is_extracted_with_one_put_files_of_its_folders_and_files(agent, sdk):
    host, session_id = agent
    archive = zip_of(("ext/", None, stat.S_IFDIR | 0o755), ("ext/manifest.json", b'{"a": 1}', 0o644),
                     ("ext/bin/run", b"#!/bin/sh\n", stat.S_IFREG | 0o755), ("./ext/./x", b"x", None))
    sdk.browsers.fs.upload_zip(session_id, dest_path="/home/kernel/extensions", zip_file=("e.zip", archive))
    [forwarded] = host.calls
    manifest, data = manifest_and_bytes(forwarded)
    assert manifest == {"directories": [{"path": "/home/kernel/extensions/ext"}],
                        "files": [{"path": "/home/kernel/extensions/ext/manifest.json", "size": 8, "mode": "644"},
                                  {"path": "/home/kernel/extensions/ext/bin/run", "size": 10, "mode": "755"},
                                  {"path": "/home/kernel/extensions/ext/x", "size": 1}]}
    assert data == b'{"a": 1}#!/bin/sh\nx'


@pytest.mark.parametrize("entries, named", [
    ([("ok.txt", b"a", None), ("../escape.txt", b"x", None)], "../escape.txt"),
    ([("a/../../b", b"x", None)], "a/../../b"),
    ([("/etc/passwd", b"x", None)], "/etc/passwd"),
    ([("link", b"/etc/shadow", stat.S_IFLNK | 0o777)], "link"),
    ([("fifo", b"", stat.S_IFIFO | 0o644)], "fifo"),
])
def test_an_archive_with_an_entry_outside_dest_path_or_a_link_is_a_400_naming_it(agent, client, entries, named):
    host, session_id = agent
    response = client.post(f"/browsers/{session_id}/fs/upload_zip", content_type="multipart/form-data", data={
        "dest_path": "/tmp/out", "zip_file": (io.BytesIO(zip_of(*entries)), "a.zip")})
    assert response.status_code == 400 and repr(named) in response.get_json()["message"]
    assert host.calls == []


def test_an_empty_archive_makes_its_folder(agent, client):
    host, session_id = agent
    response = client.post(f"/browsers/{session_id}/fs/upload_zip", content_type="multipart/form-data", data={
        "dest_path": "/tmp/out", "zip_file": (io.BytesIO(zip_of()), "a.zip")})
    assert response.status_code == 201
    assert manifest_and_bytes(host.calls[0]) == ({"files": [], "directories": [{"path": "/tmp/out"}]}, b"")


def test_an_upload_whose_paths_pass_what_the_agent_reads_is_a_400(agent, client, monkeypatch):
    host, session_id = agent
    monkeypatch.setattr(uploads, "MAX_MANIFEST_BYTES", 100)
    response = client.post(f"/browsers/{session_id}/fs/upload", content_type="multipart/form-data", data={
        f"files[{index}][dest_path]": f"/tmp/{'x' * 30}{index}" for index in range(3)} | {
        f"files[{index}][file]": (io.BytesIO(b"a"), "a") for index in range(3)})
    assert response.status_code == 400 and "send them in parts" in response.get_json()["message"]
    assert host.calls == []


@pytest.mark.parametrize("entries, words", [
    ([("a/b", b"x", None), ("a/./b", b"y", None)], "'a/./b' twice"),
    ([("a", None, stat.S_IFDIR | 0o755), ("a/", None, stat.S_IFDIR | 0o755)], "'a/' twice"),
    ([("evil.txt#.png", b"x", None)], "NUL byte"),  # zipfile writes no NUL: put in below
    ([("a\\b", b"x", None)], "Windows path"),
])
def test_an_archive_with_an_entry_twice_or_a_name_that_is_not_what_it_shows_is_a_400_naming_it(
        agent, client, entries, words):
    host, session_id = agent
    archive = zip_of(*entries).replace(b"evil.txt#.png", b"evil.txt\x00.png")  # zipfile reads it as "evil.txt"
    response = client.post(f"/browsers/{session_id}/fs/upload_zip", content_type="multipart/form-data", data={
        "dest_path": "/tmp/out", "zip_file": (io.BytesIO(archive), "a.zip")})
    assert response.status_code == 400 and words in response.get_json()["message"], response.get_json()
    assert host.calls == []


def test_a_folder_entry_a_unix_archiver_wrote_without_its_slash_is_a_folder(agent, sdk):
    host, session_id = agent
    archive = zip_of(("d", None, stat.S_IFDIR | 0o700), ("d/f", b"x", stat.S_IFREG | 0o600))
    sdk.browsers.fs.upload_zip(session_id, dest_path="/tmp/out", zip_file=("e.zip", archive))
    assert manifest_and_bytes(host.calls[0]) == (
        {"directories": [{"path": "/tmp/out/d"}], "files": [{"path": "/tmp/out/d/f", "size": 1, "mode": "600"}]}, b"x")


def multipart_file(path, parts):
    """`path` holding a multipart body (boundary "b") of `parts`: (name, filename or None for a text field, bytes)
    (sent as a file: the test client would spool a large body to a temporary file that it leaves open)."""
    with path.open("wb") as out:
        for name, filename, data in parts:
            disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
            out.write(f"--b\r\nContent-Disposition: {disposition}\r\n\r\n".encode() + data + b"\r\n")
        out.write(b"--b--\r\n")
    return path


def post_multipart(client, url, body):
    with body.open("rb") as stream:
        return client.post(url, input_stream=stream, headers={
            "Content-Type": "multipart/form-data; boundary=b", "Content-Length": str(body.stat().st_size)})


def test_an_archive_of_many_entries_is_refused_before_its_entries_are_read(agent, client, tmp_path):
    host, session_id = agent
    many = zip_of(*((f"{index}", None, None) for index in range(uploads.MAX_ZIP_ENTRIES * 2)))
    body = multipart_file(tmp_path / "body", [("dest_path", None, b"/tmp/out"), ("zip_file", "a.zip", many)])
    response, peak = peak_allocated(lambda: post_multipart(client, f"/browsers/{session_id}/fs/upload_zip", body))
    assert response.status_code == 400 and "more than 10000 entries" in response.get_json()["message"]
    assert peak < 4 * MiB, f"{peak / MiB:.1f} MiB held for an archive of {len(many) / MiB:.1f} MiB"
    assert host.calls == []


def test_an_archive_whose_list_of_entries_is_too_long_is_a_400(agent, client, monkeypatch):
    host, session_id = agent
    monkeypatch.setattr(uploads, "MAX_ZIP_DIRECTORY_BYTES", 200)
    archive = zip_of(*((f"{'long-name-' * 3}{index}", b"x", None) for index in range(5)))
    response = client.post(f"/browsers/{session_id}/fs/upload_zip", content_type="multipart/form-data", data={
        "dest_path": "/tmp/out", "zip_file": (io.BytesIO(archive), "a.zip")})
    assert response.status_code == 400 and "more than the 200 read" in response.get_json()["message"]
    assert host.calls == []


def test_an_upload_of_many_parts_holds_each_on_disk_past_a_small_size(agent, client, tmp_path):
    """werkzeug's default keeps every part in memory up to 500 KiB: 1000 parts came to some 490 MiB in a worker."""
    host, session_id = agent
    count, part = 64, bytes(range(256)) * 1600  # 400 KiB each: 25 MiB in all
    body = multipart_file(tmp_path / "body", [
        field for index in range(count)
        for field in ((f"files[{index}][dest_path]", None, f"/tmp/in/{index}".encode()), (f"files[{index}][file]", "f",
                                                                                            part))])
    response, peak = peak_allocated(lambda: post_multipart(client, f"/browsers/{session_id}/fs/upload", body))
    assert response.status_code == 201, response.get_json()
    [forwarded] = host.calls
    assert forwarded.size == int(forwarded.headers["content-length"]) and forwarded.body.count(part[:1000]) >= 2
    assert peak < 12 * MiB, f"{peak / MiB:.1f} MiB held"


def test_an_upload_larger_than_the_sessions_memory_is_refused_before_it_is_read(agent, client, monkeypatch):
    host, session_id = agent
    monkeypatch.setattr(uploads, "memory_bytes", lambda session: 1000)
    monkeypatch.setattr(uploads, "MULTIPART_OVERHEAD", 100)
    response = client.post(f"/browsers/{session_id}/fs/upload", content_type="multipart/form-data", data={
        "files[0][dest_path]": "/tmp/a", "files[0][file]": (io.BytesIO(b"x" * 2000), "a")})
    assert response.status_code == 413
    assert (response.get_json()["code"], response.get_json()["room_bytes"]) == ("insufficient_room", 1000)
    assert host.calls == []


def test_an_archive_of_more_than_10000_entries_or_of_no_zip_is_a_400(agent, client, monkeypatch):
    host, session_id = agent
    assert uploads.MAX_ZIP_ENTRIES == 10_000
    monkeypatch.setattr(uploads, "MAX_ZIP_ENTRIES", 10)  # an archive past 10,000 entries, without 1 MB to send
    many = zip_of(*((f"f{index}", None, None) for index in range(11)))
    for archive in (many, b"not a zip"):
        response = client.post(f"/browsers/{session_id}/fs/upload_zip", content_type="multipart/form-data", data={
            "dest_path": "/tmp/out", "zip_file": (io.BytesIO(archive), "a.zip")})
        assert response.status_code == 400 and response.get_json()["details"][0]["field"] == "zip_file"
    assert host.calls == []


def test_an_archive_past_the_sessions_memory_or_room_is_a_400_naming_the_first_entry_that_does_not_fit(
        agent, client, monkeypatch):
    host, session_id = agent
    archive = zip_of(("a", b"x" * 600, None), ("b", b"y" * 600, None), ("c", b"z" * 600, None))

    def upload():
        return client.post(f"/browsers/{session_id}/fs/upload_zip", content_type="multipart/form-data", data={
            "dest_path": "/tmp/out", "zip_file": (io.BytesIO(archive), "a.zip")})

    monkeypatch.setattr(uploads, "memory_bytes", lambda session: 1000)
    response = upload()
    assert response.status_code == 400 and "'b'" in response.get_json()["message"] and host.calls == []
    monkeypatch.setattr(uploads, "memory_bytes", lambda session: 10_000)
    host.answers["fs/put_files"] = (413, {"code": "insufficient_room", "message": "1500 bytes left",
                                          "room_bytes": 1500})
    response = upload()
    assert response.status_code == 400 and "'c'" in response.get_json()["message"]
    assert "1500 bytes" in response.get_json()["message"]


def test_a_damaged_entry_stops_the_call_part_way_so_nothing_is_written(agent, client):
    host, session_id = agent
    data = bytes(range(256)) * 4096
    archive = bytearray(zip_of(("good", b"fine", None), ("bad", data, None)))
    start = archive.index(b"bad") + 3
    archive[start + 100:start + 110] = b"\xff" * 10  # within its compressed bytes: a CRC or inflate error
    response = client.post(f"/browsers/{session_id}/fs/upload_zip", content_type="multipart/form-data", data={
        "dest_path": "/tmp/out", "zip_file": (io.BytesIO(bytes(archive)), "a.zip")})
    assert response.status_code == 400 and "'bad'" in response.get_json()["message"]
    [forwarded] = eventually(lambda: host.calls)
    assert forwarded.size < int(forwarded.headers["content-length"])  # the agent's body ended short


def test_watch_events_are_relayed_as_they_come_with_last_event_id_passed_on(agent, client):
    host, session_id = agent
    held = threading.Event()
    event = {"type": "CREATE", "path": "/tmp/a", "name": "a", "is_dir": False}
    host.answers["fs/watch/w_1/events"] = event_stream([(8, event)], keep_open=held)
    response = client.get(f"/browsers/{session_id}/fs/watch/w_1/events", headers={"Last-Event-ID": "7"},
                          buffered=False)
    assert response.status_code == 200 and response.mimetype == "text/event-stream"
    received = b""
    for chunk in response.response:  # the frame arrives while the agent's stream is still open
        received += chunk
        if b"\n\n" in received.partition(b"id:")[2]:
            break
    held.set()
    response.close()
    assert f"id: 8\ndata: {json.dumps(event)}\n\n".encode() in received
    assert host.calls[0].headers["last-event-id"] == "7"


def test_the_sdk_reads_watch_events_and_an_overflow_notice(agent, sdk):
    host, session_id = agent
    created = {"type": "CREATE", "path": "/tmp/w/a", "name": "a", "is_dir": False}
    overflow = {"type": "WRITE", "path": "/tmp/w", "name": "w", "is_dir": True, "overflow": True, "dropped": 12}
    host.answers["fs/watch/w_1/events"] = event_stream([(1, overflow), (14, created)])
    with sdk.browsers.fs.watch.events("w_1", id_or_name=session_id) as events:  # validated by the SDK's model
        received = list(events)
    assert [(event.type, event.path, event.is_dir) for event in received] == [("WRITE", "/tmp/w", True),
                                                                            ("CREATE", "/tmp/w/a", False)]
    assert (received[0].overflow, received[0].dropped) == (True, 12)


def test_a_watch_stream_takes_its_slot_before_the_agent_is_asked(agent, client, monkeypatch):
    host, session_id = agent

    def full(org_id):
        raise ApiError(503, "too_many_streams", "no slot")

    monkeypatch.setattr(streamslots, "admit", full)
    response = client.get(f"/browsers/{session_id}/fs/watch/w_1/events")
    assert response.status_code == 503 and response.get_json()["code"] == "too_many_streams"
    assert host.calls == []


def test_an_event_stream_is_the_sessions_activity_while_its_frames_flow_even_when_recording_it_fails(
        agent, client, monkeypatch, caplog):
    host, session_id = agent
    touched = []

    def touch(session):  # the call's own (views.find) goes through; those while its frames flow fail
        touched.append(session.id)
        if len(touched) > 1:
            raise RuntimeError("the database is gone")

    monkeypatch.setattr(session_agent, "ACTIVITY_SHARE", 0)  # every frame is a moment to record it
    monkeypatch.setattr(lifecycle, "touch", touch)
    event = {"type": "CREATE", "path": "/tmp/a", "name": "a", "is_dir": False}
    host.answers["fs/watch/w_1/events"] = event_stream([(1, event), (2, event), (3, event)])
    with client.get(f"/browsers/{session_id}/fs/watch/w_1/events") as response:  # closed: its slot given back
        assert response.status_code == 200 and response.get_data().count(b"data: ") == 3  # never cut
    assert len(touched) >= 3 and set(touched) == {session_id}  # the call's, one as a frame came, one at the end
    assert any("recording its activity failed" in r.getMessage() for r in caplog.records)


def test_a_watch_id_that_could_change_the_forwarded_path_is_404(agent, client):
    host, session_id = agent
    for watch_id in ("..", "a.b", "a%3Fb"):
        assert client.delete(f"/browsers/{session_id}/fs/watch/{watch_id}").status_code == 404
    assert host.calls == []
