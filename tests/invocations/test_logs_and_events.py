"""Invocation logs and the events stream (spec part 6, contract section 4 and 6.6)."""
import threading
import time

from app.core import clock
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
    app.config["INVOCATION_LOG_LINE_MAX_BYTES"] = 10
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
    app.config["SSE_HEARTBEAT_SECONDS"] = 0.05
    app.config["INVOCATION_SYNC_WAIT_SECONDS"] = 0
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

    app.config["STREAM_POLL_SECONDS"] = 0.05
    invocation = invoke().get_json()
    monkeypatch.setattr(shutdown, "stopping", __import__("threading").Event())
    shutdown.stopping.set()
    frames = frames_of(follow(client, invocation["id"]), timeout=5)
    assert [d["event"] for _, d in frames] == ["invocation_state"]  # replayed, then the stream ended


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
