"""Schemathesis over /openapi.json (#11): requests generated from the document never meet a server error,
and every answer matches what the document says (status, content type, body, headers).

Schemathesis' engine (what its CLI runs) drives the app in-process: a boundary-value pass over every
parameter and field (the coverage phase), then a few random valid and invalid requests per operation,
seeded and without shrinking, so a run is short and reproducible. Its pytest loader is not used: it
relies on a pytest internal (`Function._nodeid`) that pytest 9.2 no longer has.
"""
import pytest
import schemathesis
from schemathesis.engine import events, from_schema

from app.core import settings

NOT_SERVER_ERRORS = ["2xx", "3xx", "4xx"]
CONFIG = {
    "seed": 11,
    "generation": {"max-examples": 5, "deterministic": True, "no-shrink": True, "database": "none",
                   # The owner's key goes on every request instead of generated bearer tokens.
                   "with-security-parameters": False},
    # Boundary values of every parameter and field, valid ones only: the invalid ones would double the
    # run, and the fuzzing phase sends invalid requests too.
    "phases": {"coverage": {"generation": {"mode": "positive"}}, "stateful": {"enabled": False}},
    "checks": {"enabled": False, "not_a_server_error": {"enabled": True},
               "status_code_conformance": {"enabled": True}, "content_type_conformance": {"enabled": True},
               "response_schema_conformance": {"enabled": True}, "response_headers_conformance": {"enabled": True}},
    "operations": [
        # These reach outside Lantern: a provider's own url (any the request gave), a login flow's site.
        {"include-path-regex": r"^/org/credential_providers/[^/]+/(test|items)$", "enabled": False},
        {"include-path-regex": r"^/auth/connections/[^/]+/login$", "enabled": False},
        # Designed 5xx: the store is a closed port here (502, unreachable); WebDriver BiDi is not served (501).
        {"include-path": "/extensions/from_chrome_store",
         "checks": {"not_a_server_error": {"expected-statuses": NOT_SERVER_ERRORS + ["502"]}}},
        {"include-path-regex": r"^/browsers/[^/]+/webdriver$",
         "checks": {"not_a_server_error": {"expected-statuses": NOT_SERVER_ERRORS + ["501"]}}},
    ],
}


def is_event_stream(context):
    """SSE routes answer text/event-stream and stay open: no generated request could finish."""
    responses = context.operation.definition.raw.get("responses", {})
    return any("text/event-stream" in answer.get("content", {}) for answer in responses.values())


def run(schema):
    """(labels of the operations tested, one entry per failed check or engine error with its request as curl)."""
    tested, failures = set(), []
    for event in from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            tested.add(event.recorder.label)
            failures += failures_in(event.recorder)
        elif isinstance(event, events.NonFatalError):
            failures.append(f"{event.label}: {event.info.format()}")
        elif isinstance(event, events.FatalError):
            raise event.exception
    return tested, failures


def failures_in(recorder):
    for case_id, checks in recorder.checks.items():
        for check in checks:
            if check.failure_info is None:
                continue
            failure = check.failure_info.failure
            response = recorder.interactions[failure.case_id or case_id].response
            answer = f"{response.status_code} {response.content[:300]!r}" if response is not None else "no answer"
            yield f"{recorder.label}: {failure.title}\n  {check.failure_info.code_sample}\n  -> {answer}"


def test_generated_requests_meet_no_server_error(app, owner_key, closed_port_url):
    # Nothing generated may leave the process or wait: the store and providers are a closed port.
    settings.change(app, CHROME_STORE_CRX_URL=closed_port_url + "/crx?id={id}", ONEPASSWORD_CONNECT_URL=closed_port_url,
                    INVOCATION_SYNC_WAIT_SECONDS=0)
    schema = schemathesis.openapi.from_wsgi("/openapi.json", app, config=schemathesis.Config.from_dict(CONFIG))
    schema.config.update(headers={"Authorization": f"Bearer {owner_key.plaintext}"})
    tested, failures = run(schema.exclude(is_event_stream))
    assert not failures, "\n\n".join(failures)
    assert {"POST /org/projects", "PATCH /browsers/{session_ref}", "GET /invocations"} <= tested
    assert "GET /invocations/{invocation_id}/events" not in tested


@pytest.mark.parametrize("method, path, body, field", [
    ("GET", "/invocations?since=0001-01-01T00:00:00%2B01:00", None, "since"),
    ("POST", "/invocations/any/logs", {"message": "m", "timestamp": "9999-12-31T23:59:59-01:00"}, "timestamp"),
    ("GET", "/extensions/from_chrome_store?url=http://[x/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", None, "url"),
    ("POST", "/browsers", {"driver": {"cdp_ws_url": "ws://[x"}}, "driver.cdp_ws_url"),
], ids=["offset-before-year-1", "offset-after-year-9999", "store-url-bad-host", "driver-url-bad-host"])
def test_inputs_that_were_server_errors_are_400(client, method, path, body, field):
    response = client.open(path, method=method, json=body)
    assert response.status_code == 400, response.get_json()
    assert [detail["field"] for detail in response.get_json()["details"]] == [field]
