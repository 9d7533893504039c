"""GET /browsers/{id}/telemetry/stream: spec part 6, telemetry stream rules 1-8."""
import threading
import time

import pytest

from app.core import clock
from app.streams import telemetry_buffers
from tests.browsers.conftest import TELEMETRY_ON, another_worker, console
from tests.conftest import client_for
from tests.invocations.conftest import read_frames

FAST = {"STREAM_POLL_SECONDS": 0.05}


@pytest.fixture
def fast_client(make_app, app, owner_key):
    """A client of an app (same database) whose streams look at their session every 50 ms."""
    return client_for(make_app(**FAST), owner_key.plaintext)


def stream(client, session_id, query="", **headers):
    return client.get(f"/browsers/{session_id}/telemetry/stream{query}", headers=headers)


def raw_blocks(response, *, count, timeout=5.0):
    """The first `count` SSE blocks of a response as raw text, after the opening comment."""
    blocks, buffer = [], ""
    deadline = time.monotonic() + timeout
    try:
        for chunk in response.response:
            buffer += chunk.decode() if isinstance(chunk, bytes) else chunk
            while "\n\n" in buffer and len(blocks) < count:
                block, buffer = buffer.split("\n\n", 1)
                if block != ": stream open":
                    blocks.append(block)
            if len(blocks) >= count or time.monotonic() > deadline:
                return blocks
        return blocks
    finally:
        response.close()


def seqs(frames):
    return [event_id for event_id, _ in frames]


def test_frames_carry_the_seq_as_id_and_json_data_without_an_event_field(client, new_browser, ingest):
    session = new_browser()["session_id"]
    response = stream(client, session)
    assert response.status_code == 200
    assert response.mimetype == "text/event-stream"
    assert response.headers["Cache-Control"] == "no-cache" and response.headers["X-Accel-Buffering"] == "no"
    ingest(session, [console("a"), console("b")])
    blocks = raw_blocks(response, count=2)
    assert blocks[0].startswith("id: 1\ndata: {") and blocks[1].startswith("id: 2\ndata: {")
    assert not any(line.startswith("event:") for block in blocks for line in block.splitlines())


def test_a_fresh_connection_sees_only_new_events(client, new_browser, ingest):
    session = new_browser()["session_id"]
    ingest(session, [console(i) for i in range(3)])
    response = stream(client, session)
    ingest(session, [console("new 1"), console("new 2")])
    frames = read_frames(response, count=2)
    assert seqs(frames) == [4, 5]
    assert [data["seq"] for _, data in frames] == [4, 5]
    assert frames[0][1]["event"]["data"]["text"] == "new 1"
    assert frames[0][1]["event"]["type"] == "console_log" and frames[0][1]["event"]["category"] == "console"


def test_replay_all_starts_at_the_oldest_retained_event(client, new_browser, ingest):
    session = new_browser()["session_id"]
    ingest(session, [console(i) for i in range(3)])
    assert seqs(read_frames(stream(client, session, "?replay=all"), count=3)) == [1, 2, 3]
    # Any other value means "from now".
    response = stream(client, session, "?replay=none")
    ingest(session, [console("later")])
    assert seqs(read_frames(response, count=1)) == [4]


def test_the_buffer_is_bounded_so_replay_starts_above_1_after_eviction(make_app, app, owner_key, new_browser, ingest):
    small = client_for(make_app(TELEMETRY_BUFFER_EVENTS=5), owner_key.plaintext)
    session = new_browser(using=small)["session_id"]
    ingest(session, [console(i) for i in range(12)], using=small)
    frames = read_frames(stream(small, session, "?replay=all"), count=5)
    assert seqs(frames) == [8, 9, 10, 11, 12]


def test_last_event_id_resumes_after_that_seq_and_wins_over_replay(client, new_browser, ingest):
    session = new_browser()["session_id"]
    ingest(session, [console(i) for i in range(6)])
    frames = read_frames(stream(client, session, "?replay=all", **{"Last-Event-ID": "4"}), count=2)
    assert seqs(frames) == [5, 6]


def test_an_evicted_last_event_id_resumes_at_the_oldest_retained(make_app, app, owner_key, new_browser, ingest):
    small = client_for(make_app(TELEMETRY_BUFFER_EVENTS=4), owner_key.plaintext)
    session = new_browser(using=small)["session_id"]
    ingest(session, [console(i) for i in range(10)], using=small)
    frames = read_frames(stream(small, session, **{"Last-Event-ID": "2"}), count=4)
    assert seqs(frames) == [7, 8, 9, 10]


def test_reconnecting_with_last_event_id_loses_and_repeats_nothing_while_events_keep_coming(
        client, new_browser, ingest, app, owner_key):
    session = new_browser()["session_id"]
    total, stop = 300, threading.Event()

    def produce():
        producer = client_for(app, owner_key.plaintext)
        for start in range(0, total, 10):
            ingest(session, [console(start + i) for i in range(10)], using=producer)
            time.sleep(0.002)
        stop.set()

    received = []
    response = stream(client, session, "?replay=all")
    thread = threading.Thread(target=produce)
    thread.start()
    try:
        while len(received) < total:
            # Read a few frames, drop the connection, resume where we were.
            frames = read_frames(response, count=min(37, total - len(received)))
            received += seqs(frames)
            response = stream(client, session, **{"Last-Event-ID": str(received[-1])})
    finally:
        thread.join()
        response.close()
    assert received == list(range(1, total + 1))


def test_keepalive_comments_when_idle(make_app, app, owner_key, new_browser):
    quick = client_for(make_app(SSE_HEARTBEAT_SECONDS=0.1, **FAST), owner_key.plaintext)
    session = new_browser(using=quick)["session_id"]
    started = time.monotonic()
    blocks = raw_blocks(stream(quick, session), count=2)
    assert blocks == [": keepalive", ": keepalive"]
    # Not before the interval: two keepalives take at least two intervals.
    assert time.monotonic() - started >= 0.2


def test_the_default_keepalive_interval_is_15_seconds(app):
    assert app.config["SSE_HEARTBEAT_SECONDS"] == 15


def test_a_type_filter_sends_only_those_types_and_advances_the_cursor_with_id_only_frames(
        make_app, app, owner_key, new_browser, ingest):
    quick = client_for(make_app(SSE_HEARTBEAT_SECONDS=0.1, **FAST), owner_key.plaintext)
    session = new_browser(using=quick)["session_id"]
    response = stream(quick, session, "?type=network_request")
    ingest(session, [console("skip"), {"type": "network_request", "source": {"kind": "cdp"},
                                       "data": {"url": "https://a.test", "method": "GET"}}, console("skip too")],
           using=quick)
    blocks = raw_blocks(response, count=2)
    assert blocks[0].startswith("id: 2\ndata: ") and '"network_request"' in blocks[0]
    assert blocks[1] == "id: 3"  # the skipped console event moved the cursor past it


def test_telemetry_disabled_opens_and_stays_silent_until_the_session_ends(fast_client, new_browser, ingest):
    session = new_browser(using=fast_client, telemetry=None)["session_id"]
    response = stream(fast_client, session, "?replay=all")
    assert response.status_code == 200
    body = ingest(session, [console("dropped")], using=fast_client)
    assert body == {"accepted": 0, "dropped": 1, "last_seq": 0}
    deleter = threading.Timer(0.2, lambda: fast_client.delete(f"/browsers/{session}"))
    deleter.start()
    assert read_frames(response, timeout=5) == []
    deleter.join(5)  # its request must be over before the test's database goes


def test_unknown_session_is_404(client):
    response = stream(client, "no-such-session")
    assert response.status_code == 404
    assert response.get_json()["code"] == "browser_not_found"


def test_the_stream_closes_when_the_session_is_deleted_after_delivering_what_came_before(
        fast_client, new_browser, ingest):
    session = new_browser(using=fast_client)["session_id"]
    response = stream(fast_client, session)
    ingest(session, [console("last words")], using=fast_client)
    deleter = threading.Timer(0.2, lambda: fast_client.delete(f"/browsers/{session}"))
    deleter.start()
    frames = read_frames(response, timeout=5)  # returns only when the stream ends
    assert seqs(frames) == [1]
    deleter.join(5)  # its request must be over before the test's database goes


def test_the_stream_closes_when_the_session_times_out(fast_client, new_browser, ingest):
    clock.freeze(clock.now())
    session = new_browser(using=fast_client, timeout_seconds=10)["session_id"]
    response = stream(fast_client, session)
    ingest(session, [console("before")], using=fast_client)
    clock.advance(seconds=11)
    frames = read_frames(response, timeout=5)
    assert seqs(frames) == [1]
    ended = fast_client.get(f"/browsers/{session}?include_deleted=true").get_json()
    assert ended["deleted_at"] is not None


def test_events_ingested_by_another_worker_reach_the_stream(fast_client, new_browser, ingest):
    session = new_browser(using=fast_client)["session_id"]
    ingest(session, [console("here")], using=fast_client)
    response = stream(fast_client, session)
    with another_worker():
        ingest(session, [console("there 1"), console("there 2")], using=fast_client)
    ingest(session, [console("here again")], using=fast_client)
    frames = read_frames(response, count=3)
    assert seqs(frames) == [2, 3, 4]
    assert [data["event"]["data"]["text"] for _, data in frames] == ["there 1", "there 2", "here again"]


def test_a_worker_whose_first_event_is_not_the_first_replays_everything_retained(client, new_browser, ingest):
    session = new_browser()["session_id"]
    with another_worker():
        ingest(session, [console(i) for i in range(3)])
    ingest(session, [console("here")])  # this worker's buffer begins with seq 4: it fills in 1-3
    assert seqs(read_frames(stream(client, session, "?replay=all"), count=4)) == [1, 2, 3, 4]
    assert seqs(read_frames(stream(client, session, **{"Last-Event-ID": "1"}), count=3)) == [2, 3, 4]


def test_an_idle_buffer_dropped_by_housekeeping_is_rebuilt_from_the_archive(client, new_browser, ingest):
    session = new_browser()["session_id"]
    ingest(session, [console(i) for i in range(3)])
    assert telemetry_buffers().discard_idle(0) >= 1
    ingest(session, [console("after")])
    assert seqs(read_frames(stream(client, session, "?replay=all"), count=4)) == [1, 2, 3, 4]


def test_a_worker_that_only_streamed_drops_its_buffer_when_the_session_ends(fast_client, new_browser, ingest):
    session = new_browser(using=fast_client)["session_id"]
    ingest(session, [console("a")], using=fast_client)
    response = stream(fast_client, session, "?replay=all")
    with another_worker():
        fast_client.delete(f"/browsers/{session}")  # ended by another worker
    assert seqs(read_frames(response, timeout=5)) == [1]
    assert telemetry_buffers().latest_seq(f"telemetry:{session}") == 0


def test_last_event_id_0_means_from_now(client, new_browser, ingest):
    session = new_browser()["session_id"]
    ingest(session, [console(i) for i in range(3)])
    response = stream(client, session, **{"Last-Event-ID": "0"})
    ingest(session, [console("new")])
    assert seqs(read_frames(response, count=1)) == [4]


def test_a_huge_last_event_id_is_harmless(client, new_browser, ingest):
    session = new_browser()["session_id"]
    ingest(session, [console("a")])
    live = stream(client, session, **{"Last-Event-ID": "9" * 30})
    ingest(session, [console("b")])
    assert seqs(read_frames(live, count=1)) == [2]
    client.delete(f"/browsers/{session}")
    assert read_frames(stream(client, session, **{"Last-Event-ID": "9" * 30})) == []


def test_stream_opens_do_not_wait_on_each_other_for_database_connections(make_app, app, owner_key, new_browser):
    """A stream holds no connection while it asks for its session's state, so with a pool of one
    connection streams keep opening while another stream polls."""
    # Frequent keepalives let the reader thread see `stop` and end before the test does.
    small = client_for(make_app(DB_POOL_SIZE=1, DB_POOL_TIMEOUT_SECONDS=2, STREAM_POLL_SECONDS=0.001,
                                SSE_HEARTBEAT_SECONDS=0.05), owner_key.plaintext)
    polled, opened = new_browser(using=small)["session_id"], new_browser(using=small)["session_id"]
    errors, stop = [], threading.Event()

    def read_forever():
        response = small.get(f"/browsers/{polled}/telemetry/stream")
        try:
            for _ in response.response:
                if stop.is_set():
                    break
        except Exception as error:  # noqa: BLE001 - the assertion below reports it
            errors.append(error)
        finally:
            response.close()

    reader = threading.Thread(target=read_forever, daemon=True)
    reader.start()
    try:
        for _ in range(50):
            response = small.get(f"/browsers/{opened}/telemetry/stream")
            assert response.status_code == 200
            response.close()
    finally:
        stop.set()
        reader.join(timeout=5)
    assert not reader.is_alive() and errors == []


def test_a_stream_on_an_ended_session_replays_from_the_archive_and_closes(client, new_browser, ingest):
    session = new_browser()["session_id"]
    ingest(session, [console(i) for i in range(4)])
    client.delete(f"/browsers/{session}")
    assert read_frames(stream(client, session)) == []
    assert seqs(read_frames(stream(client, session, **{"Last-Event-ID": "2"}))) == [3, 4]
    assert seqs(read_frames(stream(client, session, "?replay=all"))) == [1, 2, 3, 4]


def test_categories_switched_off_are_not_streamed(client, new_browser, ingest):
    session = new_browser(telemetry={"enabled": True})["session_id"]  # console is off by default
    response = stream(client, session, "?replay=all")
    body = ingest(session, [console("off"), {"type": "cdp_connect", "source": {"kind": "cdp"}}])
    assert body == {"accepted": 1, "dropped": 1, "last_seq": 1}
    frames = read_frames(response, count=1)
    assert frames[0][1]["event"]["type"] == "cdp_connect"


def test_telemetry_switched_on_by_update(client, new_browser, ingest):
    session = new_browser(telemetry=None)["session_id"]
    assert ingest(session, [console("before")])["accepted"] == 0
    updated = client.patch(f"/browsers/{session}", json={"telemetry": TELEMETRY_ON})
    assert updated.status_code == 200 and updated.get_json()["telemetry"]["enabled"] is True
    assert ingest(session, [console("after")]) == {"accepted": 1, "dropped": 0, "last_seq": 1}
    client.patch(f"/browsers/{session}", json={"telemetry": {"enabled": False}})
    assert ingest(session, [console("stopped")])["accepted"] == 0


def test_monitor_events_flow_while_any_cdp_category_is_on(client, new_browser, ingest):
    monitor = {"type": "monitor_reconnected", "source": {"kind": "local_process"},
               "data": {"reconnect_duration_ms": 5}}
    on = new_browser(telemetry={"enabled": True})["session_id"]  # control is on by default
    assert ingest(on, [monitor])["accepted"] == 1
    cdp_off = {name: {"enabled": False} for name in ("console", "network", "page", "interaction", "control",
                                                      "screenshot")}
    off = new_browser(telemetry={"enabled": True, "browser": cdp_off})["session_id"]
    assert ingest(off, [monitor]) == {"accepted": 0, "dropped": 1, "last_seq": 0}
