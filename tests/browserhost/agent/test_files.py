"""The agent's files calls on names and metadata, through the real agent: what they do, and every refusal as a
4xx in the API's shape."""
import os
import pwd
import stat
from datetime import datetime, timezone
from urllib.parse import quote

import pytest

from browserhost.agent.files import go_mode_string
from tests.browserhost.agent.conftest import SESSION_USER


def info(agent, path):
    return agent.call("GET", f"/fs/file_info?path={quote(path)}")


def put(agent, route, **body):
    return agent.call("PUT", f"/fs/{route}", json_body=body)


def test_create_directory_makes_parents_with_the_mode(agent, tmp_path):
    target = tmp_path / "a" / "b" / "c"
    reply = put(agent, "create_directory", path=str(target), mode="700")
    assert reply.status == 201 and reply.body == b""
    assert stat.S_IMODE(target.stat().st_mode) == 0o700
    assert put(agent, "create_directory", path=str(target)).status == 201  # already there: fine


def test_create_directory_default_mode_is_755(agent, tmp_path):
    assert put(agent, "create_directory", path=str(tmp_path / "d")).status == 201
    assert stat.S_IMODE((tmp_path / "d").stat().st_mode) == 0o755


def test_create_directory_over_a_file_is_400(agent, tmp_path):
    (tmp_path / "f").write_text("x")
    reply = put(agent, "create_directory", path=str(tmp_path / "f"))
    assert reply.status == 400 and reply.json()["code"] == "already_exists"


def test_delete_directory_is_recursive_and_404_when_missing(agent, tmp_path):
    (tmp_path / "d" / "e").mkdir(parents=True)
    (tmp_path / "d" / "e" / "f").write_text("x")
    assert put(agent, "delete_directory", path=str(tmp_path / "d")).status == 200
    assert not (tmp_path / "d").exists()
    reply = put(agent, "delete_directory", path=str(tmp_path / "d"))
    assert reply.status == 404 and reply.json()["code"] == "not_found"


def test_delete_directory_of_a_file_is_400(agent, tmp_path):
    (tmp_path / "f").write_text("x")
    reply = put(agent, "delete_directory", path=str(tmp_path / "f"))
    assert reply.status == 400 and reply.json()["code"] == "not_a_directory"
    assert (tmp_path / "f").exists()


def test_delete_directory_of_a_link_removes_only_the_link(agent, tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "kept").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert put(agent, "delete_directory", path=str(tmp_path / "link")).status == 200
    assert not (tmp_path / "link").exists() and (tmp_path / "real" / "kept").exists()


def test_delete_file(agent, tmp_path):
    (tmp_path / "f").write_text("x")
    assert put(agent, "delete_file", path=str(tmp_path / "f")).status == 200
    assert not (tmp_path / "f").exists()
    assert put(agent, "delete_file", path=str(tmp_path / "f")).status == 404
    (tmp_path / "d").mkdir()
    reply = put(agent, "delete_file", path=str(tmp_path / "d"))
    assert reply.status == 400 and reply.json()["code"] == "is_a_directory"
    assert (tmp_path / "d").is_dir()


def test_move_renames_and_makes_the_destination_folder(agent, tmp_path):
    (tmp_path / "f").write_text("moved")
    reply = put(agent, "move", src_path=str(tmp_path / "f"), dest_path=str(tmp_path / "new" / "g"))
    assert reply.status == 200
    assert (tmp_path / "new" / "g").read_text() == "moved" and not (tmp_path / "f").exists()


def test_move_of_a_missing_source_is_404(agent, tmp_path):
    reply = put(agent, "move", src_path=str(tmp_path / "none"), dest_path=str(tmp_path / "g"))
    assert reply.status == 404 and "src_path" in reply.json()["message"]


def test_move_between_filesystems_copies_then_deletes(agent, tmp_path):
    """/dev/shm is another tmpfs than the test's tmp folder, as a session's /tmp and home are."""
    if os.stat("/dev/shm").st_dev == tmp_path.stat().st_dev:
        pytest.skip("/dev/shm is on the tmp folder's filesystem here")
    source = tmp_path / "tree"
    (source / "sub").mkdir(parents=True)
    (source / "sub" / "f").write_bytes(b"across")
    destination = f"/dev/shm/lantern-agent-test-{os.getpid()}"
    try:
        assert put(agent, "move", src_path=str(source), dest_path=destination).status == 200
        with open(f"{destination}/sub/f", "rb") as moved:
            assert moved.read() == b"across"
        assert not source.exists()
    finally:
        os.system(f"rm -rf {destination}")


def test_set_file_permissions(agent, tmp_path):
    (tmp_path / "f").write_text("x")
    reply = put(agent, "set_file_permissions", path=str(tmp_path / "f"), mode="640", owner="session",
                group=str(os.getgid()))
    assert reply.status == 200
    assert stat.S_IMODE((tmp_path / "f").stat().st_mode) == 0o640


@pytest.mark.parametrize("field", ["owner", "group"])
@pytest.mark.parametrize("value", ["nobody", [], ["session"], {"name": "session"}, True, 0.5])
def test_set_file_permissions_refuses_another_user(agent, tmp_path, field, value):
    (tmp_path / "f").write_text("x")
    (tmp_path / "f").chmod(0o600)
    reply = put(agent, "set_file_permissions", path=str(tmp_path / "f"), mode="777", **{field: value})
    assert reply.status == 400 and reply.json()["code"] == f"invalid_{field}"
    assert stat.S_IMODE((tmp_path / "f").stat().st_mode) == 0o600  # nothing changed


@pytest.mark.parametrize("mode", ["", "abc", "8", "17777", "rwx", "-1", None, 644])
def test_set_file_permissions_refuses_bad_modes(agent, tmp_path, mode):
    (tmp_path / "f").write_text("x")
    reply = put(agent, "set_file_permissions", path=str(tmp_path / "f"), mode=mode)
    assert reply.status == 400 and reply.json()["code"] == "invalid_mode"


def test_set_file_permissions_of_a_missing_path_is_404(agent, tmp_path):
    assert put(agent, "set_file_permissions", path=str(tmp_path / "none"), mode="644").status == 404


def test_file_info_of_a_file(agent, tmp_path):
    target = tmp_path / "f.txt"
    target.write_bytes(b"12345")
    target.chmod(0o640)
    os.utime(target, ns=(0, 1_700_000_000_123_456_789))
    body = info(agent, str(target)).json()
    assert body == {"name": "f.txt", "path": str(target), "is_dir": False, "size_bytes": 5,
                    "mod_time": "2023-11-14T22:13:20.123456Z", "mode": "-rw-r-----"}
    assert datetime.fromisoformat(body["mod_time"].replace("Z", "+00:00")).tzinfo == timezone.utc


def test_file_info_of_a_folder_has_size_0(agent, tmp_path):
    (tmp_path / "d").mkdir(mode=0o755)
    (tmp_path / "d").chmod(0o755)
    body = info(agent, str(tmp_path / "d")).json()
    assert body["is_dir"] is True and body["size_bytes"] == 0 and body["mode"] == "drwxr-xr-x"


def test_file_info_follows_links_as_go_stat_does(agent, tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "d")
    assert info(agent, str(tmp_path / "link")).json()["is_dir"] is True
    assert info(agent, str(tmp_path / "missing")).status == 404


def test_list_files_one_level_sorted_links_as_links(agent, tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "deep").write_text("not listed")
    (tmp_path / "a.txt").write_bytes(b"abc")
    (tmp_path / "c").symlink_to(tmp_path / "b")
    listed = agent.call("GET", f"/fs/list_files?path={quote(str(tmp_path))}").json()
    by_name = {entry["name"]: entry for entry in listed}
    assert [entry["name"] for entry in listed] == sorted(by_name)
    assert "deep" not in by_name
    assert by_name["a.txt"]["size_bytes"] == 3 and by_name["a.txt"]["path"] == str(tmp_path / "a.txt")
    assert by_name["b"]["is_dir"] is True and by_name["b"]["mode"].startswith("d")
    assert by_name["c"]["mode"] == "Lrwxrwxrwx" and by_name["c"]["is_dir"] is False


def test_list_files_of_a_file_is_400_and_of_nothing_404(agent, tmp_path):
    (tmp_path / "f").write_text("x")
    assert agent.call("GET", f"/fs/list_files?path={quote(str(tmp_path / 'f'))}").json()["code"] == "not_a_directory"
    assert agent.call("GET", f"/fs/list_files?path={quote(str(tmp_path / 'none'))}").status == 404


@pytest.mark.parametrize("st_mode, expected", [
    (stat.S_IFREG | 0o644, "-rw-r--r--"),
    (stat.S_IFDIR | 0o755, "drwxr-xr-x"),
    (stat.S_IFLNK | 0o777, "Lrwxrwxrwx"),
    (stat.S_IFDIR | stat.S_ISVTX | 0o777, "dtrwxrwxrwx"),
    (stat.S_IFREG | stat.S_ISUID | 0o755, "urwxr-xr-x"),
    (stat.S_IFREG | stat.S_ISGID | 0o755, "grwxr-xr-x"),
    (stat.S_IFDIR | stat.S_ISGID | 0o2775 & 0o777, "dgrwxrwxr-x"),
    (stat.S_IFCHR | 0o666, "Dcrw-rw-rw-"),
    (stat.S_IFBLK | 0o660, "Drw-rw----"),
    (stat.S_IFIFO | 0o600, "prw-------"),
    (stat.S_IFSOCK | 0o755, "Srwxr-xr-x"),
    (stat.S_IFCHR | stat.S_ISUID | stat.S_ISVTX | 0o600, "Ductrw-------"),
    (stat.S_IFREG, "----------"),
])
def test_mode_strings_are_go_file_mode_strings(st_mode, expected):
    assert go_mode_string(st_mode) == expected


def test_set_file_permissions_takes_the_session_user_as_a_number(agent, tmp_path):
    (tmp_path / "f").write_text("x")
    reply = put(agent, "set_file_permissions", path=str(tmp_path / "f"), mode="600", owner=os.getuid())
    assert reply.status == 200
    assert put(agent, "set_file_permissions", path=str(tmp_path / "f"), mode="600", owner=12345).status == 400


def test_as_the_session_user_what_it_may_not_touch_is_403(user_agent):
    agent, work = user_agent
    locked = work / "locked"
    locked.mkdir(mode=0o755)  # root's: the session's user may read it, not write in it
    reply = agent.call("PUT", f"/fs/write_file?path={quote(str(locked / 'f'))}", body=b"x")
    assert reply.status == 403 and reply.json()["code"] == "permission_denied"
    assert put(agent, "create_directory", path=str(locked / "d")).status == 403
    assert put(agent, "set_file_permissions", path=str(locked), mode="777").status == 403
    assert os.listdir(locked) == []


def test_as_the_session_user_files_are_its_own(user_agent):
    agent, work = user_agent
    user = pwd.getpwnam(SESSION_USER)
    assert agent.call("PUT", f"/fs/write_file?path={quote(str(work / 'f'))}", body=b"mine").status == 201
    assert (work / "f").stat().st_uid == user.pw_uid
    for owner in ("session", "kernel", SESSION_USER, str(user.pw_uid)):
        assert put(agent, "set_file_permissions", path=str(work / "f"), mode="600", owner=owner).status == 200
    assert put(agent, "set_file_permissions", path=str(work / "f"), mode="600", owner="root").status == 400
    assert put(agent, "set_file_permissions", path=str(work / "f"), mode="600", group="root").status == 400
