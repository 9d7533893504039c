"""A session's files (#37) through the official SDKs on real Chromium: Kernel's download flow (CDP download into a
folder, then `fs.list_files` and `fs.read_file`), its upload flow (`fs.upload`, then `DOM.setFileInputFiles`), a
folder's zip both ways, a watch resumed with Last-Event-ID, every refusal of a bad path, a write past the
session's room and a zip that reaches outside its folder; and Kernel's TypeScript SDK (tests/ts/).

One session serves the module (the live conftest's `client` and `session`)."""
import base64
import hashlib
import io
import json
import os
import re
import shutil
import stat
import subprocess
import zipfile
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from tests.browsers.live.tenants import refusal, refused
from tests.fakes import LocalServer
from tests.live_server import ROOT, cannot_sandbox

pytestmark = pytest.mark.skipif(bool(cannot_sandbox()), reason=f"this machine cannot sandbox: {cannot_sandbox()}")

DOWNLOADS = "/home/kernel/Downloads"  # Kernel's download folder, as its docs name it
REPORT = b"id,total\n" + b"".join(b"%d,%d\n" % (n, n * n) for n in range(5000))
PAGE = b"<!doctype html><title>files</title><a id=download href='/report.csv'>report</a><input id=pick type=file>"
TS_PROJECT = ROOT / "tests" / "ts"
GIB = 1024 * 1024 * 1024


class Pages(LocalServer):
    """A page with a download link and a file input; /report.csv offered as an attachment."""

    def get(self, handler):
        if handler.path != "/report.csv":
            return handler.answer(200, PAGE, "text/html")
        handler.send_response(200)
        handler.send_header("Content-Type", "text/csv")
        handler.send_header("Content-Disposition", 'attachment; filename="report.csv"')
        handler.send_header("Content-Length", str(len(REPORT)))
        handler.end_headers()
        handler.wfile.write(REPORT)


def missing(client, session_id, path):
    return refusal(lambda: client.browsers.fs.file_info(session_id, path=path))[0] == 404


@pytest.fixture(scope="module")
def browser(session):
    with sync_playwright() as playwright:
        connected = playwright.chromium.connect_over_cdp(session.cdp_ws_url)
        yield connected
        connected.close()


@pytest.fixture(scope="module")
def pages():
    server = Pages().start()
    yield server
    server.stop()


def test_kernels_download_flow_leaves_the_file_where_list_files_and_read_file_find_it(client, session, browser,
                                                                                        pages):
    cdp = browser.new_browser_cdp_session()
    progress = []
    cdp.on("Browser.downloadProgress", lambda event: progress.append(event))
    cdp.send("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": DOWNLOADS, "eventsEnabled": True})
    page = browser.contexts[0].new_page()
    page.goto(f"{pages.url}/")
    page.click("#download")
    for _ in range(150):  # Playwright hands events over while it waits
        if any(event["state"] != "inProgress" for event in progress):
            break
        page.wait_for_timeout(100)
    assert [event["state"] for event in progress if event["state"] != "inProgress"] == ["completed"]
    page.close()
    cdp.detach()

    listed = client.browsers.fs.list_files(session.session_id, path=DOWNLOADS)
    [report] = [info for info in listed if info.name == "report.csv"]
    assert (report.is_dir, report.size_bytes, report.path) == (False, len(REPORT), f"{DOWNLOADS}/report.csv")
    assert re.fullmatch(r"-rw.......", report.mode)
    assert client.browsers.fs.read_file(session.session_id, path=report.path).read() == REPORT
    # The same file, as a process of the session sees it.
    shown = client.browsers.process.exec(session.session_id, command="cat", args=[report.path])
    assert (shown.exit_code, base64.b64decode(shown.stdout_b64)) == (0, REPORT)


def test_a_file_uploaded_is_what_a_page_reads_through_its_file_input(client, session, browser, pages):
    note, data = "a note for the page\n", os.urandom(70_000)
    client.browsers.fs.upload(session.session_id, files=[
        {"file": ("note.txt", note.encode()), "dest_path": "/home/kernel/uploads/note.txt"},
        {"file": ("data.bin", data), "dest_path": "/tmp/uploaded/data.bin"}])
    assert client.browsers.fs.read_file(session.session_id, path="/tmp/uploaded/data.bin").read() == data

    page = browser.contexts[0].new_page()
    page.goto(f"{pages.url}/")
    cdp = page.context.new_cdp_session(page)
    root = cdp.send("DOM.getDocument")["root"]["nodeId"]
    node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": "#pick"})["nodeId"]
    cdp.send("DOM.setFileInputFiles", {"nodeId": node, "files": ["/home/kernel/uploads/note.txt"]})
    assert page.evaluate("(async () => { const file = pick.files[0]; "
                         "return [file.name, file.size, await file.text()] })()") == ["note.txt", len(note), note]
    page.close()


def test_a_folder_zipped_out_unzips_into_another_with_the_same_files(client, session):
    fs, sid = client.browsers.fs, session.session_id
    files = {"a.txt": b"first\n", "sub/b.bin": os.urandom(200_000), "sub/deeper/c.txt": b"third\n"}
    for name, body in files.items():
        fs.write_file(sid, body, path=f"/tmp/zipped/{name}")
    archive = fs.download_dir_zip(sid, path="/tmp/zipped").read()
    with zipfile.ZipFile(io.BytesIO(archive)) as opened:
        assert opened.testzip() is None
        found = {info.filename: opened.read(info) for info in opened.infolist() if not info.is_dir()}
    assert found == files

    fs.upload_zip(sid, dest_path="/home/kernel/unzipped", zip_file=("zipped.zip", archive))
    listed = {(info.name, info.is_dir) for info in fs.list_files(sid, path="/home/kernel/unzipped")}
    assert listed == {("a.txt", False), ("sub", True)}
    assert {info.name for info in fs.list_files(sid, path="/home/kernel/unzipped/sub")} == {"b.bin", "deeper"}
    for name, body in files.items():
        assert fs.read_file(sid, path=f"/home/kernel/unzipped/{name}").read() == body


def sse_frames(response):
    """(id, data) of each frame of an SSE answer read line by line (comments skipped)."""
    frame = {}
    for line in response.iter_lines():
        if not line:
            if "data" in frame:
                yield int(frame["id"]), json.loads(frame["data"])
            frame = {}
        elif not line.startswith(":"):
            field, _, value = line.partition(":")
            frame[field] = value.removeprefix(" ")


def frames_until(response, done):
    seen = []
    for frame in sse_frames(response):
        seen.append(frame)
        if done(frame[1]):
            return seen
    return seen


def test_a_watch_sees_every_change_and_a_reader_resumes_after_the_last_event_it_had(client, session):
    fs, sid = client.browsers.fs, session.session_id
    fs.create_directory(sid, path="/home/kernel/watched")
    watch = fs.watch.start(sid, path="/home/kernel/watched", recursive=True)
    shell = lambda script: client.browsers.process.exec(sid, command="sh", args=["-c", script],  # noqa: E731
                                                        cwd="/home/kernel/watched")
    with fs.watch.with_streaming_response.events(watch.watch_id, id_or_name=sid, timeout=20) as first:
        assert shell("echo one > a.txt; echo two >> a.txt").exit_code == 0
        before = frames_until(first, lambda data: data["type"] == "WRITE")
    assert [data["type"] for _, data in before][0] == "CREATE" and before[0][1]["name"] == "a.txt"

    # While nobody reads: a rename and a delete.
    assert shell("mv a.txt b.txt && mkdir folder && rm b.txt").exit_code == 0
    last_id = before[-1][0]
    with fs.watch.with_streaming_response.events(watch.watch_id, id_or_name=sid, timeout=20,
                                                 extra_headers={"Last-Event-ID": str(last_id)}) as resumed:
        after = frames_until(resumed, lambda data: data["type"] == "DELETE")
    ids = [frame_id for frame_id, _ in after]
    assert ids == list(range(last_id + 1, last_id + 1 + len(after)))  # nothing lost, nothing twice
    seen = {data["type"] for _, data in before + after}
    assert seen >= {"CREATE", "WRITE", "RENAME", "DELETE"}
    assert ("CREATE", "folder", True) in {(d["type"], d["name"], d["is_dir"]) for _, d in after}
    assert ("RENAME", "a.txt") in {(data["type"], data["name"]) for _, data in after}
    assert after[-1][1] == {"type": "DELETE", "name": "b.txt", "path": "/home/kernel/watched/b.txt", "is_dir": False}

    # The SDK's own reader, resuming just before the delete, gets it parsed as its type.
    stream = fs.watch.events(watch.watch_id, id_or_name=sid, extra_headers={"Last-Event-ID": str(ids[-1] - 1)},
                             timeout=20)
    event = next(iter(stream))
    stream.close()
    assert (event.type, event.name, event.is_dir) == ("DELETE", "b.txt", False)

    fs.watch.stop(watch.watch_id, id_or_name=sid)
    assert refusal(lambda: list(fs.watch.events(watch.watch_id, id_or_name=sid, timeout=20)))[0] == 404


def test_paths_other_than_absolute_ones_of_the_session_are_refused_and_nothing_is_written(client, session, browser):
    fs, sid = client.browsers.fs, session.session_id
    fs.write_file(sid, b"mine", path="/tmp/perms.txt")
    calls = {
        "relative write": lambda: fs.write_file(sid, b"x", path="notes.txt"),
        "relative list": lambda: fs.list_files(sid, path="tmp"),
        "empty info": lambda: fs.file_info(sid, path=""),
        "NUL in a query": lambda: fs.read_file(sid, path="/tmp/a\x00b"),
        "NUL in a body": lambda: fs.create_directory(sid, path="/tmp/x\x00y"),
        "3 MB in a body": lambda: fs.create_directory(sid, path="/tmp/" + "a" * 3_000_000),
        "6 kB in a query": lambda: fs.file_info(sid, path="/tmp/" + "b" * 6000),
        "DevTools' folder listed": lambda: fs.list_files(sid, path="/run/lantern"),
        "DevTools' folder deleted": lambda: fs.delete_directory(sid, path="/run/lantern"),
        "written into it": lambda: fs.write_file(sid, b"x", path="/run/lantern/x"),
        "reached through ..": lambda: fs.write_file(sid, b"x", path="/tmp/../run/lantern/y"),
        "moved into it": lambda: fs.move(sid, src_path="/tmp/perms.txt", dest_path="/run/lantern/perms.txt"),
        "another owner": lambda: fs.set_file_permissions(sid, path="/tmp/perms.txt", mode="600", owner="root"),
        "another group": lambda: fs.set_file_permissions(sid, path="/tmp/perms.txt", mode="600", group="0"),
    }
    outcomes = {name: refusal(call) for name, call in calls.items()}
    assert {name: status for name, (status, _) in outcomes.items()} == {name: 400 for name in calls}
    # A URL past gunicorn's longest request line is refused before the app (gunicorn.conf.py), in the same shape.
    assert refusal(lambda: fs.read_file(sid, path="/tmp/" + "c" * 60_000))[0] in (400, 414)

    assert fs.file_info(sid, path="/tmp/perms.txt").mode == "-rw-r--r--"  # unchanged by the refusals
    fs.set_file_permissions(sid, path="/tmp/perms.txt", mode="600", owner="kernel", group="kernel")  # its own
    assert fs.file_info(sid, path="/tmp/perms.txt").mode == "-rw-------"
    assert all(missing(client, sid, path) for path in ("/home/kernel/notes.txt", "/tmp/x"))
    assert {info.name for info in fs.list_files(sid, path="/tmp")} >= {"perms.txt"}
    assert browser.contexts[0].new_page().evaluate("1 + 1") == 2  # its DevTools still answer


def sparse_file(folder, size):
    """A file of `size` zero bytes that takes no room on disk."""
    path = Path(folder) / "sparse.bin"
    with open(path, "wb") as file:
        file.truncate(size)
    return path


def test_a_write_larger_than_the_session_can_hold_is_refused_before_anything_is_written(client, session, browser,
                                                                                          tmp_path):
    fs, sid = client.browsers.fs, session.session_id
    # What a process stores counts: 600 MiB of the 768 MiB a headless session's processes and files may hold.
    filled = client.browsers.process.exec(sid, command="sh", args=["-c", "head -c 600M /dev/zero > /tmp/filler"])
    assert filled.exit_code == 0
    try:
        big = sparse_file(tmp_path, 256 * 1024 * 1024)
        with open(big, "rb") as body:
            answer = refused(lambda: fs.write_file(sid, body, path="/home/kernel/big.bin"), 413)
        assert answer["code"] == "insufficient_room"
        assert 0 < answer["room_bytes"] < 168 * 1024 * 1024 and f"{answer['room_bytes']} bytes" in answer["message"]
        with open(big, "rb") as body:
            uploaded = refused(lambda: fs.upload(sid, files=[{"file": ("big.bin", body),
                                                               "dest_path": "/tmp/big.bin"}]), 413)
        assert uploaded["code"] == "insufficient_room" and 0 < uploaded["room_bytes"] < 168 * 1024 * 1024
        assert missing(client, sid, "/home/kernel/big.bin") and missing(client, sid, "/tmp/big.bin")
        leftovers = [info.name for folder in ("/home/kernel", "/tmp") for info in fs.list_files(sid, path=folder)
                     if info.name not in ("filler", "perms.txt") and not info.is_dir]
        assert leftovers == []  # no temporary either
    finally:
        fs.delete_file(sid, path="/tmp/filler")
    fs.write_file(sid, os.urandom(1024 * 1024), path="/home/kernel/fits.bin")  # what fits is written
    assert fs.file_info(sid, path="/home/kernel/fits.bin").size_bytes == 1024 * 1024
    assert browser.contexts[0].new_page().evaluate("1 + 1") == 2


def zip_of(entries):
    """A zip of (name, bytes) entries; a bytes of None makes the name a symbolic link to /etc/passwd."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for name, body in entries:
            if body is None:
                link = zipfile.ZipInfo(name)
                link.external_attr = (stat.S_IFLNK | 0o777) << 16
                archive.writestr(link, "/etc/passwd")
            elif isinstance(body, int):  # that many zero bytes, written without holding them
                with archive.open(name, "w", force_zip64=True) as entry:
                    for _ in range(body // (16 * 1024 * 1024)):
                        entry.write(bytes(16 * 1024 * 1024))
            else:
                archive.writestr(name, body)
    return buffer.getvalue()


def test_a_zip_reaching_outside_its_folder_or_past_the_room_is_refused_naming_the_entry(client, session):
    fs, sid = client.browsers.fs, session.session_id
    bad = {"../escaped.txt": b"out", "/tmp/absolute.txt": b"out", "sub/../../escaped.txt": b"out",
           "link": None, "huge.bin": GIB}
    for name, body in bad.items():
        archive = zip_of([("good.txt", b"fine"), (name, body)])
        answer = refused(lambda a=archive: fs.upload_zip(sid, dest_path="/home/kernel/unpacked",
                                                         zip_file=("bad.zip", a)))
        assert name in answer["message"], (name, answer)
    # All or nothing: not even the good entry was written, nor anything outside.
    assert all(missing(client, sid, path) for path in ("/home/kernel/unpacked/good.txt", "/home/kernel/escaped.txt",
                                                        "/tmp/absolute.txt", "/home/kernel/unpacked/link"))


@pytest.mark.skipif(shutil.which("node") is None, reason="no node (make install-test installs Debian's)")
def test_the_typescript_sdk_writes_reads_uploads_and_runs_processes(lantern, client, session):
    if not (TS_PROJECT / "node_modules" / "@onkernel" / "sdk").exists():
        pytest.skip("Kernel's TypeScript SDK is not installed: make install-test runs npm ci in tests/ts")
    ran = subprocess.run(["node", "files_and_processes.mjs"], cwd=TS_PROJECT, capture_output=True, text=True,
                         timeout=120, env={**os.environ, "KERNEL_BASE_URL": lantern.base_url,
                                           "KERNEL_API_KEY": client.api_key, "LANTERN_SESSION_ID": session.session_id})
    assert ran.returncode == 0, ran.stderr
    seen = json.loads(ran.stdout.splitlines()[-1])
    assert seen["streamed"] == {"stdout": "one\n", "stderr": "two\n"}
    # What it wrote, as the Python SDK reads it.
    data = client.browsers.fs.read_file(session.session_id, path=f"{seen['folder']}/data.bin").read()
    assert hashlib.sha256(data).hexdigest() == seen["digest"] and len(data) == 300 * 1024
