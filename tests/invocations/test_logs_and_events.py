"""Invocation logs and the events stream (spec part 6, contract section 4 and 6.6)."""
import threading
import time

from app.core import clock, settings
from tests.conftest import client_for


def follow(client, invocation_id, headers=None, query=""):
    response = client.get(f"/invocations/{invocation_id}/events{query}", headers=headers or {}, buffered=False)
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.mimetype == "text/event-stream"
    assert response.headers["Cache-Control"] == "no-cache" and response.headers["X-Accel-Buffering"] == "no"
    return response


def log(client, invocation_id, *messages):
    response = client.post(f"/invocations/{invocation_id}/logs", json={"lines": [{"message": m} for m in messages]})
    assert response.status_code == 201, response.get_json()
    return response


def test_logs_accept_one_line_or_many_and_cut_long_lines(app, client, invoke, frames_of):
    settings.change(app, INVOCATION_LOG_LINE_MAX_BYTES=10)
    invocation = invoke().get_json()
    single = client.post(f"/invocations/{invocation['id']}/logs", json={"message": "hello"})
    assert single.get_json() == {"accepted": 1}
    log(client, invocation["id"], "x" * 25)
    assert client.post(f"/invocations/{invocation['id']}/logs", json={}).status_code == 400
    assert client.post(f"/invocations/{invocation['id']}/logs", json={"lines": []}).status_code == 400
    client.patch(f"/invocations/{invocation['id']}", json={"status": "succeeded"})
    messages = [d["message"] for _, d in frames_of(follow(client, invocation["id"])) if d["event"] == "log"]
    assert messages == ["hello", "xxxxxxxxxx… [truncated 15 bytes]"]
    finished = client.post(f"/invocations/{invocation['id']}/logs", json={"message": "late"})
    assert finished.status_code == 409 and finished.get_json()["code"] == "invocation_finished"


def test_a_finished_invocation_replays_and_closes(client, invoke, frames_of):
    invocation = invoke().get_json()
    log(client, invocation["id"], "one", "two")
    client.patch(f"/invocations/{invocation['id']}", json={"status": "succeeded", "output": "1"})
    frames = frames_of(follow(client, invocation["id"]))
    kinds = [(d["event"], d.get("message") or d.get("invocation", {}).get("status")) for _, d in frames]
    assert kinds == [("invocation_state", "running"), ("log", "one"), ("log", "two"),
                     ("invocation_state", "succeeded")]
    ids = [i for i, _ in frames]
    assert ids == sorted(ids) and len(set(ids)) == 4
    assert frames[-1][1]["invocation"]["output"] == "1"


def test_since_limits_the_replayed_log_lines(client, invoke, frames_of):
    clock.freeze(clock.parse_rfc3339("2026-06-01T00:00:00Z"))
    invocation = invoke().get_json()
    log(client, invocation["id"], "early")
    clock.advance(minutes=10)
    log(client, invocation["id"], "late")
    client.patch(f"/invocations/{invocation['id']}", json={"status": "succeeded"})
    for query in ("?since=5m", "?since=2026-06-01T00:05:00Z"):
        messages = [d.get("message") for _, d in frames_of(follow(client, invocation["id"], query=query))
                    if d["event"] == "log"]
        assert messages == ["late"], query
    assert client.get(f"/invocations/{invocation['id']}/events?since=soon").status_code == 400


def test_last_event_id_resumes_without_gaps_or_duplicates(client, invoke, frames_of):
    invocation = invoke().get_json()
    log(client, invocation["id"], "a", "b", "c")
    first = frames_of(follow(client, invocation["id"]), count=2)
    log(client, invocation["id"], "d")
    client.patch(f"/invocations/{invocation['id']}", json={"status": "failed"})
    rest = frames_of(follow(client, invocation["id"], headers={"Last-Event-ID": str(first[-1][0])}))
    messages = [d.get("message") for _, d in first + rest if d["event"] == "log"]
    assert messages == ["a", "b", "c", "d"]
    assert rest[-1][1]["invocation"]["status"] == "failed"


def test_a_follower_that_joins_mid_run_gets_every_line_once(app, client, invoke, owner_key, frames_of):
    invocation = invoke().get_json()
    log(client, invocation["id"], *[f"before-{i}" for i in range(5)])
    follower = follow(client, invocation["id"])

    def writer():
        own = client_for(app, owner_key.plaintext)
        for i in range(30):
            own.post(f"/invocations/{invocation['id']}/logs", json={"message": f"live-{i}"})
            time.sleep(0.005)
        own.patch(f"/invocations/{invocation['id']}", json={"status": "succeeded"})

    thread = threading.Thread(target=writer)
    thread.start()
    frames = frames_of(follower, timeout=30)
    thread.join()
    messages = [d["message"] for _, d in frames if d["event"] == "log"]
    assert messages == [f"before-{i}" for i in range(5)] + [f"live-{i}" for i in range(30)]
    assert frames[-1][1]["event"] == "invocation_state" and frames[-1][1]["invocation"]["status"] == "succeeded"


def test_state_changes_stream_live_and_heartbeats_keep_it_open(app, client, invoke, owner_key, frames_of):
    settings.change(app, SSE_HEARTBEAT_SECONDS=0.05, INVOCATION_SYNC_WAIT_SECONDS=0)
    client.patch("/org/projects/Default/limits", json={"max_concurrent_invocations": 1})
    blocker = invoke().get_json()
    queued = invoke().get_json()
    follower = follow(client, queued["id"])

    def later():
        time.sleep(0.2)
        own = client_for(app, owner_key.plaintext)
        own.patch(f"/invocations/{blocker['id']}", json={"status": "succeeded"})
        time.sleep(0.1)
        own.patch(f"/invocations/{queued['id']}", json={"status": "succeeded"})

    thread = threading.Thread(target=later)
    thread.start()
    frames = frames_of(follower, timeout=30)
    thread.join()
    events = [d["event"] for _, d in frames]
    assert "sse_heartbeat" in events
    heartbeat = next(f for f in frames if f[1]["event"] == "sse_heartbeat")
    assert heartbeat[0] is None and heartbeat[1]["timestamp"].endswith("Z")
    states = [d["invocation"]["status"] for _, d in frames if d["event"] == "invocation_state"]
    assert states == ["queued", "running", "succeeded"]


def test_following_an_unknown_invocation_is_404_before_streaming(client):
    response = client.get("/invocations/nope/events")
    assert response.status_code == 404 and response.get_json()["code"] == "not_found"


def test_logs_survive_a_restart(make_app, client, invoke, owner_key, frames_of):
    invocation = invoke().get_json()
    log(client, invocation["id"], "durable")
    client.patch(f"/invocations/{invocation['id']}", json={"status": "succeeded"})
    restarted = client_for(make_app(), owner_key.plaintext)
    messages = [d.get("message") for _, d in frames_of(follow(restarted, invocation["id"])) if d["event"] == "log"]
    assert messages == ["durable"]


def test_a_timed_out_invocation_ends_its_stream(client, invoke, frames_of):
    clock.freeze(clock.now())
    invocation = invoke(async_timeout_seconds=10).get_json()
    clock.advance(seconds=11)
    frames = frames_of(follow(client, invocation["id"]))
    assert frames[-1][1]["invocation"]["status"] == "failed"
    assert "Timed out" in frames[-1][1]["invocation"]["status_reason"]


def test_a_stopping_worker_ends_open_streams(app, client, invoke, frames_of, monkeypatch):
    from app.core import shutdown

    settings.change(app, STREAM_POLL_SECONDS=0.05)
    invocation = invoke().get_json()
    monkeypatch.setattr(shutdown, "stopping", __import__("threading").Event())
    response = follow(client, invocation["id"])  # open before the stop (new streams are refused after it)
    shutdown.stopping.set()
    frames = frames_of(response, timeout=5)
    # Replayed, then an error frame tells the follower the stream was cut, and it ends.
    assert [d["event"] for _, d in frames] == ["invocation_state", "error"]
    assert frames[-1][1]["error"]["code"] == "server_restarting"


def test_install_chains_the_previous_handler(monkeypatch):
    import signal

    from app.core import shutdown

    calls = []
    monkeypatch.setattr(shutdown, "stopping", __import__("threading").Event())
    previous = signal.signal(signal.SIGUSR2, lambda sig, frame: calls.append(sig))
    try:
        shutdown.install(signal.SIGUSR2)
        signal.raise_signal(signal.SIGUSR2)
        assert shutdown.stopping.is_set() and calls == [signal.SIGUSR2]
    finally:
        signal.signal(signal.SIGUSR2, previous)


def test_resuming_after_the_last_event_of_a_finished_invocation_ends_at_once(client, invoke, frames_of):
    invocation = invoke().get_json()
    client.patch(f"/invocations/{invocation['id']}", json={"status": "succeeded"})
    last = frames_of(follow(client, invocation["id"]))[-1][0]
    assert frames_of(follow(client, invocation["id"], headers={"Last-Event-ID": str(last)}), timeout=5) == []


def test_since_holds_while_another_follower_shares_the_tail(app, client, invoke, owner_key, frames_of):
    clock.freeze(clock.parse_rfc3339("2026-06-01T00:00:00Z"))
    invocation = invoke().get_json()
    log(client, invocation["id"], "early-1", "early-2")
    first = follow(client, invocation["id"])
    assert [d.get("message") for _, d in frames_of_open(first, 3)] == [None, "early-1", "early-2"]
    clock.advance(minutes=10)
    second = follow(client, invocation["id"], query="?since=5m")
    assert [d["event"] for _, d in frames_of_open(second, 1)] == ["invocation_state"]  # early lines filtered
    log(client, invocation["id"], "late")
    client.patch(f"/invocations/{invocation['id']}", json={"status": "succeeded"})
    assert [d["message"] for _, d in frames_of(second) if d["event"] == "log"] == ["late"]
    assert [d.get("message") for _, d in frames_of(first) if d["event"] == "log"] == ["late"]


def frames_of_open(response, count):
    """Read `count` frames without closing the response (it keeps following)."""
    import json

    frames, buffer, chunks = [], "", response.response
    while len(frames) < count:
        buffer += next(chunks).decode()
        while "\n\n" in buffer:
            block, buffer = buffer.split("\n\n", 1)
            data = [line[6:] for line in block.splitlines() if line.startswith("data: ")]
            if data:
                frames.append((None, json.loads(data[0])))
    return frames


def test_a_burst_larger_than_one_read_reaches_a_live_follower_whole(app, client, invoke, owner_key, frames_of):
    """Every line of a 1,000-line burst, in order (that it needs no poll interval is
    checked without timing in tests/streams/test_shared_tail.py)."""
    invocation = invoke().get_json()
    follower = follow(client, invocation["id"])

    def burst():
        time.sleep(0.1)
        own = client_for(app, owner_key.plaintext)
        own.post(f"/invocations/{invocation['id']}/logs", json={"lines": [{"message": str(i)} for i in range(1000)]})
        own.patch(f"/invocations/{invocation['id']}", json={"status": "succeeded"})

    thread = threading.Thread(target=burst)
    thread.start()
    frames = frames_of(follower, timeout=30)
    thread.join()
    assert [d["message"] for _, d in frames if d["event"] == "log"] == [str(i) for i in range(1000)]


def test_a_malformed_last_event_id_is_ignored(client, invoke, frames_of):
    invocation = invoke().get_json()
    client.patch(f"/invocations/{invocation['id']}", json={"status": "succeeded"})
    frames = frames_of(follow(client, invocation["id"], headers={"Last-Event-ID": "²"}))
    assert len(frames) == 2


def test_followers_give_back_their_tail_and_finished_channels_are_dropped(app, client, invoke, frames_of):
    from app.invocations.stream import tails

    invocation = invoke().get_json()
    response = follow(client, invocation["id"])
    frames_of_open(response, 1)
    assert len(tails) == 1
    response.close()
    assert len(tails) == 0
    client.patch(f"/invocations/{invocation['id']}", json={"status": "succeeded"})
    assert f"invocation:{invocation['id']}" not in app.extensions["channels"]._channels
