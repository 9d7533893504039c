"""Logs of a browser session: ingest (POST /browsers/{id}/logs) and the log stream (contract 6.8.5)."""
import json
import time
from datetime import timedelta

import pytest

from app.core import clock
from tests.conftest import client_for
from tests.invocations.conftest import read_frames

T0 = clock.parse_rfc3339("2026-06-01T12:00:00Z")
APP_LOG = {"source": "path", "path": "/var/log/app.log"}
OTHER_LOG = {"source": "path", "path": "/var/log/other.log"}
CHROME = {"source": "supervisor", "supervisor_process": "chromium"}


@pytest.fixture
def fast_app(make_app, owner_key):
    """An app on the test database whose streams poll and keep alive quickly (a silent stream still yields)."""
    return make_app(SSE_HEARTBEAT_SECONDS=0.1, STREAM_POLL_SECONDS=0.05)


@pytest.fixture
def fast(fast_app, owner_key):
    return client_for(fast_app, owner_key.plaintext)


def new_session(client, **fields):
    response = client.post("/browsers", json=fields)
    assert response.status_code == 201, response.get_json()
    return response.get_json()["session_id"]


def post_lines(client, session_id, log, *messages, status=201):
    lines = [m if isinstance(m, dict) else {"message": m} for m in messages]
    response = client.post(f"/browsers/{session_id}/logs", json={**log, "lines": lines})
    assert response.status_code == status, response.get_json()
    return response.get_json()


def open_stream(client, session_id, log, follow, headers=None):
    query = {**log, "follow": "true" if follow else "false"}
    response = client.get(f"/browsers/{session_id}/logs/stream", query_string=query, headers=headers or {},
                          buffered=False)
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.mimetype == "text/event-stream"
    return response


def messages(frames):
    return [data["message"] for _, data in frames]


class OpenStream:
    """Reads frames of a stream that keeps following, without closing it."""

    def __init__(self, response):
        self.response, self.chunks, self.buffer = response, iter(response.response), ""

    def take(self, count, timeout=5.0):
        frames, deadline = [], time.monotonic() + timeout
        while len(frames) < count:
            assert time.monotonic() < deadline, f"only {len(frames)} of {count} frames in time"
            chunk = next(self.chunks)
            self.buffer += chunk.decode() if isinstance(chunk, bytes) else chunk
            while "\n\n" in self.buffer:
                block, self.buffer = self.buffer.split("\n\n", 1)
                fields = dict(line.split(": ", 1) for line in block.splitlines() if not line.startswith(":"))
                if "data" in fields:
                    frames.append((int(fields["id"]) if "id" in fields else None, json.loads(fields["data"])))
        assert self.buffer == ""
        return frames


@pytest.fixture
def frozen():
    clock.freeze(T0)
    return T0


# -- ingest -----------------------------------------------------------------------------------

def test_lines_are_accepted_for_a_path_or_a_supervised_process(client, frozen):
    session_id = new_session(client)
    assert post_lines(client, session_id, APP_LOG, "one", "two") == {"accepted": 2}
    assert post_lines(client, session_id, CHROME, "started") == {"accepted": 1}


@pytest.mark.parametrize("body, field", [
    ({"source": "path", "lines": [{"message": "x"}]}, "path"),
    ({"source": "path", "path": "", "lines": [{"message": "x"}]}, "path"),
    ({"source": "supervisor", "lines": [{"message": "x"}]}, "supervisor_process"),
    ({"source": "supervisor", "path": "/var/log/app.log", "lines": [{"message": "x"}]}, "supervisor_process"),
    ({"source": "supervisor", "supervisor_process": "chromium", "path": "/var/log/app.log",
      "lines": [{"message": "x"}]}, "path"),
    ({"source": "path", "path": "/a", "supervisor_process": "chromium", "lines": [{"message": "x"}]},
     "supervisor_process"),
    ({"source": "file", "path": "/a", "lines": [{"message": "x"}]}, "source"),
    ({"path": "/a", "lines": [{"message": "x"}]}, "source"),
    ({"source": "path", "path": "/a", "lines": []}, "lines"),
    ({"source": "path", "path": "/a"}, "lines"),
    ({"source": "path", "path": "/a", "lines": [{}]}, "lines"),
    ({"source": "path", "path": "/a", "lines": [{"message": "x", "timestamp": "yesterday"}]}, "lines"),
])
def test_bad_log_bodies_are_400(client, frozen, body, field):
    session_id = new_session(client)
    response = client.post(f"/browsers/{session_id}/logs", json=body)
    assert response.status_code == 400, response.get_json()
    result = response.get_json()
    assert result["code"] == "bad_request" and result["message"]
    assert any(d.get("field", "").split(".")[0] == field for d in result["details"]), result
    # nothing was stored
    assert read_frames(open_stream(client, session_id, APP_LOG, follow=False), timeout=5) == []


def test_an_unknown_session_is_404(client, frozen):
    response = client.post("/browsers/nope/logs", json={**APP_LOG, "lines": [{"message": "x"}]})
    assert response.status_code == 404 and response.get_json()["code"] == "browser_not_found"
    response = client.get("/browsers/nope/logs/stream", query_string={**APP_LOG, "follow": "false"})
    assert response.status_code == 404 and response.get_json()["code"] == "browser_not_found"


def test_ingest_into_a_deleted_session_is_409_and_stores_nothing(client, frozen):
    session_id = new_session(client)
    post_lines(client, session_id, APP_LOG, "before")
    assert client.delete(f"/browsers/{session_id}").status_code == 204
    body = post_lines(client, session_id, APP_LOG, "after", status=409)
    assert body["code"] == "browser_session_ended"
    assert messages(read_frames(open_stream(client, session_id, APP_LOG, follow=False))) == ["before"]


def test_ingest_into_a_timed_out_session_is_409(client, frozen):
    session_id = new_session(client, timeout_seconds=10)
    clock.advance(seconds=11)
    body = post_lines(client, session_id, APP_LOG, "late", status=409)
    assert body["code"] == "browser_session_ended"
    assert read_frames(open_stream(client, session_id, APP_LOG, follow=False)) == []


# -- the stream -------------------------------------------------------------------------------

@pytest.mark.parametrize("query, field", [
    ({"path": "/a", "follow": "false"}, "source"),
    ({"source": "path", "follow": "false"}, "path"),
    ({"source": "supervisor", "follow": "false"}, "supervisor_process"),
    ({"source": "supervisor", "path": "/a", "supervisor_process": "chromium"}, "path"),
    ({"source": "journal", "path": "/a"}, "source"),
    ({"source": "path", "path": "/a", "follow": "sometimes"}, "follow"),
])
def test_bad_stream_queries_are_400(client, frozen, query, field):
    session_id = new_session(client)
    response = client.get(f"/browsers/{session_id}/logs/stream", query_string=query)
    assert response.status_code == 400, response.get_data(as_text=True)
    assert any(d.get("field", "").split(".")[0] == field for d in response.get_json()["details"])


def test_without_follow_the_stored_lines_come_as_log_frames_and_the_stream_closes(client, frozen):
    session_id = new_session(client)
    post_lines(client, session_id, APP_LOG, {"message": "first", "timestamp": "2026-05-31T23:00:00Z"}, "second")
    post_lines(client, session_id, OTHER_LOG, "not this file")
    post_lines(client, session_id, CHROME, "not this process")
    clock.advance(seconds=1)
    post_lines(client, session_id, APP_LOG, "third")
    frames = read_frames(open_stream(client, session_id, APP_LOG, follow=False), timeout=5)
    assert [data for _, data in frames] == [
        {"event": "log", "message": "first", "timestamp": "2026-05-31T23:00:00.000000Z"},
        {"event": "log", "message": "second", "timestamp": clock.isoformat(T0)},
        {"event": "log", "message": "third", "timestamp": clock.isoformat(T0 + timedelta(seconds=1))},
    ]
    ids = [frame_id for frame_id, _ in frames]
    assert all(isinstance(i, int) for i in ids) and ids == sorted(ids) and len(set(ids)) == 3
    assert messages(read_frames(open_stream(client, session_id, OTHER_LOG, follow=False))) == ["not this file"]
    assert messages(read_frames(open_stream(client, session_id, CHROME, follow=False))) == ["not this process"]
    other_process = {"source": "supervisor", "supervisor_process": "neko"}
    assert read_frames(open_stream(client, session_id, other_process, follow=False)) == []
    # a path and a process of the same name are different logs
    same_name = {"source": "supervisor", "supervisor_process": APP_LOG["path"]}
    assert read_frames(open_stream(client, session_id, same_name, follow=False)) == []


def test_follow_delivers_stored_then_new_lines_and_closes_when_the_session_is_deleted(fast, frozen):
    session_id = new_session(fast)
    post_lines(fast, session_id, APP_LOG, "a", "b")
    post_lines(fast, session_id, OTHER_LOG, "elsewhere")
    response = open_stream(fast, session_id, APP_LOG, follow=True)
    stream = OpenStream(response)
    assert messages(stream.take(2)) == ["a", "b"]
    post_lines(fast, session_id, APP_LOG, "c")
    post_lines(fast, session_id, OTHER_LOG, "elsewhere again")
    assert messages(stream.take(1)) == ["c"]
    post_lines(fast, session_id, APP_LOG, "d")  # sent before the end: still delivered
    assert fast.delete(f"/browsers/{session_id}").status_code == 204
    rest = read_frames(response, timeout=5)  # returns only when the stream ends
    assert messages(rest) == ["d"]


def test_follow_is_the_default(fast, frozen):
    session_id = new_session(fast)
    post_lines(fast, session_id, CHROME, "a")
    response = fast.get(f"/browsers/{session_id}/logs/stream", query_string=CHROME, buffered=False)
    stream = OpenStream(response)
    assert messages(stream.take(1)) == ["a"]
    post_lines(fast, session_id, CHROME, "b")
    assert messages(stream.take(1)) == ["b"]
    assert fast.delete(f"/browsers/{session_id}").status_code == 204
    assert read_frames(response, timeout=5) == []


def test_follow_on_an_ended_session_replays_and_closes(fast, frozen):
    session_id = new_session(fast)
    post_lines(fast, session_id, APP_LOG, "a", "b")
    assert fast.delete(f"/browsers/{session_id}").status_code == 204
    assert messages(read_frames(open_stream(fast, session_id, APP_LOG, follow=True), timeout=5)) == ["a", "b"]


def test_follow_closes_when_the_session_times_out(fast, frozen):
    session_id = new_session(fast, timeout_seconds=10)
    post_lines(fast, session_id, APP_LOG, "a")
    response = open_stream(fast, session_id, APP_LOG, follow=True)
    stream = OpenStream(response)
    assert messages(stream.take(1)) == ["a"]
    clock.advance(seconds=11)
    assert read_frames(response, timeout=5) == []
    assert fast.get(f"/browsers/{session_id}").status_code == 404


def test_last_event_id_resumes_after_that_line(fast, frozen):
    session_id = new_session(fast)
    post_lines(fast, session_id, APP_LOG, "a", "b", "c")
    first = read_frames(open_stream(fast, session_id, APP_LOG, follow=False))
    assert messages(first) == ["a", "b", "c"]
    resumed = open_stream(fast, session_id, APP_LOG, follow=False, headers={"Last-Event-ID": str(first[0][0])})
    assert read_frames(resumed) == first[1:]
    after_last = open_stream(fast, session_id, APP_LOG, follow=False, headers={"Last-Event-ID": str(first[-1][0])})
    assert read_frames(after_last) == []
    # following from a resume point: the rest, then new lines, then the end
    response = open_stream(fast, session_id, APP_LOG, follow=True, headers={"Last-Event-ID": str(first[1][0])})
    stream = OpenStream(response)
    assert messages(stream.take(1)) == ["c"]
    post_lines(fast, session_id, APP_LOG, "d")
    assert messages(stream.take(1)) == ["d"]
    fast.delete(f"/browsers/{session_id}")
    assert read_frames(response, timeout=5) == []


def test_the_replay_is_bounded_by_browser_log_replay_lines(make_app, owner_key, frozen):
    client = client_for(make_app(BROWSER_LOG_REPLAY_LINES=2), owner_key.plaintext)
    session_id = new_session(client)
    post_lines(client, session_id, APP_LOG, "1", "2", "3")
    post_lines(client, session_id, OTHER_LOG, "x", "y", "z")  # other logs do not take a replay slot
    post_lines(client, session_id, APP_LOG, "4", "5")
    frames = read_frames(open_stream(client, session_id, APP_LOG, follow=False))
    assert messages(frames) == ["4", "5"]
    assert messages(read_frames(open_stream(client, session_id, OTHER_LOG, follow=False))) == ["y", "z"]
    # Last-Event-ID: 0 means none (the replay bound applies); a real id resumes without a gap beyond the bound.
    assert messages(read_frames(open_stream(client, session_id, APP_LOG, follow=False,
                                            headers={"Last-Event-ID": "0"}))) == ["4", "5"]
    first_line_id = frames[0][0] - 6  # "1", "2", "3", then x, y, z, then "4"
    resumed = read_frames(open_stream(client, session_id, APP_LOG, follow=False,
                                      headers={"Last-Event-ID": str(first_line_id)}))
    assert messages(resumed) == ["2", "3", "4", "5"]


def test_the_default_replay_is_the_newest_1000_lines_in_order(client, frozen):
    session_id = new_session(client)
    post_lines(client, session_id, APP_LOG, *[str(i) for i in range(600)])
    post_lines(client, session_id, APP_LOG, *[str(i) for i in range(600, 1200)])
    frames = read_frames(open_stream(client, session_id, APP_LOG, follow=False), timeout=10)
    assert messages(frames) == [str(i) for i in range(200, 1200)]
    assert len({frame_id for frame_id, _ in frames}) == 1000
