"""Nothing about a key is remembered between requests (#15 part 2): once deleted, it is refused by
every worker at once, including a worker that had just authenticated it."""
import re
import uuid

import httpx

from tests.live_server import serve_with_organization

ATTEMPTS = 200


def served_by(log_path, request_id):
    """The pid of the worker whose access log line carries `request_id`."""
    match = re.search(rf"\[(\d+)\] app\.requests: .* request_id={request_id}$", log_path.read_text(), re.M)
    assert match, f"no access log line for {request_id}"
    return match.group(1)


def answers_from_both_workers(served, key):
    """Status codes of GET /org/limits with `key`, on new connections until both workers have answered."""
    statuses, pids = [], set()
    for _ in range(ATTEMPTS):
        request_id = uuid.uuid4().hex
        response = httpx.get(f"{served.base_url}/org/limits", timeout=10,
                             headers={"Authorization": f"Bearer {key}", "X-Request-Id": request_id})
        statuses.append(response.status_code)
        pids.add(served_by(served.log_path, request_id))
        if len(pids) == 2:
            return statuses
    raise AssertionError(f"only worker(s) {pids} answered {ATTEMPTS} new connections")


def test_a_deleted_key_is_refused_by_every_worker_at_once(tmp_path):
    with serve_with_organization(tmp_path, "Revoke", workers=2) as served:
        owner = {"Authorization": f"Bearer {served.api_key}"}
        created = httpx.post(f"{served.base_url}/org/api_keys", json={"name": "short-lived"}, headers=owner,
                             timeout=10).json()
        assert set(answers_from_both_workers(served, created["key"])) == {200}

        assert httpx.delete(f"{served.base_url}/org/api_keys/{created['id']}", headers=owner,
                            timeout=10).status_code == 204
        assert set(answers_from_both_workers(served, created["key"])) == {401}
