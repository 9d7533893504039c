"""Race-free admission under the concurrency caps, against the live gunicorn + gevent server.

Many clients create invocations at the same moment (a Barrier releases them
together); the server must never let more than the cap run, must queue the
rest of the async ones in the order it admitted them, and must promote them
FIFO as slots free.
"""
import queue
import threading

import kernel
import pytest

from tests.sdk.conftest import unique
from tests.waiting import eventually

CAP = 3
CALLERS = 20
TIMEOUT = 30.0  # bounds every request and every wait


@pytest.fixture
def org(live_server, make_client):
    """A brand-new organization: its key, a client, and its default project capped at CAP."""
    name = unique("admission")
    key = live_server.new_org(name)
    client = make_client(key, timeout=TIMEOUT)
    [project] = list(client.projects.list())
    client.projects.limits.update(project.id, max_concurrent_invocations=CAP)
    return {"name": name, "key": key, "client": client}


def fifo(invocations):
    """Admission order: the server stamps started_at under the organization's lock."""
    return sorted(invocations, key=lambda invocation: (invocation.started_at, invocation.id))


def running_ids(client):
    return {invocation.id for invocation in client.invocations.list(status="running", limit=100)}


def warm_up(client):
    """One request first, so the burst does not wait on new connections (and arrives at once)."""
    client.invocations.list(limit=1)


def in_parallel(clients, call):
    """Run call(client, index) for each client at once; returns results (or exceptions) by index."""
    barrier = threading.Barrier(len(clients))
    results = [None] * len(clients)

    def run(index, client):
        try:
            warm_up(client)
            barrier.wait(timeout=TIMEOUT)
            results[index] = call(client, index)
        except Exception as error:  # handed to the test thread
            results[index] = error

    threads = [threading.Thread(target=run, args=(index, client)) for index, client in enumerate(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=TIMEOUT)
    assert not any(thread.is_alive() for thread in threads), "a caller hung"
    return results


class RunningWatcher:
    """Polls list(status="running") in a thread while something happens; records the largest count."""

    def __init__(self, client):
        self.client, self.counts, self.errors = client, [], []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.watch)

    def watch(self):
        while not self.done.is_set():
            try:
                self.counts.append(len(running_ids(self.client)))
            except Exception as error:
                self.errors.append(error)
                return

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join(timeout=TIMEOUT)
        assert not self.errors, self.errors
        # One final count: the watcher's last poll may have started before the burst ended.
        self.counts.append(len(running_ids(self.client)))


def test_parallel_async_creates_never_exceed_the_cap_and_queue_fifo(org, make_client):
    client = org["client"]
    callers = [make_client(org["key"], timeout=TIMEOUT) for _ in range(CALLERS)]

    def create(caller, index):
        raw = caller.invocations.with_raw_response.create(
            app_name="burst", action_name=f"call-{index}", version="1", async_=True)
        assert raw.status_code == 202
        return raw.parse()

    with RunningWatcher(client.with_options()) as watcher:
        created = in_parallel(callers, create)
    errors = [result for result in created if isinstance(result, Exception)]
    assert not errors, errors
    assert max(watcher.counts) <= CAP

    statuses = [invocation.status for invocation in created]
    assert statuses.count("running") == CAP and statuses.count("queued") == CALLERS - CAP
    records = fifo([client.invocations.retrieve(invocation.id) for invocation in created])
    by_id = {invocation.id: invocation.status for invocation in created}
    # The first CAP admitted run; everything admitted after them waits.
    assert [by_id[record.id] for record in records] == ["running"] * CAP + ["queued"] * (CALLERS - CAP)
    assert running_ids(client) == {record.id for record in records[:CAP]}
    queued = [invocation.id for invocation in client.invocations.list(status="queued", limit=100)]
    assert queued == [record.id for record in records[CAP:]][::-1]  # the list is newest first

    # Finish running invocations one at a time (oldest running first, alternating how they end):
    # each finish promotes exactly the oldest queued invocation.
    running = [record.id for record in records[:CAP]]
    waiting = [record.id for record in records[CAP:]]
    finished = 0
    while running:
        done = running.pop(0)
        ending = "succeeded" if finished % 2 == 0 else "failed"
        assert client.invocations.update(done, status=ending).status == ending
        finished += 1
        if waiting:
            promoted = waiting.pop(0)
            running.append(promoted)
            assert client.invocations.retrieve(promoted).status == "running"
        now_running = running_ids(client)
        assert now_running == set(running) and len(now_running) <= CAP
        assert [i.id for i in client.invocations.list(status="queued", limit=100)] == waiting[::-1]
    assert finished == CALLERS
    assert len(list(client.invocations.list(status="succeeded"))) == (CALLERS + 1) // 2
    assert len(list(client.invocations.list(status="failed"))) == CALLERS // 2


def test_parallel_sync_creates_admit_exactly_the_cap_and_refuse_the_rest(org, make_client):
    client = org["client"]
    callers = [make_client(org["key"], timeout=TIMEOUT) for _ in range(CALLERS)]
    outcomes = queue.Queue()
    barrier = threading.Barrier(CALLERS)

    def create(caller, index):
        try:
            warm_up(caller)
            barrier.wait(timeout=TIMEOUT)
            outcomes.put(caller.invocations.create(app_name="sync-burst", action_name=f"call-{index}", version="1"))
        except Exception as error:
            outcomes.put(error)

    threads = [threading.Thread(target=create, args=(caller, index)) for index, caller in enumerate(callers)]
    for thread in threads:
        thread.start()
    results = []
    try:
        # The callers over the cap come back at once with 429; the admitted ones wait for their result.
        for _ in range(CALLERS - CAP):
            results.append(outcomes.get(timeout=TIMEOUT))
        running = wait_for_running(client, CAP)
        assert outcomes.empty()  # nothing else came back: the CAP admitted ones still wait
        for invocation_id in running:
            client.invocations.update(invocation_id, status="succeeded", output=f'"{invocation_id}"')
        for _ in range(CAP):
            results.append(outcomes.get(timeout=TIMEOUT))
    finally:
        # Whatever went wrong, end every live invocation so no caller hangs.
        for status in ("running", "queued"):
            for invocation in client.invocations.list(status=status, limit=100):
                client.invocations.update(invocation.id, status="failed")
        for thread in threads:
            thread.join(timeout=TIMEOUT)

    refused = [result for result in results if isinstance(result, kernel.RateLimitError)]
    answered = [result for result in results if not isinstance(result, Exception)]
    assert len(refused) == CALLERS - CAP and len(answered) == CAP, results
    for error in refused:
        detail = error.body["details"][0]
        assert (detail["scope"], detail["limit"], detail["usage"]) == ("project", CAP, CAP)
        assert int(error.response.headers["Retry-After"]) > 0
    assert {invocation.status for invocation in answered} == {"succeeded"}
    assert all(invocation.output == f'"{invocation.id}"' for invocation in answered)
    assert len(list(client.invocations.list())) == CAP  # refused creates leave nothing behind


def wait_for_running(client, count):
    running = set()

    def reached():
        nonlocal running
        running = running_ids(client)
        assert len(running) <= count  # never more than the cap, at any look
        return len(running) == count

    assert eventually(reached, TIMEOUT, interval=0.05), f"expected {count} running, have {len(running)}"
    return running


def test_parallel_creates_across_projects_respect_the_organization_cap(live_server, org, make_client):
    client = org["client"]
    live_server.cli("orgs", "set-limit", "--org", org["name"], "--max-concurrent-invocations", str(CAP))
    projects = [client.projects.create(name=unique("p")).id for _ in range(4)]  # no project caps
    callers = [make_client(org["key"], timeout=TIMEOUT, project_id=projects[index % len(projects)])
               for index in range(CALLERS)]

    def create(caller, index):
        return caller.invocations.create(app_name="org-burst", action_name=f"call-{index}", version="1",
                                         async_=True)

    created = in_parallel(callers, create)
    errors = [result for result in created if isinstance(result, Exception)]
    assert not errors, errors
    statuses = [invocation.status for invocation in created]
    assert statuses.count("running") == CAP and statuses.count("queued") == CALLERS - CAP

    scoped = {project_id: client.with_options(project_id=project_id) for project_id in projects}
    owner = {invocation.id: callers[index].project_id for index, invocation in enumerate(created)}

    def running_now():
        return {i.id for c in scoped.values() for i in c.invocations.list(status="running", limit=100)}

    assert len(running_now()) == CAP
    with pytest.raises(kernel.RateLimitError) as caught:
        scoped[projects[0]].invocations.create(app_name="late", action_name="sync", version="1")
    assert caught.value.body["details"][0]["scope"] == "organization"

    # Promotion is FIFO across the organization's projects.
    records = fifo([scoped[owner[i.id]].invocations.retrieve(i.id) for i in created])
    running = [record.id for record in records[:CAP]]
    waiting = [record.id for record in records[CAP:]]
    assert running_now() == set(running)
    while running:
        done = running.pop(0)
        scoped[owner[done]].invocations.update(done, status="succeeded")
        if waiting:
            running.append(waiting.pop(0))
        assert running_now() == set(running)
