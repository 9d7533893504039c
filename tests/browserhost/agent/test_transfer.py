"""The agent's byte-moving calls through the real agent: streamed reads and zips, writes and put_files that are
checked against the room first and leave nothing half-written."""
import errno
import hashlib
import io
import json
import os
import socket
import stat
import threading
import time
import zipfile
from pathlib import Path
from urllib.parse import quote

import pytest

from browserhost.agent.transfer import Staging

MIB = 1024 * 1024


def q(path) -> str:
    return quote(str(path))


def leftovers(folder) -> list[str]:
    return [name for name in os.listdir(folder) if name.endswith(".part")]


def write(agent, path, data: bytes, mode=None, room=None):
    query = f"path={q(path)}" + (f"&mode={mode}" if mode else "")
    return agent.call("PUT", f"/fs/write_file?{query}", body=data, room=room,
                      headers={"Content-Type": "application/octet-stream"})


def put_files(agent, files: list[tuple[str, bytes]], directories=(), room=None, modes=None):
    header = {"files": [{"path": str(path), "size": len(data), **({"mode": modes[i]} if modes else {})}
                        for i, (path, data) in enumerate(files)],
              "directories": [{"path": str(path)} for path in directories]}
    body = json.dumps(header).encode() + b"\n" + b"".join(data for _, data in files)
    return agent.call("POST", "/fs/put_files", body=body, room=room)


def test_read_file_streams_the_bytes_with_a_length(agent, tmp_path):
    data = os.urandom(3 * MIB + 17)
    (tmp_path / "f").write_bytes(data)
    reply = agent.call("GET", f"/fs/read_file?path={q(tmp_path / 'f')}")
    assert reply.status == 200 and reply.body == data
    assert reply.headers["Content-Length"] == str(len(data))
    assert reply.headers["Content-Type"] == "application/octet-stream"


def test_read_file_of_a_fifo_is_400_at_once(agent, tmp_path):
    os.mkfifo(tmp_path / "pipe")
    started = time.monotonic()
    reply = agent.call("GET", f"/fs/read_file?path={q(tmp_path / 'pipe')}", timeout=5)
    assert reply.status == 400 and reply.json()["code"] == "not_a_regular_file"
    assert time.monotonic() - started < 2


def test_read_file_of_a_folder_is_400_and_of_nothing_404(agent, tmp_path):
    assert agent.call("GET", f"/fs/read_file?path={q(tmp_path)}").json()["code"] in ("not_a_regular_file",
                                                                                     "is_a_directory")
    assert agent.call("GET", f"/fs/read_file?path={q(tmp_path / 'none')}").status == 404


def test_download_dir_zip_is_a_chunked_zip_of_the_tree(agent, tmp_path):
    (tmp_path / "sub" / "empty").mkdir(parents=True)
    (tmp_path / "a.txt").write_bytes(b"alpha")
    big = os.urandom(2 * MIB)
    (tmp_path / "sub" / "big.bin").write_bytes(big)
    (tmp_path / "sub" / "big.bin").chmod(0o600)
    (tmp_path / "link").symlink_to("a.txt")
    os.mkfifo(tmp_path / "pipe")  # left out: reading it would block
    reply = agent.call("GET", f"/fs/download_dir_zip?path={q(tmp_path)}")
    assert reply.status == 200 and reply.headers["Content-Type"] == "application/zip"
    assert reply.headers["Transfer-Encoding"] == "chunked"
    archive = zipfile.ZipFile(io.BytesIO(reply.body))
    assert archive.testzip() is None
    assert set(archive.namelist()) == {"a.txt", "link", "sub/", "sub/big.bin", "sub/empty/"}
    assert archive.read("a.txt") == b"alpha" and archive.read("sub/big.bin") == big
    link = archive.getinfo("link")
    assert stat.S_ISLNK(link.external_attr >> 16) and archive.read("link") == b"a.txt"
    assert stat.S_IMODE(archive.getinfo("sub/big.bin").external_attr >> 16) == 0o600


def test_download_dir_zip_of_a_file_is_400(agent, tmp_path):
    (tmp_path / "f").write_text("x")
    assert agent.call("GET", f"/fs/download_dir_zip?path={q(tmp_path / 'f')}").status == 400


def test_write_file_makes_parents_and_applies_the_mode(agent, tmp_path):
    target = tmp_path / "new" / "deeper" / "f.bin"
    reply = write(agent, target, b"payload", mode="600")
    assert reply.status == 201 and reply.body == b""
    assert target.read_bytes() == b"payload" and stat.S_IMODE(target.stat().st_mode) == 0o600
    assert write(agent, target, b"second").status == 201
    assert target.read_bytes() == b"second" and stat.S_IMODE(target.stat().st_mode) == 0o644
    assert leftovers(target.parent) == []


def test_write_file_without_a_length_is_411(agent, tmp_path):
    reply = agent.call("PUT", f"/fs/write_file?path={q(tmp_path / 'f')}", body=iter([b"chunk"]))
    assert reply.status == 411 and reply.json()["code"] == "length_required"
    assert not (tmp_path / "f").exists()


def test_write_file_bigger_than_the_room_is_413_and_writes_nothing(agent, tmp_path):
    target = tmp_path / "parent" / "f"
    reply = write(agent, target, b"x" * (4 * MIB), room=1000)
    assert reply.status == 413
    assert reply.json() == {"code": "insufficient_room", "room_bytes": 1000,
                            "message": f"{4 * MIB} bytes do not fit in the session: 1000 bytes left"}
    assert not (tmp_path / "parent").exists()
    assert write(agent, target, b"x" * 1000, room=1000).status == 201  # exactly the room fits


def test_write_file_bigger_than_the_filesystem_is_413_before_any_byte(agent, tmp_path):
    """Only the head is sent: the agent answers from the length alone, with the filesystem's free bytes."""
    head = (f"PUT /fs/write_file?path={q(tmp_path / 'f')} HTTP/1.1\r\nHost: agent\r\n"
            f"Content-Length: {10 ** 15}\r\n\r\n").encode()
    with socket.socket(socket.AF_UNIX) as client:
        client.settimeout(10)
        client.connect(agent.socket_path)
        client.sendall(head)
        answer = client.makefile("rb").read(4096)
    assert answer.startswith(b"HTTP/1.1 413")
    body = json.loads(answer.split(b"\r\n\r\n", 1)[1])
    free = os.statvfs(tmp_path).f_bavail * os.statvfs(tmp_path).f_frsize
    assert body["code"] == "insufficient_room" and abs(body["room_bytes"] - free) < 64 * MIB
    assert os.listdir(tmp_path) == []


def test_write_file_cut_short_leaves_nothing(agent, tmp_path):
    target = tmp_path / "made" / "f"
    head = (f"PUT /fs/write_file?path={q(target)} HTTP/1.1\r\nHost: agent\r\n"
            f"Content-Length: {MIB}\r\n\r\n").encode()
    with socket.socket(socket.AF_UNIX) as client:
        client.settimeout(10)
        client.connect(agent.socket_path)
        client.sendall(head + b"only a part")
        client.shutdown(socket.SHUT_WR)
        answer = client.makefile("rb").read()
    assert answer.startswith(b"HTTP/1.1 400") and b"body_incomplete" in answer
    assert os.listdir(tmp_path) == []  # neither the temporary nor the folder made for it


def test_write_file_onto_a_folder_is_400(agent, tmp_path):
    (tmp_path / "d").mkdir()
    reply = write(agent, tmp_path / "d", b"x")
    assert reply.status == 400 and reply.json()["code"] == "is_a_directory"


@pytest.mark.parametrize("mode", ["999", "rw", "77777"])
def test_write_file_refuses_bad_modes(agent, tmp_path, mode):
    assert write(agent, tmp_path / "f", b"x", mode=mode).json()["code"] == "invalid_mode"
    assert not (tmp_path / "f").exists()


def rss_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(field)


def test_64_mib_write_and_read_keep_the_agent_small(agent, tmp_path):
    size = 64 * MIB
    block = os.urandom(MIB)
    expected = hashlib.sha256(block * 64).hexdigest()
    write(agent, tmp_path / "warm", b"x")  # the first call imports what a call needs
    agent.call("GET", f"/fs/read_file?path={q(tmp_path / 'warm')}")
    with open(f"/proc/{agent.pid}/clear_refs", "w") as refs:
        refs.write("5")  # resets the peak (VmHWM) to the current RSS
    before = rss_kib(agent.pid, "VmRSS")
    reply = agent.call("PUT", f"/fs/write_file?path={q(tmp_path / 'big')}", body=(block for _ in range(64)),
                       headers={"Content-Length": str(size)})
    assert reply.status == 201
    answer = agent.open("GET", f"/fs/read_file?path={q(tmp_path / 'big')}")
    digest = hashlib.sha256()
    while data := answer.read(MIB):
        digest.update(data)
    answer.close()
    assert digest.hexdigest() == expected
    peak = rss_kib(agent.pid, "VmHWM")
    assert (peak - before) * 1024 < 4 * MIB, f"the agent grew by {(peak - before) // 1024} MiB"


def test_put_files_writes_every_file_and_folder(agent, tmp_path):
    reply = put_files(agent, [(tmp_path / "a" / "one", b"first"), (tmp_path / "b" / "two", b"")],
                      directories=[tmp_path / "empty" / "nested"], modes=["600", None])
    assert reply.status == 201, reply.body
    assert (tmp_path / "a" / "one").read_bytes() == b"first"
    assert stat.S_IMODE((tmp_path / "a" / "one").stat().st_mode) == 0o600
    assert (tmp_path / "b" / "two").read_bytes() == b""
    assert (tmp_path / "empty" / "nested").is_dir()


def test_put_files_is_all_or_nothing(agent, tmp_path):
    (tmp_path / "taken").mkdir()
    reply = put_files(agent, [(tmp_path / "new" / "one", b"first"), (tmp_path / "taken", b"second")])
    assert reply.status == 400 and reply.json()["code"] == "is_a_directory"
    assert sorted(os.listdir(tmp_path)) == ["taken"]


def test_put_files_failing_midway_removes_what_it_wrote(agent, tmp_path):
    """The second file's folder is a file: found only when it is written, after the first file's bytes."""
    (tmp_path / "blocker").write_text("x")
    reply = put_files(agent, [(tmp_path / "new" / "one", b"first"), (tmp_path / "blocker" / "two", b"second")])
    assert reply.status == 400
    assert sorted(os.listdir(tmp_path)) == ["blocker"]


def test_put_files_past_the_room_is_413(agent, tmp_path):
    reply = put_files(agent, [(tmp_path / "one", b"x" * 600), (tmp_path / "two", b"y" * 600)], room=1000)
    assert reply.status == 413 and reply.json()["room_bytes"] == 1000
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("header", [b"not json\n", b"[]\n", b'{"files": [{"path": "rel", "size": 1}]}\n',
                                    b'{"files": [{"path": "/tmp/x", "size": -1}]}\n',
                                    b'{"files": [{"path": "/tmp/x", "size": 5}]}\n',
                                    b'{"files": "x"}\n', b'{"files": []}'])
def test_put_files_refuses_bad_headers(agent, header):
    reply = agent.call("POST", "/fs/put_files", body=header + b"x")
    assert reply.status == 400, reply.body
    assert reply.json()["code"] in ("invalid_header", "invalid_path", "sizes_mismatch")


def test_put_files_without_a_length_is_411(agent):
    assert agent.call("POST", "/fs/put_files", body=iter([b'{"files": []}\n'])).status == 411


def test_a_413_reaches_a_client_still_sending(agent, tmp_path):
    """The agent refuses before reading the body and drops what follows, so the answer is not lost to a reset."""
    results = []
    thread = threading.Thread(target=lambda: results.append(write(agent, tmp_path / "f", b"z" * (16 * MIB),
                                                                  room=10)))
    thread.start()
    thread.join(30)
    assert results and results[0].status == 413


def test_put_files_onto_a_folder_it_makes_writes_nothing(agent, tmp_path):
    reply = put_files(agent, [(tmp_path / "one", b"first"), (tmp_path / "same", b"second")],
                      directories=[tmp_path / "same"])
    assert reply.status == 400 and reply.json()["code"] == "is_a_directory"
    assert sorted(os.listdir(tmp_path)) == []


def test_download_dir_zip_names_that_are_not_utf8(agent, tmp_path):
    (tmp_path / os.fsdecode(b"caf\xe9.txt")).write_bytes(b"latin-1 name")
    archive = zipfile.ZipFile(io.BytesIO(agent.call("GET", f"/fs/download_dir_zip?path={q(tmp_path)}").body))
    assert archive.namelist() == ["caf\ufffd.txt"] and archive.read("caf\ufffd.txt") == b"latin-1 name"


def test_download_dir_zip_holds_files_dated_outside_what_zip_can_say(agent, tmp_path):
    """A zip's dates run from 1980 to 2107: a file dated after was an error mid-stream (a cut archive)."""
    for name, year in (("future", 2200), ("past", 1970)):
        (tmp_path / name).write_bytes(name.encode())
        moment = time.mktime((year, 6, 1, 12, 0, 0, 0, 0, -1))
        os.utime(tmp_path / name, (moment, moment))
    archive = zipfile.ZipFile(io.BytesIO(agent.call("GET", f"/fs/download_dir_zip?path={q(tmp_path)}").body))
    assert archive.testzip() is None and archive.read("future") == b"future"
    assert archive.getinfo("future").date_time == (2107, 12, 31, 23, 59, 58)
    assert archive.getinfo("past").date_time == (1980, 1, 1, 0, 0, 0)


def test_a_commit_whose_rename_fails_puts_back_every_target(tmp_path, monkeypatch):
    """The third rename fails: the first target gets its old bytes back, the second (new) goes, nothing else is
    left; the test runs the agent's Staging in this process to make that rename fail."""
    (tmp_path / "old").write_bytes(b"old bytes")
    (tmp_path / "link").symlink_to("old")
    targets = [(tmp_path / "old", b"new bytes"), (tmp_path / "new", b"fresh"), (tmp_path / "link", b"never")]
    real_rename = os.rename

    def failing_rename(source, destination):
        if str(destination) == str(tmp_path / "link"):
            raise OSError(errno.EIO, "made to fail", str(destination))
        real_rename(source, destination)

    monkeypatch.setattr(os, "rename", failing_rename)
    with pytest.raises(OSError), Staging() as staging:
        for path, data in targets:
            staging.write(str(path), 0o644, io.BytesIO(data), len(data))
        staging.commit()
    monkeypatch.undo()
    assert (tmp_path / "old").read_bytes() == b"old bytes" and (tmp_path / "link").readlink() == Path("old")
    assert sorted(os.listdir(tmp_path)) == ["link", "old"]


def test_a_write_in_progress_holds_its_bytes_of_the_room(agent, tmp_path):
    """The host's room counts what is stored; a write still coming in holds its bytes, so a second write at once
    cannot take them too."""
    with socket.socket(socket.AF_UNIX) as first:
        first.settimeout(10)
        first.connect(agent.socket_path)
        first.sendall(f"PUT /fs/write_file?path={q(tmp_path / 'first')} HTTP/1.1\r\nHost: agent\r\n"
                      "Content-Length: 600\r\nX-Lantern-Room: 1000\r\n\r\n".encode() + b"a" * 100)
        deadline = time.monotonic() + 10
        while not leftovers(tmp_path) and time.monotonic() < deadline:  # its temporary: it is writing
            time.sleep(0.01)
        second = write(agent, tmp_path / "second", b"b" * 600, room=1000)
        assert second.status == 413 and second.json()["room_bytes"] == 400
        assert write(agent, tmp_path / "third", b"c" * 400, room=1000).status == 201
        first.sendall(b"a" * 500)
        assert first.makefile("rb").readline().startswith(b"HTTP/1.1 201 ")
    assert write(agent, tmp_path / "fourth", b"d" * 1000, room=1000).status == 201  # held no more
