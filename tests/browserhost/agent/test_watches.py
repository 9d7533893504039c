"""The agent's file watches on the real agent and real inotify: the events of each kind, recursion into new
folders, several readers, resume with Last-Event-ID, overflow, the limit of watches, the end of a stopped watch,
and the one inotify instance all the agent's watches share (a folder two watches cover has one kernel watch)."""
import os
import socket
import threading
import time
from pathlib import Path

import pytest
from kernel.types.browsers.fs.watch_events_response import WatchEventsResponse

from browserhost.agent import watches
from browserhost.agent.http import AgentError
from tests.browserhost.agent.sse import frames

READ_SECONDS = 10.0  # an event awaited this long is not coming: the test fails rather than hangs


def start(agent, path, recursive=False) -> str:
    answer = agent.call("POST", "/fs/watch", json_body={"path": str(path), "recursive": recursive})
    assert answer.status == 200, answer.body
    return answer.json()["watch_id"]


def events(agent, watch_id, last_event_id=None):
    headers = {"Last-Event-ID": str(last_event_id)} if last_event_id is not None else {}
    return agent.open("GET", f"/fs/watch/{watch_id}/events", headers=headers, timeout=READ_SECONDS)


def collect(answer, count: int, seconds: float = READ_SECONDS):
    """The next `count` events of a stream (keep-alives skipped), each checked with the SDK's own model under
    strict validation; AssertionError when they do not come within `seconds` (the socket's timeout bounds each
    read)."""
    found, deadline = [], time.monotonic() + seconds
    try:
        for frame in frames(answer):
            if frame.data is not None:
                WatchEventsResponse.model_validate(frame.data, strict=True)
                found.append(frame)
                if len(found) == count:
                    return found
            if time.monotonic() > deadline:
                break
    except (socket.timeout, TimeoutError):
        pass
    raise AssertionError(f"{count} events did not come; got {[frame.data for frame in found]}")


def kinds(found):
    return [(frame.data["type"], frame.data["path"]) for frame in found]


def stop(agent, watch_id):
    assert agent.call("DELETE", f"/fs/watch/{watch_id}").status == 204


def test_a_watch_sees_create_write_delete_and_rename(agent, tmp_path):
    watch_id = start(agent, tmp_path)
    stream = events(agent, watch_id)
    (tmp_path / "a.txt").write_text("hello")
    os.rename(tmp_path / "a.txt", tmp_path / "b.txt")
    (tmp_path / "b.txt").unlink()
    (tmp_path / "folder").mkdir()
    found = collect(stream, 6)
    assert kinds(found) == [("CREATE", f"{tmp_path}/a.txt"), ("WRITE", f"{tmp_path}/a.txt"),
                            ("RENAME", f"{tmp_path}/a.txt"), ("CREATE", f"{tmp_path}/b.txt"),
                            ("DELETE", f"{tmp_path}/b.txt"), ("CREATE", f"{tmp_path}/folder")]
    assert found[0].data == {"type": "CREATE", "path": f"{tmp_path}/a.txt", "name": "a.txt", "is_dir": False}
    assert found[-1].data["is_dir"] is True
    assert [frame.id for frame in found] == [1, 2, 3, 4, 5, 6]
    stop(agent, watch_id)
    stream.close()


def test_a_recursive_watch_follows_new_folders(agent, tmp_path):
    (tmp_path / "old").mkdir()
    watch_id = start(agent, tmp_path, recursive=True)
    stream = events(agent, watch_id)
    (tmp_path / "old" / "x").write_bytes(b"")
    (tmp_path / "new" / "deeper").mkdir(parents=True)
    # A folder's CREATE is told once the folder is watched: what is made in it after is told too.
    assert kinds(collect(stream, 3)) == [("CREATE", f"{tmp_path}/old/x"), ("CREATE", f"{tmp_path}/new"),
                                         ("CREATE", f"{tmp_path}/new/deeper")]
    (tmp_path / "new" / "deeper" / "y").write_bytes(b"1")
    assert kinds(collect(stream, 2)) == [("CREATE", f"{tmp_path}/new/deeper/y"),
                                         ("WRITE", f"{tmp_path}/new/deeper/y")]
    stop(agent, watch_id)
    stream.close()


def test_a_plain_watch_does_not_look_into_folders(agent, tmp_path):
    (tmp_path / "sub").mkdir()
    watch_id = start(agent, tmp_path)
    stream = events(agent, watch_id)
    (tmp_path / "sub" / "hidden").write_bytes(b"")
    (tmp_path / "seen").write_bytes(b"")
    assert kinds(collect(stream, 1)) == [("CREATE", f"{tmp_path}/seen")]
    stop(agent, watch_id)
    stream.close()


def test_many_writes_to_one_file_are_one_write_until_read(agent, tmp_path):
    watch_id = start(agent, tmp_path)
    with open(tmp_path / "log", "wb", buffering=0) as file:
        for _ in range(2000):
            file.write(b"x")
    (tmp_path / "after").write_bytes(b"")
    found = kinds(collect(events(agent, watch_id), 3))
    assert found == [("CREATE", f"{tmp_path}/log"), ("WRITE", f"{tmp_path}/log"), ("CREATE", f"{tmp_path}/after")]
    stop(agent, watch_id)


def test_every_reader_sees_every_event_and_resumes(agent, tmp_path):
    watch_id = start(agent, tmp_path)
    first, second = events(agent, watch_id), events(agent, watch_id)
    for name in ("one", "two", "three"):
        (tmp_path / name).mkdir()
    seen_first, seen_second = collect(first, 3), collect(second, 3)
    assert seen_first == seen_second
    resumed = collect(events(agent, watch_id, seen_first[0].id), 2)
    assert resumed == seen_first[1:]
    late = collect(events(agent, watch_id), 3)
    assert late == seen_first
    for bad in ("x", "99"):
        answer = agent.call("GET", f"/fs/watch/{watch_id}/events", headers={"Last-Event-ID": bad})
        assert (answer.status, answer.json()["code"]) == (400, "invalid_last_event_id")
    stop(agent, watch_id)


def test_the_buffer_drops_the_oldest_and_says_how_many(agent, tmp_path):
    watch_id = start(agent, tmp_path)
    total = watches.BUFFER_EVENTS + 200
    for index in range(total):
        (tmp_path / f"d{index}").mkdir()
    wait = time.monotonic() + 10
    while True:  # the agent reads inotify's queue on its own pace
        found = collect(events(agent, watch_id), 1)
        if found[0].data.get("overflow") and found[0].data["dropped"] == 200:
            break
        assert time.monotonic() < wait, found
        time.sleep(0.1)
    joined = collect(events(agent, watch_id), watches.BUFFER_EVENTS + 1)
    assert joined[0].data == {"type": "WRITE", "path": str(tmp_path), "name": tmp_path.name, "is_dir": True,
                              "overflow": True, "dropped": 200} and joined[0].id == 200
    assert joined[1].data["path"] == f"{tmp_path}/d200" and joined[-1].data["path"] == f"{tmp_path}/d{total - 1}"
    resumed = collect(events(agent, watch_id, 150), 2)
    assert resumed[0].data["dropped"] == 50 and resumed[1].data["path"] == f"{tmp_path}/d200"
    stop(agent, watch_id)


def test_a_stopped_watch_ends_its_streams_and_is_gone(agent, tmp_path):
    watch_id = start(agent, tmp_path)
    stream = events(agent, watch_id)
    ended = threading.Event()

    def read():
        list(frames(stream))
        ended.set()

    threading.Thread(target=read, daemon=True).start()
    time.sleep(0.2)
    stop(agent, watch_id)
    assert ended.wait(5)
    assert agent.call("GET", f"/fs/watch/{watch_id}/events").status == 404
    assert agent.call("DELETE", f"/fs/watch/{watch_id}").status == 404


def test_at_most_16_watches(agent, tmp_path):
    ids = [start(agent, tmp_path) for _ in range(watches.MAX_WATCHES)]
    answer = agent.call("POST", "/fs/watch", json_body={"path": str(tmp_path)})
    assert (answer.status, answer.json()["code"]) == (400, "too_many_watches")
    stop(agent, ids.pop())
    ids.append(start(agent, tmp_path))
    for watch_id in ids:
        stop(agent, watch_id)


def inotify_instances(pid: int) -> list[str]:
    """The fds of a process's inotify instances."""
    found = []
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            if os.readlink(fd) == "anon_inode:inotify":
                found.append(fd.name)
        except FileNotFoundError:  # closed meanwhile
            pass
    return found


def kernel_watches(pid: int) -> int:
    """The kernel watches of a process's one inotify instance."""
    (fd,) = inotify_instances(pid)
    return sum(line.startswith("inotify wd:") for line in Path(f"/proc/{pid}/fdinfo/{fd}").read_text().splitlines())


def wait_for_no_instance(pid: int):
    deadline = time.monotonic() + 5  # the reader thread closes the instance once woken
    while inotify_instances(pid):
        assert time.monotonic() < deadline, inotify_instances(pid)
        time.sleep(0.02)


def test_16_watches_share_one_inotify_instance(agent, tmp_path):
    assert inotify_instances(agent.pid) == []
    folders = [tmp_path / f"f{index}" for index in range(watches.MAX_WATCHES)]
    for folder in folders:
        folder.mkdir()
    ids = [start(agent, folder) for folder in folders]
    assert len(inotify_instances(agent.pid)) == 1 and kernel_watches(agent.pid) == watches.MAX_WATCHES
    streams = [events(agent, watch_id) for watch_id in ids]
    for folder in folders:
        (folder / "new").write_bytes(b"")
    for folder, stream in zip(folders, streams, strict=True):  # each watch is told of its own folder only
        assert kinds(collect(stream, 1)) == [("CREATE", f"{folder}/new")]
    for watch_id, stream in zip(ids, streams, strict=True):
        stop(agent, watch_id)
        stream.close()
    wait_for_no_instance(agent.pid)


def test_two_watches_of_one_folder_share_its_kernel_watch(agent, tmp_path):
    plain, recursive = start(agent, tmp_path), start(agent, tmp_path, recursive=True)
    assert kernel_watches(agent.pid) == 1
    plain_stream, recursive_stream = events(agent, plain), events(agent, recursive)
    (tmp_path / "one").write_bytes(b"")
    assert kinds(collect(plain_stream, 1)) == kinds(collect(recursive_stream, 1)) == [("CREATE", f"{tmp_path}/one")]
    stop(agent, plain)
    assert list(frames(plain_stream)) == []  # its stream ended
    assert kernel_watches(agent.pid) == 1  # still used by the other
    (tmp_path / "two").write_bytes(b"")
    assert kinds(collect(recursive_stream, 1)) == [("CREATE", f"{tmp_path}/two")]
    stop(agent, recursive)
    recursive_stream.close()
    wait_for_no_instance(agent.pid)


def test_the_instance_closes_with_the_last_watch_and_opens_with_the_next(agent, tmp_path):
    first, second = start(agent, tmp_path), start(agent, tmp_path)
    stop(agent, first)
    assert len(inotify_instances(agent.pid)) == 1
    stop(agent, second)
    wait_for_no_instance(agent.pid)
    again = start(agent, tmp_path)
    assert len(inotify_instances(agent.pid)) == 1
    stream = events(agent, again)
    (tmp_path / "after").mkdir()
    assert kinds(collect(stream, 1)) == [("CREATE", f"{tmp_path}/after")]
    stop(agent, again)
    stream.close()
    wait_for_no_instance(agent.pid)


@pytest.mark.parametrize(("body", "status", "code"), [
    ({"path": "relative"}, 400, "invalid_path"),
    ({"path": ""}, 400, "invalid_path"),
    ({"path": "/a\0b"}, 400, "invalid_path"),
    ({"path": "/run/lantern"}, 400, "path_not_allowed"),
    ({"path": "/proc"}, 400, "path_not_watchable"),
    ({"path": "/proc/self"}, 400, "path_not_watchable"),
    ({"path": "/sys/kernel"}, 400, "path_not_watchable"),
    ({"path": "/dev/fd"}, 400, "path_not_watchable"),  # a link to /proc/self/fd
    ({"path": "/no/such/folder"}, 404, "not_found"),
    ({"path": "/tmp", "recursive": "yes"}, 400, "invalid_recursive"),
    ({}, 400, "invalid_path"),
])
def test_bad_watches_are_refused(agent, body, status, code):
    answer = agent.call("POST", "/fs/watch", json_body=body)
    assert (answer.status, answer.json()["code"]) == (status, code)


def test_deleting_the_watched_folder_is_told(agent, tmp_path):
    folder = tmp_path / "watched"
    folder.mkdir()
    (folder / "inside").write_bytes(b"")
    watch_id = start(agent, folder, recursive=True)
    stream = events(agent, watch_id)
    (folder / "inside").unlink()
    folder.rmdir()
    found = collect(stream, 2)
    assert kinds(found) == [("DELETE", f"{folder}/inside"), ("DELETE", str(folder))]
    assert found[1].data["is_dir"] is True
    stop(agent, watch_id)
    stream.close()


def test_a_folder_renamed_inside_a_recursive_watch_is_told_under_its_new_name(agent, tmp_path):
    (tmp_path / "before").mkdir()
    watch_id = start(agent, tmp_path, recursive=True)
    stream = events(agent, watch_id)
    os.rename(tmp_path / "before", tmp_path / "after")
    assert kinds(collect(stream, 2)) == [("RENAME", f"{tmp_path}/before"), ("CREATE", f"{tmp_path}/after")]
    (tmp_path / "after" / "file").write_bytes(b"")
    assert kinds(collect(stream, 1)) == [("CREATE", f"{tmp_path}/after/file")]
    stop(agent, watch_id)
    stream.close()


@pytest.fixture
def few_folders(monkeypatch):
    """Watches made in this process, with a limit of 3 watched folders."""
    monkeypatch.setattr("browserhost.agent.inotify.MAX_WATCHED_FOLDERS", 3)
    monkeypatch.setattr(watches, "WATCHES", watches.Watches())
    return watches.WATCHES


def test_a_tree_past_the_watched_folders_limit_is_refused(few_folders, tmp_path):
    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
    with pytest.raises(AgentError) as refusal:
        few_folders.start(str(tmp_path), recursive=True)
    assert (refusal.value.status, refusal.value.code) == (400, "too_many_watched_folders")
    assert few_folders.inotify is None and not few_folders.watches  # the instance closed: no watch uses it


def test_a_new_folder_past_the_limit_is_told_as_an_overflow(few_folders, tmp_path):
    (tmp_path / "a").mkdir()
    watch = few_folders.start(str(tmp_path), recursive=True)
    inotify = few_folders.inotify
    assert inotify.kernel_watches() == 2
    reader = watch.journal.follow(0, dict, dict, keep_alive=READ_SECONDS)
    (tmp_path / "b").mkdir()
    assert next(reader)[1] == {"type": "CREATE", "path": f"{tmp_path}/b", "name": "b", "is_dir": True}
    (tmp_path / "c").mkdir()
    notice, created = next(reader)[1], next(reader)[1]
    assert notice == {"type": "WRITE", "path": f"{tmp_path}/c", "name": "c", "is_dir": True, "overflow": True,
                      "dropped": 0}
    assert created["path"] == f"{tmp_path}/c" and inotify.kernel_watches() == 3
    WatchEventsResponse.model_validate(notice, strict=True)
    (tmp_path / "b").rmdir()  # its watch goes, and with it its count
    assert next(reader)[1]["type"] == "DELETE"
    assert inotify.kernel_watches() == 2
    few_folders.stop(watch.id)
    assert few_folders.inotify is None and inotify.kernel_watches() == 0


def test_a_folder_two_watches_cover_counts_once(few_folders, tmp_path):
    (tmp_path / "a").mkdir()
    first = few_folders.start(str(tmp_path), recursive=True)
    second = few_folders.start(str(tmp_path), recursive=True)
    third = few_folders.start(str(tmp_path / "a"), recursive=False)
    assert few_folders.inotify.kernel_watches() == 2
    (tmp_path / "b").mkdir()  # the third kernel watch, shared by both recursive watches
    for watch in (first, second):
        reader = watch.journal.follow(0, dict, dict, keep_alive=READ_SECONDS)
        assert next(reader)[1]["path"] == f"{tmp_path}/b"
    assert few_folders.inotify.kernel_watches() == 3
    for watch in (first, second, third):
        few_folders.stop(watch.id)
    assert few_folders.inotify is None


def test_a_recursive_watch_of_the_root_leaves_proc_and_sys_out(monkeypatch):
    walked = []
    monkeypatch.setattr(watches.os, "walk", lambda top: fake_walk(top, walked))
    watch = watches.Watch.__new__(watches.Watch)
    watch.folders, watch.announced = {}, set()
    monkeypatch.setattr(watch, "add_folder", lambda folder, mask: None, raising=False)
    watch.add_tree("/", announce=False)
    assert walked == ["/"]


def fake_walk(top, walked):
    walked.append(top)
    folders = ["proc", "sys"]
    yield top, folders, []
    for name in folders:  # os.walk walks what is left of the list after the caller's pruning
        yield from fake_walk(os.path.join(top, name), walked)
