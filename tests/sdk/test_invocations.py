"""client.invocations.* through the official SDK against the live gunicorn + gevent server.

Lantern extensions used here to play the worker that runs an invocation:
`POST /invocations/{id}/logs` (log lines) and `PATCH` with `status: running` or a
`status_reason`. Every test works in a project of its own, so listings and caps
never see another test's invocations.
"""
import json
import queue
import threading
import time

import httpx
import kernel
import pytest
from kernel.types import (
    HeartbeatEvent,
    InvocationCreateResponse,
    InvocationListBrowsersResponse,
    InvocationListResponse,
    InvocationRetrieveResponse,
    InvocationStateEvent,
    InvocationUpdateResponse,
    LogEvent,
)

from tests.live_server import serve_with_organization
from tests.sdk.conftest import unique
from tests.waiting import eventually

# Bounds every wait: a read that gets nothing for this long fails the test instead of hanging.
# Above the server's 15 s heartbeat interval, so an idle stream never trips it.
READ_TIMEOUT = 30.0
FOLLOW_SECONDS = 60.0
POLL_SECONDS = 0.05


@pytest.fixture
def project_client(sdk, make_client, live_server):
    """project_client() -> a strict client scoped to a brand-new project of the shared organization."""
    def make(**options):
        project = sdk.projects.create(name=unique("inv"))
        options.setdefault("timeout", READ_TIMEOUT)
        return make_client(live_server.api_key, project_id=project.id, **options)
    return make


@pytest.fixture
def client(project_client):
    return project_client()


def invoke(client, **fields):
    fields.setdefault("app_name", "shop")
    fields.setdefault("action_name", "checkout")
    fields.setdefault("version", "1")
    fields.setdefault("async_", True)
    return client.invocations.create(**fields)


def post_logs(client, invocation_id, *messages, timestamp=None):
    """Lantern extension: append log lines as the invocation's worker would; returns the JSON answer."""
    lines = [{"message": message, **({"timestamp": timestamp} if timestamp else {})} for message in messages]
    body = {"message": messages[0]} if len(messages) == 1 and not timestamp else {"lines": lines}
    return client.post(f"/invocations/{invocation_id}/logs", body=body, cast_to=object)


def record_fields(record):
    return {"id", "app_name", "action_name", "version", "status", "started_at"} <= record.model_fields_set


def ids(items):
    return [item.id for item in items]


# --- create / retrieve ---------------------------------------------------------------------------

def test_async_create_answers_202_with_the_new_invocation(client):
    payload = json.dumps({"cart": [1, 2, 3]})
    raw = client.invocations.with_raw_response.create(
        app_name="shop", action_name="checkout", version="1.2.0", async_=True, async_timeout_seconds=60,
        payload=payload)
    assert raw.status_code == 202
    created = raw.parse()
    assert isinstance(created, InvocationCreateResponse)
    assert created.id and created.action_name == "checkout"
    assert created.status == "running"  # nothing else is running: admitted at once
    assert created.status_reason is None and created.output is None

    got = client.invocations.retrieve(created.id)
    assert isinstance(got, InvocationRetrieveResponse)
    assert record_fields(got)
    assert (got.id, got.app_name, got.action_name, got.version, got.status) == (
        created.id, "shop", "checkout", "1.2.0", "running")
    assert got.payload == payload
    assert got.finished_at is None and got.output is None and got.status_reason is None
    assert got.started_at.tzinfo is not None


def test_create_without_a_payload_has_none(client):
    created = invoke(client)
    assert client.invocations.retrieve(created.id).payload is None


@pytest.mark.parametrize("fields", [
    {"payload": "not json"},
    {"async_timeout_seconds": 9},
    {"async_timeout_seconds": 3601},
    {"app_name": ""},
    {"async_": False, "async_timeout_seconds": 60},
], ids=["payload-not-json", "timeout-too-short", "timeout-too-long", "empty-app-name", "timeout-without-async"])
def test_invalid_creates_are_rejected(client, fields):
    with pytest.raises(kernel.BadRequestError) as caught:
        invoke(client, **fields)
    assert caught.value.body["code"] == "bad_request"
    assert list(client.invocations.list()) == []


@pytest.mark.parametrize("ending", ["succeeded", "failed"])
def test_sync_create_blocks_until_the_invocation_finishes(project_client, ending):
    caller = project_client()
    worker = caller.with_options()  # the same project
    app_name = unique("sync")
    result = queue.Queue()

    def call():
        try:
            result.put(caller.invocations.create(app_name=app_name, action_name="run", version="1",
                                                 payload='{"n": 1}'))
        except Exception as error:  # handed to the test thread
            result.put(error)

    thread = threading.Thread(target=call)
    thread.start()
    try:
        running = eventually(lambda: list(worker.invocations.list(app_name=app_name, status="running")),
                             READ_TIMEOUT, interval=POLL_SECONDS)
        assert running, "timed out waiting for the sync invocation to start"
        [invocation] = running
        assert result.empty()  # still waiting for the worker
        post_logs(worker, invocation.id, "working")
        assert result.empty()  # log lines do not end the wait
        if ending == "succeeded":
            worker.invocations.update(invocation.id, status="succeeded", output='{"total": 6}')
        else:
            worker.invocations.update(invocation.id, status="failed", extra_body={"status_reason": "card declined"})
        outcome = result.get(timeout=READ_TIMEOUT)
    finally:
        for live in worker.invocations.list(app_name=app_name, status="running"):  # only if something failed
            worker.invocations.update(live.id, status="failed")
        thread.join(timeout=READ_TIMEOUT)
    assert not thread.is_alive()
    assert not isinstance(outcome, Exception), outcome
    assert isinstance(outcome, InvocationCreateResponse)
    assert outcome.id == invocation.id and outcome.status == ending and outcome.action_name == "run"
    if ending == "succeeded":
        assert outcome.output == '{"total": 6}' and outcome.status_reason is None
    else:
        assert outcome.status_reason == "card declined"


def test_sync_create_over_the_project_cap_is_429_naming_the_limit(sdk, project_client):
    client = project_client()
    project_id = client.project_id
    sdk.projects.limits.update(project_id, max_concurrent_invocations=1)
    running = invoke(client)
    assert running.status == "running"

    with pytest.raises(kernel.RateLimitError) as caught:
        client.invocations.create(app_name="shop", action_name="checkout", version="1")
    error = caught.value
    assert error.status_code == 429
    assert int(error.response.headers["Retry-After"]) > 0
    body = error.body
    assert body["code"] == "concurrency_limit_exceeded"
    [detail] = body["details"]
    assert (detail["scope"], detail["limit"], detail["usage"]) == ("project", 1, 1)
    assert detail["code"] == "max_concurrent_invocations"
    assert "max_concurrent_invocations" in body["message"]
    # Refused, not recorded.
    assert ids(client.invocations.list()) == [running.id]

    # An async create over the cap queues instead.
    queued = client.invocations.with_raw_response.create(app_name="shop", action_name="checkout", version="1",
                                                         async_=True)
    assert queued.status_code == 202 and queued.parse().status == "queued"


def test_retrieve_of_unknown_or_other_projects_invocations_is_not_found(project_client):
    mine, theirs = project_client(), project_client()
    invocation = invoke(theirs)
    for ref in ("no-such-invocation", invocation.id):
        with pytest.raises(kernel.NotFoundError):
            mine.invocations.retrieve(ref)
        with pytest.raises(kernel.NotFoundError):
            mine.invocations.update(ref, status="succeeded")
        with pytest.raises(kernel.NotFoundError):
            mine.invocations.list_browsers(ref)
        with pytest.raises(kernel.NotFoundError):
            mine.invocations.delete_browsers(ref)
    assert theirs.invocations.retrieve(invocation.id).status == "running"


# --- update ---------------------------------------------------------------------------------------

def test_update_succeeded_with_output(client):
    created = invoke(client)
    updated = client.invocations.update(created.id, status="succeeded", output='{"ok": true}')
    assert isinstance(updated, InvocationUpdateResponse)
    assert record_fields(updated)
    assert (updated.id, updated.status, updated.output) == (created.id, "succeeded", '{"ok": true}')
    assert updated.status_reason is None
    assert updated.finished_at is not None and updated.finished_at >= updated.started_at
    got = client.invocations.retrieve(created.id)
    assert (got.status, got.output, got.finished_at) == ("succeeded", '{"ok": true}', updated.finished_at)


def test_update_failed_cancels_with_a_reason(client):
    created = invoke(client)
    cancelled = client.invocations.update(created.id, status="failed")
    assert cancelled.status == "failed" and cancelled.finished_at is not None
    assert cancelled.status_reason  # non-empty, present because it failed

    other = invoke(client)
    failed = client.invocations.update(other.id, status="failed", output='{"error": "boom"}',
                                       extra_body={"status_reason": "The card was declined."})
    assert (failed.status, failed.status_reason, failed.output) == (
        "failed", "The card was declined.", '{"error": "boom"}')


def test_update_failed_cancels_a_queued_invocation(sdk, client):
    sdk.projects.limits.update(client.project_id, max_concurrent_invocations=1)
    running, queued = invoke(client), invoke(client)
    assert (running.status, queued.status) == ("running", "queued")
    cancelled = client.invocations.update(queued.id, status="failed")
    assert cancelled.status == "failed" and cancelled.status_reason and cancelled.finished_at is not None
    assert client.invocations.retrieve(running.id).status == "running"


def test_output_alone_is_stored_and_keeps_the_status(client):
    created = invoke(client)
    # `status` is required by the SDK's types, but the server also takes output alone.
    got = client.patch(f"/invocations/{created.id}", body={"output": '"half"'}, cast_to=InvocationUpdateResponse)
    assert (got.status, got.output, got.finished_at) == ("running", '"half"', None)
    assert client.invocations.retrieve(created.id).output == '"half"'
    with pytest.raises(kernel.BadRequestError):
        client.patch(f"/invocations/{created.id}", body={}, cast_to=InvocationUpdateResponse)


def test_a_finished_invocation_is_final(client):
    created = invoke(client)
    client.invocations.update(created.id, status="succeeded", output='"done"')

    with pytest.raises(kernel.ConflictError) as caught:
        client.invocations.update(created.id, status="failed")
    assert caught.value.response.headers["x-should-retry"] == "false"
    assert caught.value.body["code"] == "invocation_finished"

    again = client.invocations.update(created.id, status="succeeded")  # the same status: a no-op
    assert (again.status, again.output) == ("succeeded", '"done"')
    assert client.invocations.retrieve(created.id).status == "succeeded"

    failed = invoke(client)
    client.invocations.update(failed.id, status="failed")
    with pytest.raises(kernel.ConflictError) as caught:
        client.invocations.update(failed.id, status="succeeded")
    assert caught.value.response.headers["x-should-retry"] == "false"


def test_update_with_an_invalid_status_or_output_is_rejected(client):
    created = invoke(client)
    with pytest.raises(kernel.BadRequestError):
        client.invocations.update(created.id, status="done")  # type: ignore[arg-type]
    with pytest.raises(kernel.BadRequestError):
        client.invocations.update(created.id, status="succeeded", output="not json")
    with pytest.raises(kernel.BadRequestError):  # a reason only explains a failure
        client.invocations.update(created.id, status="succeeded", extra_body={"status_reason": "why"})
    assert client.invocations.retrieve(created.id).status == "running"


def test_running_is_set_by_the_worker_when_there_is_room(sdk, client):
    sdk.projects.limits.update(client.project_id, max_concurrent_invocations=1)
    first, second = invoke(client), invoke(client)
    assert second.status == "queued"
    with pytest.raises(kernel.RateLimitError) as caught:
        client.invocations.update(second.id, status="running")  # type: ignore[arg-type]
    assert caught.value.body["details"][0]["scope"] == "project"
    sdk.projects.limits.update(client.project_id, max_concurrent_invocations=2)
    started = client.invocations.update(second.id, status="running")  # type: ignore[arg-type]
    assert started.status == "running" and started.finished_at is None
    assert client.invocations.update(first.id, status="running").status == "running"  # type: ignore[arg-type]


# --- list -----------------------------------------------------------------------------------------

@pytest.fixture
def catalogue(client):
    """Five invocations in one project, created oldest first; returns them by short name."""
    made = {
        "a": invoke(client, app_name="shop", action_name="checkout", version="1"),
        "b": invoke(client, app_name="shop", action_name="refund", version="2"),
        "c": invoke(client, app_name="crawler", action_name="checkout", version="1"),
        "d": invoke(client, app_name="crawler", action_name="crawl", version="2"),
        "e": invoke(client, app_name="mailer", action_name="send", version="1"),
    }
    client.invocations.update(made["b"].id, status="succeeded", output="{}")
    client.invocations.update(made["d"].id, status="failed")
    return {name: invocation.id for name, invocation in made.items()}


def test_list_is_newest_first_with_full_records(client, catalogue):
    listed = list(client.invocations.list())
    assert ids(listed) == [catalogue[name] for name in "edcba"]
    assert all(isinstance(item, InvocationListResponse) and record_fields(item) for item in listed)
    by_id = {item.id: item for item in listed}
    assert by_id[catalogue["b"]].output == "{}" and by_id[catalogue["b"]].finished_at is not None
    assert by_id[catalogue["d"]].status_reason
    assert by_id[catalogue["a"]].to_dict() == client.invocations.retrieve(catalogue["a"]).to_dict()


@pytest.mark.parametrize("filters, expected", [
    ({"app_name": "shop"}, "ba"),
    ({"app_name": "nobody"}, ""),
    ({"action_name": "checkout"}, "ca"),
    ({"version": "2"}, "db"),
    ({"app_name": "crawler", "version": "1"}, "c"),
    ({"status": "running"}, "eca"),
    ({"status": "succeeded"}, "b"),
    ({"status": "failed"}, "d"),
    ({"status": "queued"}, ""),
    ({"query": "crawl"}, "dc"),  # app or action name contains it
    ({"query": "send"}, "e"),
    ({"since": "5m"}, "edcba"),
    ({"since": "2000-01-01T00:00:00Z"}, "edcba"),
    ({"since": "2999-01-01T00:00:00Z"}, ""),
    ({"since": "5m", "status": "running", "app_name": "shop"}, "a"),
    ({"deployment_id": "dep_1"}, ""),  # Lantern runs no deployments
], ids=lambda value: json.dumps(value) if isinstance(value, dict) else value)
def test_list_filters(client, catalogue, filters, expected):
    assert ids(client.invocations.list(**filters)) == [catalogue[name] for name in expected]


def test_list_query_matches_an_exact_id(client, catalogue):
    assert ids(client.invocations.list(query=catalogue["c"])) == [catalogue["c"]]
    assert ids(client.invocations.list(query=catalogue["c"][:-1])) == []


@pytest.mark.parametrize("filters", [{"since": "yesterday"}, {"status": "done"}, {"limit": 0}, {"limit": 101},
                                     {"offset": -1}])
def test_list_rejects_invalid_filters(client, filters):
    with pytest.raises(kernel.BadRequestError):
        client.invocations.list(**filters)


def test_list_pages_and_auto_pager(client):
    made = [invoke(client, action_name=f"step-{i}").id for i in range(7)]
    newest_first = made[::-1]

    raw = client.invocations.with_raw_response.list(limit=3)
    assert (raw.headers["x-has-more"], raw.headers["x-next-offset"]) == ("true", "3")
    first = raw.parse()
    assert ids(first.items) == newest_first[:3] and first.has_next_page()
    second = first.get_next_page()
    assert ids(second.items) == newest_first[3:6]
    third = second.get_next_page()
    assert ids(third.items) == newest_first[6:] and not third.has_next_page()
    last = client.invocations.with_raw_response.list(limit=3, offset=6)
    assert (last.headers["x-has-more"], last.headers["x-next-offset"]) == ("false", "0")

    assert ids(client.invocations.list(limit=3)) == newest_first  # the auto-pager walks every page
    assert ids(client.invocations.list(limit=2, offset=5)) == newest_first[5:]
    assert ids(client.invocations.list(limit=4, action_name="step-2")) == [made[2]]


# --- browsers -------------------------------------------------------------------------------------

def test_browsers_of_an_invocation_are_empty(client):
    created = invoke(client)
    browsers = client.invocations.list_browsers(created.id)
    assert isinstance(browsers, InvocationListBrowsersResponse)
    assert browsers.browsers == []
    assert client.invocations.delete_browsers(created.id) is None
    raw = client.invocations.with_raw_response.delete_browsers(created.id)
    assert raw.status_code in (200, 204)
    assert client.invocations.list_browsers(created.id).browsers == []
    assert client.invocations.retrieve(created.id).status == "running"  # untouched


# --- follow ---------------------------------------------------------------------------------------

def assert_typed(events):
    for event in events:
        assert isinstance(event, (LogEvent, InvocationStateEvent, HeartbeatEvent)), event
        assert event.timestamp.tzinfo is not None
        if isinstance(event, InvocationStateEvent):
            assert record_fields(event.invocation)


def messages(events):
    return [event.message for event in events if isinstance(event, LogEvent)]


def states(events):
    return [event.invocation.status for event in events if isinstance(event, InvocationStateEvent)]


def is_terminal(event):
    return isinstance(event, InvocationStateEvent) and event.invocation.status in ("succeeded", "failed")


def follow_to_end(client, invocation_id, on_event=None, **params):
    """Iterate follow() until the server ends the stream; returns the events, checked for type.

    Bounded: nothing may follow the terminal state (a server that kept the stream
    open would send a heartbeat within 15 s), the client's read timeout covers
    silence, and the whole follow must end within FOLLOW_SECONDS.
    """
    events = []
    deadline = time.monotonic() + FOLLOW_SECONDS
    with client.invocations.follow(invocation_id, **params) as stream:
        for event in stream:
            assert not (events and is_terminal(events[-1])), f"{event!r} after the terminal state"
            events.append(event)
            if on_event is not None:
                on_event(event)
            assert time.monotonic() < deadline, f"the stream did not end within {FOLLOW_SECONDS} s: {events}"
        assert stream.response.is_closed
    assert_typed(events)
    assert events and is_terminal(events[-1])
    return events


class Worker:
    """Plays the invocation's worker in a thread once the follower saw its first event.

    Whatever happens, the invocation ends (so the follower's stream ends); the
    worker's errors fail the test when the `with` block exits.
    """

    def __init__(self, client, invocation_id, work):
        self.client, self.invocation_id, self.work = client, invocation_id, work
        self.started, self.errors = threading.Event(), []
        self.thread = threading.Thread(target=self.run)

    def run(self):
        try:
            if not self.started.wait(timeout=READ_TIMEOUT):
                raise AssertionError("the follower never received its first event")
            self.work()
        except Exception as error:  # raised again in the test thread
            self.errors.append(error)
            self.client.invocations.update(self.invocation_id, status="failed")

    def on_event(self, event):
        self.started.set()

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.started.set()
        self.thread.join(timeout=READ_TIMEOUT)
        assert not self.thread.is_alive(), "the worker thread hung"
        assert not self.errors, self.errors


def test_follow_receives_every_live_line_once_in_order_and_ends(project_client):
    follower = project_client()
    worker = follower.with_options()  # the same project
    created = invoke(follower)
    lines = [f"line {i}: {'x' * (i % 7)}" for i in range(60)]

    def work():
        post_logs(worker, created.id, lines[0])  # one line, then batches
        for start in range(1, len(lines), 10):
            batch = lines[start:start + 10]
            assert post_logs(worker, created.id, *batch) == {"accepted": len(batch)}
        worker.invocations.update(created.id, status="succeeded", output='"all done"')

    with Worker(worker, created.id, work) as playing:
        events = follow_to_end(follower, created.id, on_event=playing.on_event)

    assert messages(events) == lines
    assert states(events) == ["running", "succeeded"]
    assert isinstance(events[0], InvocationStateEvent)  # the state it was in when the follower connected
    last = events[-1].invocation
    assert (last.id, last.status, last.output) == (created.id, "succeeded", '"all done"')
    assert last.finished_at is not None and last.status_reason is None


def test_follow_sees_queued_then_running_then_failed(sdk, project_client):
    client = project_client()
    sdk.projects.limits.update(client.project_id, max_concurrent_invocations=1)
    blocker, queued = invoke(client), invoke(client)
    assert queued.status == "queued"

    def work():
        client.invocations.update(blocker.id, status="succeeded")  # promotes the queued one
        post_logs(client, queued.id, "started")
        client.invocations.update(queued.id, status="failed", extra_body={"status_reason": "gave up"})

    with Worker(client, queued.id, work) as playing:
        events = follow_to_end(client.with_options(), queued.id, on_event=playing.on_event)
    assert states(events) == ["queued", "running", "failed"]
    assert messages(events) == ["started"]
    assert events[-1].invocation.status_reason == "gave up"


def test_follow_of_a_finished_invocation_replays_and_ends(client):
    created = invoke(client)
    post_logs(client, created.id, "one")
    post_logs(client, created.id, "two", "three")
    client.invocations.update(created.id, status="succeeded", output="3")

    for _ in range(2):  # replays are repeatable
        events = follow_to_end(client, created.id)
        assert messages(events) == ["one", "two", "three"]
        assert states(events) == ["running", "succeeded"]
        assert events[-1].invocation.output == "3"


def test_follow_since_filters_the_stored_lines(client):
    created = invoke(client)
    post_logs(client, created.id, "old 1", "old 2", timestamp="2020-01-01T00:00:00Z")
    post_logs(client, created.id, "2021", timestamp="2021-06-01T12:00:00+02:00")
    post_logs(client, created.id, "recent 1", "recent 2")
    client.invocations.update(created.id, status="succeeded")

    def replay(**params):
        events = follow_to_end(client, created.id, **params)
        assert states(events) == ["running", "succeeded"]  # state changes are never filtered out
        return messages(events)

    assert replay() == ["old 1", "old 2", "2021", "recent 1", "recent 2"]
    assert replay(since="2020-06-01T00:00:00Z") == ["2021", "recent 1", "recent 2"]
    assert replay(since="2021-06-01T10:00:00Z") == ["2021", "recent 1", "recent 2"]  # same instant, inclusive
    assert replay(since="2021-06-01T10:00:01Z") == ["recent 1", "recent 2"]
    assert replay(since="5m") == ["recent 1", "recent 2"]
    assert replay(since="2999-01-01T00:00:00Z") == []
    with pytest.raises(kernel.BadRequestError):
        client.invocations.follow(created.id, since="not a time")


def test_follow_since_still_delivers_later_live_lines(client):
    created = invoke(client)
    post_logs(client, created.id, "before", timestamp="2020-01-01T00:00:00Z")

    def work():
        post_logs(client, created.id, "live, with an old timestamp", timestamp="2020-01-01T00:00:00Z")
        client.invocations.update(created.id, status="succeeded")

    with Worker(client, created.id, work) as playing:
        events = follow_to_end(client.with_options(), created.id, on_event=playing.on_event, since="5m")
    # `since` filters what was stored when the follower connected, not what arrives later.
    assert messages(events) == ["live, with an old timestamp"]
    assert states(events) == ["running", "succeeded"]


def test_follow_of_an_unknown_or_foreign_invocation_is_not_found(project_client):
    mine, theirs = project_client(), project_client()
    foreign = invoke(theirs)
    for ref in ("no-such-invocation", foreign.id):
        with pytest.raises(kernel.NotFoundError) as caught:
            mine.invocations.follow(ref)
        assert caught.value.body["code"] == "not_found"


def test_follow_resumes_after_last_event_id(client):
    created = invoke(client)
    post_logs(client, created.id, "a", "b", "c")
    client.invocations.update(created.id, status="succeeded")
    # The SDK's events carry no SSE id; read them off the wire to know where to resume.
    with client.invocations.with_streaming_response.follow(created.id) as raw:
        assert raw.headers["content-type"].startswith("text/event-stream")
        assert raw.headers["cache-control"] == "no-cache"
        frame_ids = [int(line[3:].strip()) for line in raw.iter_lines() if line.startswith("id:")]
    assert len(frame_ids) == 5 and frame_ids == sorted(frame_ids)  # running, a, b, c, succeeded

    events = follow_to_end(client, created.id, extra_headers={"Last-Event-ID": str(frame_ids[1])})
    assert messages(events) == ["b", "c"] and states(events) == ["succeeded"]


@pytest.fixture(scope="module")
def beating_every_second(tmp_path_factory):
    """A strict client of a server of its own whose idle streams beat every second (the shared one's beat every
    15 s: a test would wait that long for one)."""
    with serve_with_organization(tmp_path_factory.mktemp("heartbeats"), "Heartbeats",
                                 env_updates={"LANTERN_SSE_HEARTBEAT_SECONDS": "1"}) as served:
        with kernel.Kernel(api_key=served.api_key, base_url=served.base_url, max_retries=0, timeout=READ_TIMEOUT,
                           _strict_response_validation=True) as client:
            yield client


def test_an_idle_follower_gets_heartbeats(beating_every_second):
    client = beating_every_second
    created = invoke(client)
    finisher = client.with_options()

    def on_event(event):
        if isinstance(event, HeartbeatEvent):
            finisher.invocations.update(created.id, status="succeeded")

    events = follow_to_end(client, created.id, on_event=on_event)
    assert [type(event) for event in events] == [InvocationStateEvent, HeartbeatEvent, InvocationStateEvent]
    assert events[1].event == "sse_heartbeat"
    assert states(events) == ["running", "succeeded"]


def test_a_follower_that_leaves_early_does_not_disturb_the_others(client):
    created = invoke(client)
    post_logs(client, created.id, "first")
    leaver = client.with_options().invocations.follow(created.id)
    assert isinstance(next(iter(leaver)), InvocationStateEvent)
    leaver.close()  # the server notices on its next write and drops the stream

    post_logs(client, created.id, "second")
    client.invocations.update(created.id, status="succeeded")
    events = follow_to_end(client, created.id)
    assert messages(events) == ["first", "second"] and states(events) == ["running", "succeeded"]
    assert client.invocations.retrieve(created.id).status == "succeeded"


# --- log lines (Lantern extension) ---------------------------------------------------------------

def test_log_lines_of_a_finished_invocation_are_refused(client):
    created = invoke(client)
    client.invocations.update(created.id, status="succeeded")
    with pytest.raises(kernel.ConflictError) as caught:
        post_logs(client, created.id, "too late")
    assert caught.value.response.headers["x-should-retry"] == "false"


def test_log_lines_need_a_message(client):
    created = invoke(client)
    for body in ({}, {"lines": []}, {"message": "x", "lines": [{"message": "y"}]}, {"lines": [{}]}):
        with pytest.raises(kernel.BadRequestError):
            client.post(f"/invocations/{created.id}/logs", body=body, cast_to=object)


def test_log_lines_by_plain_http_with_the_bearer_key(client, live_server):
    created = invoke(client)
    headers = {"Authorization": f"Bearer {live_server.api_key}", "X-Kernel-Project-Id": client.project_id}
    with httpx.Client(base_url=live_server.base_url, headers=headers, timeout=READ_TIMEOUT) as http:
        answer = http.post(f"/invocations/{created.id}/logs", json={"lines": [{"message": "p"}, {"message": "q"}]})
        assert answer.status_code == 201 and answer.json() == {"accepted": 2}
        refused = http.post(f"/invocations/{created.id}/logs", json={"message": "r"},
                            headers={"Authorization": "Bearer wrong"})
        assert refused.status_code == 401
    client.invocations.update(created.id, status="succeeded")
    assert messages(follow_to_end(client, created.id)) == ["p", "q"]


def test_over_long_log_lines_are_truncated_with_a_marker(client):
    created = invoke(client)
    limit = 16 * 1024  # the server's INVOCATION_LOG_LINE_MAX_BYTES
    long_line = "x" + "é" * limit  # two bytes each after one: the cut falls inside a character
    assert post_logs(client, created.id, "short", long_line) == {"accepted": 2}
    client.invocations.update(created.id, status="succeeded")
    short, kept = messages(follow_to_end(client, created.id))
    assert short == "short"
    head = "x" + "é" * (limit // 2 - 1)  # whole characters only, up to the limit in bytes
    assert kept.startswith(head) and kept[len(head)] != "é" and "[truncated" in kept[len(head):]
    assert len(kept.encode()) < len(long_line.encode())
