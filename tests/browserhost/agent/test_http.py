"""The agent's HTTP core: routing, one request per connection, a thread per connection, every bad input as a 4xx
in the API's shape; and the answers of http.py (SSE frames, trickled JSON) taken apart in the test's process."""
import json
import os
import socket
import time
from urllib.parse import quote

import pytest

from browserhost.agent.files import check_not_holding_hidden
from browserhost.agent.http import AgentError, check_path, is_session_identity, sse, trickle


def test_unknown_route_is_404_in_the_error_shape(agent):
    reply = agent.call("GET", "/nowhere")
    assert reply.status == 404
    assert reply.json()["code"] == "not_found"
    assert reply.headers["Connection"] == "close"
    assert reply.headers["Content-Type"] == "application/json"


def test_a_known_route_with_another_method_is_405(agent):
    assert agent.call("GET", "/fs/write_file?path=/tmp/x").json()["code"] == "method_not_allowed"


def test_one_request_per_connection(agent, tmp_path):
    with socket.socket(socket.AF_UNIX) as client:
        client.settimeout(10)
        client.connect(agent.socket_path)
        request = f"GET /fs/file_info?path={quote(str(tmp_path))} HTTP/1.1\r\nHost: agent\r\n\r\n".encode()
        client.sendall(request + request)  # the second is never answered: the agent closes after one
        answer = client.makefile("rb").read()
    assert answer.count(b"HTTP/1.1 200") == 1


def test_a_stalled_request_does_not_hold_up_others(agent, tmp_path):
    with socket.socket(socket.AF_UNIX) as stalled:
        stalled.connect(agent.socket_path)
        stalled.sendall(f"PUT /fs/write_file?path={quote(str(tmp_path / 'slow'))} HTTP/1.1\r\nHost: agent\r\n"
                        "Content-Length: 100\r\n\r\nabc".encode())
        started = time.monotonic()
        assert agent.call("GET", f"/fs/file_info?path={quote(str(tmp_path))}", timeout=5).status == 200
        assert time.monotonic() - started < 2


@pytest.mark.parametrize("body, code", [
    (b"{not json", "invalid_json"),
    (b"[1, 2]", "invalid_json"),
    (b"", "invalid_json"),
    (b'{"path": "' + b"a" * (1024 * 1024) + b'"}', "body_too_large"),
])
def test_bad_json_bodies_are_400(agent, body, code):
    reply = agent.call("PUT", "/fs/create_directory", body=body)
    assert reply.status == 400 and reply.json()["code"] == code


def test_a_chunked_json_body_is_read(agent, tmp_path):
    parts = [b'{"path": "', str(tmp_path / "chunked").encode(), b'"}']
    assert agent.call("PUT", "/fs/create_directory", body=iter(parts)).status == 201
    assert (tmp_path / "chunked").is_dir()


def test_a_body_with_a_length_and_chunked_is_400(agent, tmp_path):
    """Both framings at once spun write_file for ever (a chunked read past the end is empty, never short)."""
    target = quote(str(tmp_path / "f"))
    with socket.socket(socket.AF_UNIX) as client:
        client.settimeout(10)
        client.connect(agent.socket_path)
        client.sendall(f"PUT /fs/write_file?path={target} HTTP/1.1\r\nHost: agent\r\nContent-Length: 10\r\n"
                       "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n".encode())
        answer = client.makefile("rb").read()
    assert answer.startswith(b"HTTP/1.1 400 ") and b'"bad_framing"' in answer
    assert not (tmp_path / "f").exists()


def test_a_bad_room_header_is_400(agent, tmp_path):
    reply = agent.call("PUT", f"/fs/write_file?path={quote(str(tmp_path / 'f'))}", body=b"x",
                       headers={"X-Lantern-Room": "lots"})
    assert reply.status == 400 and reply.json()["code"] == "bad_room"
    assert not (tmp_path / "f").exists()


BAD_PATHS = ["", "relative/path", "/a\0b", "/" + "a" * 5000, "/run/lantern", "/run/lantern/devtools.sock",
             "/run/../run/lantern/x", "//run/lantern"]


@pytest.mark.parametrize("path", BAD_PATHS)
def test_bad_paths_in_a_query_are_400(agent, path):
    reply = agent.call("GET", f"/fs/file_info?path={quote(path)}")
    assert reply.status == 400 and reply.json()["code"] in ("invalid_path", "path_not_allowed")
    assert "path" in reply.json()["message"]


@pytest.mark.parametrize("path", BAD_PATHS + [None, 5, ["/tmp"]])
def test_bad_paths_in_a_body_are_400(agent, path):
    reply = agent.call("PUT", "/fs/move", json_body={"src_path": path, "dest_path": "/tmp/x"})
    assert reply.status == 400 and reply.json()["message"].startswith("src_path")


def test_a_lone_surrogate_in_a_path_is_400(agent):
    body = b'{"src_path": "/tmp/\\ud800", "dest_path": "/tmp/x"}'  # JSON may name a surrogate no file can hold
    reply = agent.call("PUT", "/fs/move", body=body)
    assert reply.status == 400 and reply.json()["code"] == "invalid_path"


def test_session_identities():
    uid, gid = os.getuid(), os.getgid()
    for value in ("session", "kernel", uid, str(uid), f"{uid}:{gid}"):
        assert is_session_identity(value)
    assert is_session_identity(gid, "group") and not is_session_identity(f"{uid}:{gid}", "group")
    for value in ([], ["session"], {"a": 1}, True, float(uid), uid + 1, "someone", None):
        assert not is_session_identity(value)


def test_a_missing_path_is_400(agent):
    assert agent.call("GET", "/fs/list_files").json()["code"] == "invalid_path"


def test_a_path_of_megabytes_is_a_4xx_in_the_api_shape(agent):
    reply = agent.call("GET", "/fs/file_info?path=/" + "a" * (3 * 1024 * 1024))
    assert 400 <= reply.status < 500 and set(reply.json()) == {"code", "message"}


def test_check_path_normalises():
    assert check_path("/tmp//a/./b/../c/", "path") == "/tmp/a/c"
    assert check_path("//tmp", "path") == "/tmp"
    with pytest.raises(AgentError) as refused:
        check_path("/tmp/../run/lantern/x", "dest_path")
    assert refused.value.status == 400 and "dest_path" in refused.value.message


@pytest.mark.parametrize("path", ["/", "/run", "/run/"])
def test_folders_holding_the_devtools_folder_cannot_be_deleted_or_moved(path):
    with pytest.raises(AgentError) as refused:
        check_not_holding_hidden(check_path(path, "path"), "path")
    assert refused.value.code == "path_not_allowed"
    check_not_holding_hidden("/run/other", "path")


def test_a_folder_reached_through_a_link_that_holds_the_devtools_folder_is_refused(tmp_path):
    """/home/session/l/run with l -> / is /run: deleting it would remove /run/lantern."""
    (tmp_path / "l").symlink_to("/")
    with pytest.raises(AgentError) as refused:
        check_not_holding_hidden(check_path(str(tmp_path / "l" / "run"), "path"), "path")
    assert refused.value.code == "path_not_allowed"
    check_not_holding_hidden(str(tmp_path / "l"), "path")  # the link itself: deleting it removes only the link
    check_not_holding_hidden(str(tmp_path / "l" / "tmp"), "path")


def test_sse_frames_and_keep_alives():
    answer = sse(iter([(1, {"a": 1}), None, (2, {"b": "x"})]))
    assert answer.status == 200 and ("Content-Type", "text/event-stream") in answer.headers
    assert answer.length is None  # chunked
    assert list(answer.chunks) == [b'id: 1\ndata: {"a": 1}\n\n', b": keep-alive\n\n", b'id: 2\ndata: {"b": "x"}\n\n']


def test_trickle_sends_spaces_while_waiting_then_the_json():
    def wait():
        time.sleep(0.35)
        return {"exit_code": 0}

    chunks = list(trickle(200, wait, every=0.1).chunks)
    assert chunks[-1] == b'{"exit_code": 0}' and set(chunks[:-1]) == {b" "} and len(chunks) >= 3
    assert json.loads(b"".join(chunks)) == {"exit_code": 0}


def test_trickle_says_a_refusal_in_its_body():
    def wait():
        raise AgentError(400, "nope", "no")

    assert json.loads(b"".join(trickle(200, wait, every=0.1).chunks)) == {"code": "nope", "message": "no"}
