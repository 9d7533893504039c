"""Browser sessions (/browsers): records, validation, caps, the inactivity timeout."""
import threading
from datetime import timedelta

import pytest

from app.browsers import hosts, lost_hosts
from app.core import clock, settings
from app.core.db import db
from app.orgs.models import Organization
from tests.browsers.conftest import console
from tests.conftest import client_for
from tests.fakes import LocalServer

REQUIRED = {"session_id", "cdp_ws_url", "webdriver_ws_url", "created_at", "headless", "stealth", "timeout_seconds",
            "memory", "region"}


def set_org(app, owner_key, **fields):
    with app.app_context(), db.connection_context():
        Organization.update(**fields).where(Organization.id == owner_key.org_id).execute()


# -- the record -------------------------------------------------------------------------------

def test_create_with_an_empty_body_gives_the_defaults(client):
    response = client.post("/browsers", json={})
    assert response.status_code == 201
    record = response.get_json()
    assert REQUIRED <= set(record)
    assert record["headless"] is False and record["stealth"] is False
    assert record["timeout_seconds"] == 60 and record["memory"] == "8GiB" and record["region"] == "us-east"
    assert record["viewport"] == {"width": 1920, "height": 1080, "refresh_rate": 25}
    assert record["location"] == {"locale": "en-US", "locale_source": "default", "timezone": "UTC",
                                  "timezone_source": "default"}
    assert "deleted_at" not in record and "end_reason" not in record and "base_url" not in record
    assert record["cdp_ws_url"] == f"ws://127.0.0.1:9222/devtools/browser/{record['session_id']}"
    assert "jwt=" not in record["cdp_ws_url"]


def test_headless_defaults_to_1gib_and_echoes_what_was_asked(client):
    body = {"headless": True, "stealth": True, "timeout_seconds": 600, "region": "eu-west", "name": "crawler",
            "viewport": {"width": 1280, "height": 720}, "location": {"locale": "fr-FR", "timezone": "Europe/Paris"},
            "tags": {"team": "growth"}, "chrome_policy": {"BookmarkBarEnabled": False},
            "start_url": "https://example.test/", "kiosk_mode": True,
            "network": {"allowed_hosts": ["example.test"], "private_hosts": ["10.0.0.1"]}}
    record = client.post("/browsers", json=body).get_json()
    assert record["memory"] == "1GiB"
    for key in ("headless", "stealth", "timeout_seconds", "region", "name", "viewport", "tags", "chrome_policy",
                "start_url", "kiosk_mode"):
        assert record[key] == body[key], key
    assert record["location"] == {"locale": "fr-FR", "locale_source": "override", "timezone": "Europe/Paris",
                                  "timezone_source": "override"}
    assert record["network"]["allowed_hosts"] == ["example.test"]
    assert record["network"]["allowlist_state"]["revision"]


def test_retrieve_by_id_and_by_name_and_unknown_is_404(client):
    record = client.post("/browsers", json={"name": "named"}).get_json()
    assert client.get(f"/browsers/{record['session_id']}").get_json()["session_id"] == record["session_id"]
    assert client.get("/browsers/named").get_json()["session_id"] == record["session_id"]
    missing = client.get("/browsers/nope")
    assert missing.status_code == 404 and missing.get_json()["code"] == "browser_not_found"


def test_delete_ends_the_session_and_keeps_its_record(client):
    session = client.post("/browsers", json={"name": "gone"}).get_json()["session_id"]
    assert client.delete(f"/browsers/{session}").status_code == 204
    assert client.get(f"/browsers/{session}").status_code == 404
    ended = client.get(f"/browsers/{session}", query_string={"include_deleted": "true"}).get_json()
    assert ended["deleted_at"] and ended["usage_status"] == "ready" and ended["usage"]["uptime_ms"] >= 0
    assert ended["end_reason"] == "deleted"
    assert client.delete(f"/browsers/{session}").status_code == 404
    # The name is free again once the session ended.
    assert client.post("/browsers", json={"name": "gone"}).status_code == 201


def test_names_are_unique_among_active_sessions(client):
    assert client.post("/browsers", json={"name": "one"}).status_code == 201
    clash = client.post("/browsers", json={"name": "one"})
    assert clash.status_code == 409 and clash.get_json()["code"] == "browser_name_taken"
    assert clash.headers["x-should-retry"] == "false"
    # ... per project.
    client.post("/org/projects", json={"name": "other"})
    assert client.post("/browsers", json={"name": "one"}, headers={"X-Kernel-Project": "other"}).status_code == 201


@pytest.mark.parametrize("body, field", [
    ({"timeout_seconds": 9}, "timeout_seconds"),
    ({"timeout_seconds": 259201}, "timeout_seconds"),
    ({"timeout_seconds": "60"}, "timeout_seconds"),
    ({"headless": True, "memory": "8GiB"}, "memory"),
    ({"memory": "1GiB"}, "memory"),
    ({"gpu": True, "headless": True}, "gpu"),
    ({"video_memory": "2GiB"}, "video_memory"),
    ({"region": "mars"}, "region"),
    ({"network": {"allowed_hosts": []}}, "network.allowed_hosts"),
    ({"tags": {f"k{i}": "v" for i in range(51)}}, "tags"),
    ({"viewport": {"width": 1280}}, "viewport.height"),
    ({"location": {"timezone": "Mars/Olympus"}}, "location.timezone"),
    ({"vaults": [{"id": "a", "name": "b"}]}, "vaults.0.name"),
    ({"telemetry": {"export": {"otlp": {"enabled": True}}}}, "telemetry.export.otlp.enabled"),
    ({"telemetry": {"browser": {"control": {"cdp": {"excluded_methods": ["Nope.nothing"]}}}}},
     "telemetry.browser.control.cdp.excluded_methods.0"),
    ({"driver": {"cdp_ws_url": "ws://browser.test/devtools?jwt=abc"}}, "driver.cdp_ws_url"),
    ({"start_url": "file:///etc/passwd"}, "start_url"),
    ({"surprise": True}, "surprise"),
])
def test_invalid_create_bodies_are_400_and_create_nothing(client, body, field):
    response = client.post("/browsers", json=body)
    assert response.status_code == 400, response.get_json()
    assert field in [detail.get("field") for detail in response.get_json()["details"]]
    assert client.get("/browsers").get_json() == []


def test_references_are_resolved_by_id_or_name_and_missing_ones_are_404(client):
    profile = client.post("/profiles", json={"name": "shopper"}).get_json()
    by_name = client.post("/browsers", json={"profile": {"name": "shopper", "save_changes": True}}).get_json()
    assert by_name["profile"]["id"] == profile["id"] and by_name["profile_save_changes"] is True
    by_id = client.post("/browsers", json={"profile": {"id": profile["id"]}}).get_json()
    assert by_id["profile"]["name"] == "shopper"
    for body, code in [({"profile": {"name": "nobody"}}, "profile_not_found"),
                       ({"extensions": [{"name": "missing"}]}, "extension_not_found"),
                       ({"invocation_id": "missing"}, "not_found"),
                       ({"proxy": {"id": "p1"}}, "proxy_not_found"),
                       ({"proxy_id": "p1"}, "proxy_not_found")]:
        response = client.post("/browsers", json=body)
        assert response.status_code == 404 and response.get_json()["code"] == code, body
    assert client.post("/browsers", json={"proxy": {"mode": "direct"}}).get_json()["proxy"] == {"mode": "direct"}


def test_driver_endpoints_come_from_the_request_or_configuration(make_app, app, owner_key):
    configured = client_for(make_app(BROWSER_EXTERNAL_CDP_WS_URL="ws://farm.test/{session_id}",
                                     BROWSER_EXTERNAL_LIVE_VIEW_URL="https://farm.test/live/{session_id}"),
                            owner_key.plaintext)
    record = configured.post("/browsers", json={}).get_json()
    assert record["cdp_ws_url"] == f"ws://farm.test/{record['session_id']}"
    assert record["browser_live_view_url"] == f"https://farm.test/live/{record['session_id']}"
    assert "browser_live_view_url" not in configured.post("/browsers", json={"headless": True}).get_json()
    given = configured.post("/browsers", json={"driver": {"cdp_ws_url": "wss://mine.test/cdp",
                                                          "webdriver_ws_url": "wss://mine.test/bidi"}}).get_json()
    assert (given["cdp_ws_url"], given["webdriver_ws_url"]) == ("wss://mine.test/cdp", "wss://mine.test/bidi")


# -- update ---------------------------------------------------------------------------------

def test_update_changes_only_what_is_given(client):
    session = client.post("/browsers", json={"name": "old", "tags": {"a": "1", "b": "2"},
                                             "viewport": {"width": 800, "height": 600}}).get_json()["session_id"]
    updated = client.patch(f"/browsers/{session}", json={"tags": {"c": "3"}}).get_json()
    assert updated["tags"] == {"c": "3"} and updated["name"] == "old"
    assert updated["viewport"] == {"width": 800, "height": 600}
    assert client.get("/browsers", query_string={"tags[a]": "1"}).get_json() == []
    cleared = client.patch(f"/browsers/{session}", json={"name": "", "tags": None}).get_json()
    assert "name" not in cleared and cleared["tags"] == {}
    located = client.patch(f"/browsers/{session}", json={"location": {"timezone": "Asia/Tokyo"}}).get_json()
    assert located["location"]["timezone"] == "Asia/Tokyo" and located["location"]["locale_source"] == "default"
    reset = client.patch(f"/browsers/{session}", json={"location": {"timezone": None}}).get_json()
    assert reset["location"]["timezone_source"] == "default"
    assert client.patch(f"/browsers/{session}", json={"viewport": {"width": 1024, "height": 768, "force": True}}
                        ).get_json()["viewport"] == {"width": 1024, "height": 768}


def test_update_of_the_allowlist_checks_the_expected_revision(client):
    created = client.post("/browsers", json={"network": {"allowed_hosts": ["a.test"]}}).get_json()
    session, revision = created["session_id"], created["network"]["allowlist_state"]["revision"]
    changed = client.patch(f"/browsers/{session}", json={"network": {
        "allowed_hosts": ["b.test"], "expected_allowlist_revision": revision, "mutation_id": "m1"}}).get_json()
    state = changed["network"]["allowlist_state"]
    assert changed["network"]["allowed_hosts"] == ["b.test"]
    assert state["base_revision"] == revision and state["revision"] != revision and state["mutation_id"] == "m1"
    stale = client.patch(f"/browsers/{session}", json={"network": {
        "allowed_hosts": ["c.test"], "expected_allowlist_revision": revision}})
    assert stale.status_code == 409 and stale.get_json()["code"] == "stale_network"
    assert client.get(f"/browsers/{session}").get_json()["network"]["allowed_hosts"] == ["b.test"]


def test_a_profile_can_be_set_once(client):
    client.post("/profiles", json={"name": "p1"})
    session = client.post("/browsers", json={}).get_json()["session_id"]
    assert client.patch(f"/browsers/{session}", json={"profile": {"name": "p1"}}).get_json()["profile"]["name"] == "p1"
    again = client.patch(f"/browsers/{session}", json={"profile": {"name": "p1"}})
    assert again.status_code == 409 and again.get_json()["code"] == "profile_already_loaded"


def test_renaming_to_a_taken_name_is_409(client):
    client.post("/browsers", json={"name": "taken"})
    session = client.post("/browsers", json={}).get_json()["session_id"]
    assert client.patch(f"/browsers/{session}", json={"name": "taken"}).status_code == 409


# -- list -----------------------------------------------------------------------------------

def test_list_filters_and_pages(client):
    ids = [client.post("/browsers", json={"name": f"s{i}", "tags": {"team": "a" if i % 2 else "b", "env": "ci"},
                                           "region": "us-west" if i == 4 else "us-east"}).get_json()["session_id"]
           for i in range(5)]
    client.delete(f"/browsers/{ids[0]}")
    names = [b["name"] for b in client.get("/browsers").get_json()]
    assert names == ["s4", "s3", "s2", "s1"]  # newest first, active only
    assert len(client.get("/browsers", query_string={"status": "all"}).get_json()) == 5
    assert len(client.get("/browsers", query_string={"include_deleted": "true"}).get_json()) == 5
    assert [b["name"] for b in client.get("/browsers", query_string={"status": "deleted"}).get_json()] == ["s0"]
    assert [b["name"] for b in client.get("/browsers?tags[team]=a&tags[env]=ci").get_json()] == ["s3", "s1"]
    assert [b["name"] for b in client.get("/browsers", query_string={"query": "s2"}).get_json()] == ["s2"]
    assert [b["name"] for b in client.get("/browsers", query_string={"query": ids[3]}).get_json()] == ["s3"]
    assert [b["name"] for b in client.get("/browsers", query_string={"region": "us-west"}).get_json()] == ["s4"]
    first = client.get("/browsers", query_string={"limit": 3})
    assert first.headers["X-Has-More"] == "true" and first.headers["X-Next-Offset"] == "3"
    rest = client.get("/browsers", query_string={"limit": 3, "offset": 3})
    assert [b["name"] for b in rest.get_json()] == ["s1"] and rest.headers["X-Has-More"] == "false"
    assert client.get("/browsers", query_string={"limit": 101}).status_code == 400


# -- caps -----------------------------------------------------------------------------------

def test_the_project_cap_refuses_with_429_and_says_which_limit(client):
    client.patch("/org/projects/Default/limits", json={"max_concurrent_sessions": 2})
    first = client.post("/browsers", json={}).get_json()
    client.post("/browsers", json={})
    refused = client.post("/browsers", json={"name": "third"})
    assert refused.status_code == 429
    body = refused.get_json()
    assert body["code"] == "concurrency_limit_exceeded"
    assert body["details"][0] == {"code": "max_concurrent_sessions", "scope": "project", "limit": 2, "usage": 2,
                                  "message": "project limit 2, 2 running"}
    assert refused.headers["Retry-After"] == "5"
    assert client.get("/browsers/third").status_code == 404  # nothing half-made
    client.delete(f"/browsers/{first['session_id']}")
    assert client.post("/browsers", json={}).status_code == 201


def test_the_default_project_cap_and_the_organization_limit_apply(app, client, owner_key):
    set_org(app, owner_key, default_project_max_concurrent_sessions=1, max_concurrent_sessions=2)
    client.post("/org/projects", json={"name": "second"})
    client.post("/org/projects", json={"name": "third"})
    assert client.post("/browsers", json={}).status_code == 201
    refused = client.post("/browsers", json={})
    assert refused.status_code == 429 and refused.get_json()["details"][0]["scope"] == "project"
    # A project's own cap replaces the default.
    client.patch("/org/projects/second/limits", json={"max_concurrent_sessions": 5})
    assert client.post("/browsers", json={}, headers={"X-Kernel-Project": "second"}).status_code == 201
    over = client.post("/browsers", json={}, headers={"X-Kernel-Project": "second"})
    assert over.status_code == 429
    assert over.get_json()["details"][0] == {"code": "max_concurrent_sessions", "scope": "organization",
                                             "limit": 2, "usage": 2, "message": "organization limit 2, 2 running"}
    limits = client.get("/org/limits").get_json()
    assert limits["concurrent_sessions_used"] == 2 and limits["concurrent_sessions_available"] == 0


def test_parallel_creates_never_exceed_the_cap(app, client, owner_key):
    client.patch("/org/projects/Default/limits", json={"max_concurrent_sessions": 3})
    barrier = threading.Barrier(10)
    statuses = []

    def create():
        own = client_for(app, owner_key.plaintext)
        barrier.wait()
        statuses.append(own.post("/browsers", json={}).status_code)

    threads = [threading.Thread(target=create) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(statuses) == [201] * 3 + [429] * 7
    assert len(client.get("/browsers").get_json()) == 3


def test_a_project_with_active_sessions_cannot_be_deleted(client):
    project = client.post("/org/projects", json={"name": "busy"}).get_json()
    session = client.post("/browsers", json={}, headers={"X-Kernel-Project": "busy"}).get_json()["session_id"]
    refused = client.delete(f"/org/projects/{project['id']}")
    assert refused.status_code == 409 and refused.get_json()["details"][0]["code"] == "browser_sessions"
    client.delete(f"/browsers/{session}", headers={"X-Kernel-Project": "busy"})
    assert client.delete(f"/org/projects/{project['id']}").status_code == 204


# -- inactivity timeout ----------------------------------------------------------------------

def test_a_session_without_activity_ends_after_its_timeout(client):
    clock.freeze(clock.now())
    session = client.post("/browsers", json={"timeout_seconds": 30}).get_json()["session_id"]
    clock.advance(seconds=29)
    assert client.get("/org/limits").get_json()["concurrent_sessions_used"] == 1
    clock.advance(seconds=2)
    # Noticed by whatever looks first; it ended at its deadline, not when noticed.
    assert client.get("/org/limits").get_json()["concurrent_sessions_used"] == 0
    ended = client.get(f"/browsers/{session}", query_string={"include_deleted": "true"}).get_json()
    assert ended["deleted_at"] is not None
    lifetime = clock.parse_rfc3339(ended["deleted_at"]) - clock.parse_rfc3339(ended["created_at"])
    assert lifetime == timedelta(seconds=30) and ended["end_reason"] == "timeout"
    assert client.get(f"/browsers/{session}").status_code == 404


def test_api_calls_and_ingest_are_activity(client, ingest):
    clock.freeze(clock.now())
    session = client.post("/browsers", json={"timeout_seconds": 30,
                                             "telemetry": {"enabled": True}}).get_json()["session_id"]
    for _ in range(3):
        clock.advance(seconds=20)
        assert client.get(f"/browsers/{session}").status_code == 200
    for _ in range(3):
        clock.advance(seconds=20)
        ingest(session, [])  # an empty batch only records activity
    clock.advance(seconds=31)
    assert client.get(f"/browsers/{session}").status_code == 404
    late = client.post(f"/browsers/{session}/telemetry/events", json={"events": [console("late")]})
    assert late.status_code == 409 and late.get_json()["code"] == "browser_session_ended"


def test_a_timed_out_session_frees_its_slot_for_a_new_one(client):
    client.patch("/org/projects/Default/limits", json={"max_concurrent_sessions": 1})
    clock.freeze(clock.now())
    client.post("/browsers", json={"timeout_seconds": 10})
    assert client.post("/browsers", json={}).status_code == 429
    clock.advance(seconds=11)
    assert client.post("/browsers", json={}).status_code == 201


# -- invocations ----------------------------------------------------------------------------

def test_invocation_browsers_lists_and_ends_the_sessions_created_for_it(client):
    invocation = client.post("/invocations", json={"app_name": "a", "action_name": "b", "version": "1",
                                                   "async": True}).get_json()
    mine = client.post("/browsers", json={"invocation_id": invocation["id"]}).get_json()
    client.post("/browsers", json={})
    listed = client.get(f"/invocations/{invocation['id']}/browsers").get_json()
    assert [b["session_id"] for b in listed["browsers"]] == [mine["session_id"]]
    assert client.delete(f"/invocations/{invocation['id']}/browsers").status_code == 204
    assert client.get(f"/invocations/{invocation['id']}/browsers").get_json() == {"browsers": []}
    assert client.get(f"/browsers/{mine['session_id']}").status_code == 404
    assert len(client.get("/browsers").get_json()) == 1


# -- telemetry settings (the SDK's documented rules) ----------------------------------------

def categories_on(record):
    return sorted(name for name, switch in record["telemetry"]["browser"].items() if switch["enabled"])


@pytest.mark.parametrize("telemetry, enabled, on", [
    (None, False, ["captcha", "connection", "control", "system"]),
    ({}, False, ["captcha", "connection", "control", "system"]),
    ({"enabled": False}, False, ["captcha", "connection", "control", "system"]),
    ({"enabled": True}, True, ["captcha", "connection", "control", "system"]),
    ({"browser": {"console": {"enabled": True}}}, True, ["captcha", "connection", "console", "control", "system"]),
    ({"enabled": True, "browser": {"control": {"enabled": False}}}, True, ["captcha", "connection", "system"]),
    ({"browser": {name: {"enabled": False} for name in ("control", "connection", "system", "captcha")}}, False, []),
])
def test_create_resolves_the_telemetry_settings(client, telemetry, enabled, on):
    record = client.post("/browsers", json={"telemetry": telemetry}).get_json()
    assert record["telemetry"]["enabled"] is enabled
    assert categories_on(record) == on


@pytest.mark.parametrize("telemetry, field", [
    ({"enabled": False, "browser": {"console": {"enabled": True}}}, "telemetry.browser"),
    ({"storage": {"enabled": False}}, "telemetry.storage.enabled"),
    ({"export": {"otlp": {"destination": {"name": "collector"}}}}, "telemetry.export.otlp.enabled"),
])
def test_telemetry_settings_lantern_cannot_honour_are_400(client, telemetry, field):
    response = client.post("/browsers", json={"telemetry": telemetry})
    assert response.status_code == 400
    assert [detail["field"] for detail in response.get_json()["details"]] == [field]


def test_update_merges_categories_and_enabled_true_starts_afresh(client):
    session = client.post("/browsers", json={"telemetry": {"browser": {"console": {"enabled": True}}}}
                          ).get_json()["session_id"]

    def patch(telemetry):
        return client.patch(f"/browsers/{session}", json={"telemetry": telemetry}).get_json()

    merged = patch({"browser": {"network": {"enabled": True}}})
    assert categories_on(merged) == ["captcha", "connection", "console", "control", "network", "system"]
    assert categories_on(patch({})) == categories_on(merged)  # {} leaves it
    fresh = patch({"enabled": True, "browser": {"page": {"enabled": True}}})
    assert categories_on(fresh) == ["captcha", "connection", "control", "page", "system"]
    assert patch({"enabled": False})["telemetry"]["enabled"] is False
    # Categories while capture is off start from the default set again.
    restarted = patch({"browser": {"console": {"enabled": True}}})
    assert restarted["telemetry"]["enabled"] is True
    assert categories_on(restarted) == ["captcha", "connection", "console", "control", "system"]
    everything_off = {name: {"enabled": False} for name in ("console", "control", "connection", "system", "captcha")}
    assert patch({"browser": everything_off})["telemetry"]["enabled"] is False


# -- values no database can hold, and non-JSON numbers -----------------------------------------

@pytest.mark.parametrize("path", ["/browsers?offset=100000000000000000000",
                                  "/browsers/x/telemetry/events?offset=100000000000000000000",
                                  "/browsers/x/telemetry/events?since=99999999999d"])
def test_out_of_range_query_values_are_400(client, path):
    session = client.post("/browsers", json={}).get_json()["session_id"]
    response = client.get(path.replace("/x/", f"/{session}/"))
    assert response.status_code == 400 and response.get_json()["code"] == "bad_request"


def test_a_ts_beyond_64_bits_is_400(client, ingest):
    session = client.post("/browsers", json={"telemetry": {"enabled": True}}).get_json()["session_id"]
    response = client.post(f"/browsers/{session}/telemetry/events",
                           json={"events": [{"type": "cdp_connect", "source": {"kind": "cdp"}, "ts": 2**63}]})
    assert response.status_code == 400
    assert response.get_json()["details"][0]["field"] == "events.0.ts"


def test_nan_and_infinity_are_not_json(client):
    for constant in ("NaN", "Infinity", "-Infinity"):
        response = client.post("/browsers", data='{"chrome_policy": {"a": %s}}' % constant,
                               content_type="application/json")
        assert response.status_code == 400 and response.get_json()["code"] == "bad_request"
    assert client.get("/browsers").get_json() == []


def test_long_log_paths_are_stored_and_overlong_ones_refused(client):
    session = client.post("/browsers", json={}).get_json()["session_id"]
    long_path = "/var/log/" + "d" * 1000
    accepted = client.post(f"/browsers/{session}/logs", json={"source": "path", "path": long_path,
                                                             "lines": [{"message": "x"}]})
    assert accepted.status_code == 201
    refused = client.post(f"/browsers/{session}/logs", json={"source": "path", "path": long_path + "x" * 30,
                                                            "lines": [{"message": "x"}]})
    assert refused.status_code == 400


@pytest.mark.parametrize("body, fields", [
    ({"gpu": True, "headless": False}, ["gpu"]),
    ({"vaults": [{"name": "v"}]}, ["vaults"]),
], ids=["gpu", "vaults"])
def test_the_host_driver_refuses_what_it_cannot_apply(make_app, make_org, body, fields):
    app = make_app(BROWSER_DRIVER="host")
    host_client = client_for(app, make_org().plaintext)
    response = host_client.post("/browsers", json=body)
    assert response.status_code == 400, response.get_json()
    assert [detail["field"] for detail in response.get_json()["details"]] == fields
    assert host_client.get("/browsers").get_json() == []  # nothing was created


def test_without_a_live_browser_host_creates_are_503_saying_what_to_start(make_app, make_org):
    app = make_app(BROWSER_DRIVER="host")
    response = client_for(app, make_org().plaintext).post("/browsers", json={"headless": True})
    assert response.status_code == 503 and response.headers["Retry-After"] == "5"
    body = response.get_json()
    assert body["code"] == "no_browser_host" and "python -m browserhost" in body["message"]


def test_a_host_that_died_but_still_looks_live_gives_no_browser_host_not_a_failed_start(make_app, make_org):
    """#26.8: in the seconds before a dead host's heartbeat runs out, a create placed on it is told there is
    no browser host (not browser_start_failed), and the session it began is ended."""
    from app.browsers.models import BrowserHost

    app = make_app(BROWSER_DRIVER="host")
    with app.app_context(), db.connection_context():
        BrowserHost.create(name="dead", address="http://127.0.0.1:1", capacity=2, headful=True,
                           started_at=clock.now(), heartbeat_at=clock.now())
    client = client_for(app, make_org().plaintext)
    response = client.post("/browsers", json={"headless": True})
    assert response.status_code == 503 and response.headers["Retry-After"] == "5"
    assert response.get_json()["code"] == "no_browser_host" and "did not answer" in response.get_json()["message"]
    ended = client.get("/browsers?status=deleted").get_json()
    assert [session["end_reason"] for session in ended] == ["launch_failed"]


class AnswersAsAHost(LocalServer):
    """A service at a host's address: answering POST /sessions as a host does (with a code), or not."""

    answer = {}

    def post(self, handler):
        handler.rfile.read(int(handler.headers["Content-Length"]))
        handler.answer(400, self.answer)


@pytest.mark.parametrize("answer, told", [
    ({"code": "bad_request", "message": "headless false needs Xvfb on the browser host"},
     "headless false needs Xvfb on the browser host"),
    ({"message": "internal service: db_password=hunter2"}, "the browser host answered HTTP 400"),
], ids=["a-host", "another-service"])
def test_a_client_is_told_a_hosts_own_words_only(make_app, make_org, answer, told):
    """A stolen host credential can register any address: what answers there must not reach clients, nor may the
    host's address or a connection's error."""
    from app.browsers.models import BrowserHost

    app = make_app(BROWSER_DRIVER="host")
    service = AnswersAsAHost()
    service.answer = answer
    service.start()
    try:
        with app.app_context(), db.connection_context():
            hosts.add("h1", service.url)
            BrowserHost.update(address=service.url, capacity=2, heartbeat_at=clock.now()).execute()
        response = client_for(app, make_org().plaintext).post("/browsers", json={"headless": True})
    finally:
        service.stop()
    assert response.status_code == 400 and response.get_json()["message"] == told


def test_cdp_urls_follow_the_public_base_url(make_app):
    app = make_app(PUBLIC_BASE_URL="https://lantern.example.com/")
    with app.test_request_context("/browsers", base_url="http://127.0.0.1:8000"):
        assert hosts.public_ws_base() == "wss://lantern.example.com"
    settings.change(app, PUBLIC_BASE_URL=None)
    with app.test_request_context("/browsers", base_url="http://127.0.0.1:8000"):
        assert hosts.public_ws_base() == "ws://127.0.0.1:8000"


# -- lost browser hosts -----------------------------------------------------------------------

def listened_for_a_timeout(app):
    """The worker's first sweep, then a host timeout later: from then on its sweeps judge hosts."""
    clock.freeze(clock.now())
    with app.app_context():
        lost_hosts.end_sessions_of_lost_hosts()
    clock.advance(seconds=app.config["BROWSER_HOST_TIMEOUT_SECONDS"])


def test_a_host_silent_while_the_app_was_down_is_not_lost_if_it_heart_beats_once_the_app_listens(app, client):
    """A host cannot heart-beat to an app that is down: after a restart of every app server its hosts have a
    whole timeout to be heard again, and only one that stays silent loses its sessions."""
    from app.browsers.models import BrowserHost, BrowserSession

    sessions = [client.post("/browsers", json={}).get_json()["session_id"] for _ in range(2)]
    with app.app_context(), db.connection_context():
        back, gone = (BrowserHost.create(name=name, address="http://127.0.0.1:1", capacity=2,
                                         heartbeat_at=clock.now() - timedelta(minutes=5)) for name in ("back", "gone"))
        for host, session_id in zip((back, gone), sessions, strict=True):
            BrowserSession.update(host=host.id).where(BrowserSession.id == session_id).execute()
    clock.freeze(clock.now())
    with app.app_context():
        lost_hosts.end_sessions_of_lost_hosts()  # the app has just started: both were silent while it was down
    assert all(client.get(f"/browsers/{session_id}").status_code == 200 for session_id in sessions)
    clock.advance(seconds=2)
    with app.app_context(), db.connection_context():
        BrowserHost.update(heartbeat_at=clock.now()).where(BrowserHost.id == back.id).execute()
    clock.advance(seconds=app.config["BROWSER_HOST_TIMEOUT_SECONDS"] - 2)
    with app.app_context():
        lost_hosts.end_sessions_of_lost_hosts()
    assert client.get(f"/browsers/{sessions[0]}").status_code == 200
    assert client.get(f"/browsers/{sessions[1]}?include_deleted=true").get_json()["end_reason"] == "host_lost"


def test_a_lost_host_ends_its_session_with_one_system_event_when_workers_sweep_at_once(app, client, monkeypatch):
    """Every worker sweeps for lost hosts; a second sweep that runs while the first is ending the
    session (here: from inside the first's end) must not write a second event."""
    from app.browsers import lifecycle
    from app.browsers.models import BrowserHost, BrowserSession

    session_id = client.post("/browsers", json={"telemetry": {"enabled": True}}).get_json()["session_id"]
    with app.app_context(), db.connection_context():
        host = BrowserHost.create(name="gone", address="http://127.0.0.1:1", capacity=2, heartbeat_at=clock.EPOCH)
        BrowserSession.update(host=host.id).where(BrowserSession.id == session_id).execute()
    end, swept_again = lifecycle.end, []

    def end_after_another_sweep(session, *args, **kwargs):
        if not swept_again:
            swept_again.append(True)
            lost_hosts.end_sessions_of_lost_hosts()
        return end(session, *args, **kwargs)

    monkeypatch.setattr(lifecycle, "end", end_after_another_sweep)
    listened_for_a_timeout(app)
    with app.app_context():
        lost_hosts.end_sessions_of_lost_hosts()
    assert swept_again
    record = client.get(f"/browsers/{session_id}?include_deleted=true").get_json()
    assert record["end_reason"] == "host_lost"
    events = client.get(f"/browsers/{session_id}/telemetry/events?since=1h&category=system").get_json()
    assert [(e["event"]["type"], e["event"]["data"]["service_name"]) for e in events] == [
        ("service_crashed", "browser_host")]
