"""client.browsers.* through the official SDK, strict validation, against the live server (contract 6.8).

Most tests work in a project of their own (`browsers`: the shared organization's
client sending `X-Kernel-Project: <name>`), so lists are exact; every session a test
leaves active is ended afterwards, since sessions count against the shared
organization's concurrency limit. Caps are tested in organizations of their own.

The SDK has no ingest methods: `Driver` plays the browser's driver over plain HTTP
(Lantern extensions `POST /browsers/{id}/telemetry/events` and `POST /browsers/{id}/logs`).
Streams are read by `Reader`, in a thread, so a stream that never ends fails the test
instead of hanging it.
"""
import queue
import time
from datetime import datetime, timezone

import httpx
import kernel
import pytest
from kernel.types import (
    BrowserCreateResponse,
    BrowserListResponse,
    BrowserRetrieveResponse,
    BrowserUpdateResponse,
    InvocationListBrowsersResponse,
    LogEvent,
)
from kernel.types.browsers import (
    BrowserConsoleErrorEvent,
    BrowserConsoleLogEvent,
    BrowserPageLoadEvent,
    TelemetryEventsResponse,
    TelemetryStreamResponse,
)

from tests.sdk.conftest import ORG_MAX_CONCURRENT_SESSIONS, unique
from tests.sdk.streams import END, WAIT, Reader

# Above the server's 15 s keepalive interval, so an idle stream never trips the SDK's read timeout.
READ_TIMEOUT = 30.0
# The longest wait for one stream item or for a stream's end (the server notices an end within ~1 s).
APP_LOG = "/var/log/app.log"
CONSOLE_ON = {"enabled": True, "browser": {"console": {"enabled": True}}}
BASE_TS = int(datetime(2020, 1, 1, tzinfo=timezone.utc).timestamp() * 1_000_000)  # Unix microseconds


def console_log(text, ts=None):
    event = {"type": "console_log", "category": "console", "source": {"kind": "cdp"},
             "data": {"text": text, "level": "log"}}
    if ts is not None:
        event["ts"] = ts
    return event


def console_error(text):
    return {"type": "console_error", "category": "console", "source": {"kind": "cdp"}, "data": {"text": text}}


def page_load(url):
    return {"type": "page_load", "category": "page", "source": {"kind": "cdp"}, "data": {"url": url}}


def at_second(second):
    return BASE_TS + second * 1_000_000


def ids(records):
    return [record.session_id for record in records]


def seqs(envelopes):
    return [envelope.seq for envelope in envelopes]


def texts(envelopes):
    return [envelope.event.data.text for envelope in envelopes]


def stable(record):
    """A record without its usage (uptime grows between two reads)."""
    return {key: value for key, value in record.to_dict().items() if key != "usage"}


def end_all(client):
    for browser in list(client.browsers.list(status="active", limit=100)):
        client.browsers.delete_by_id(browser.session_id)


@pytest.fixture
def browsers(in_project):
    """The shared organization's client in a project of this test's own; its sessions end afterwards."""
    yield in_project
    end_all(in_project)


class Driver:
    """The browser's side over plain HTTP with the bearer key: telemetry events and log lines."""

    def __init__(self, base_url, api_key, project=None):
        headers = {"Authorization": f"Bearer {api_key}"}
        if project:
            headers["X-Kernel-Project"] = project
        self.http = httpx.Client(base_url=base_url, headers=headers, timeout=READ_TIMEOUT)

    def post_events(self, session_id, events, status=201):
        answer = self.http.post(f"/browsers/{session_id}/telemetry/events", json={"events": events})
        assert answer.status_code == status, answer.text
        return answer.json()

    def post_logs(self, session_id, *messages, status=201, **source):
        source = source or {"source": "path", "path": APP_LOG}
        body = {**source, "lines": [{"message": message} for message in messages]}
        answer = self.http.post(f"/browsers/{session_id}/logs", json=body)
        assert answer.status_code == status, answer.text
        return answer.json()

    def close(self):
        self.http.close()


@pytest.fixture
def driver(live_server, project):
    """The driver of sessions in `project` (the project of `browsers`)."""
    playing = Driver(live_server.base_url, live_server.api_key, project.name)
    yield playing
    playing.close()


@pytest.fixture
def streams(browsers):
    """A client of the same project whose reads may wait for a keepalive."""
    return browsers.with_options(timeout=READ_TIMEOUT)


def read_all(stream):
    """Every item of a stream that is expected to end by itself, bounded by WAIT."""
    reader = Reader(lambda: stream)
    return reader.rest()


# --- create / retrieve ----------------------------------------------------------------------------

def test_create_with_defaults(browsers):
    raw = browsers.browsers.with_raw_response.create()
    assert raw.http_response.status_code == 201
    created = raw.parse()
    assert isinstance(created, BrowserCreateResponse)
    assert created.session_id
    assert (created.headless, created.stealth, created.memory, created.region, created.timeout_seconds) == (
        False, False, "8GiB", "us-east", 60)
    assert created.cdp_ws_url.startswith("ws") and created.webdriver_ws_url.startswith("ws")
    assert "jwt=" not in created.cdp_ws_url and created.base_url is None  # the SDK never reroutes
    assert created.created_at.tzinfo is not None
    assert created.name is None and created.deleted_at is None and created.usage_status is None
    assert created.profile is None and created.tags == {}
    assert (created.viewport.width, created.viewport.height, created.viewport.refresh_rate) == (1920, 1080, 25)
    location = created.location
    assert (location.locale, location.locale_source, location.timezone, location.timezone_source) == (
        "en-US", "default", "UTC", "default")
    assert created.usage.uptime_ms >= 0
    assert not created.telemetry.browser.console.enabled

    got = browsers.browsers.retrieve(created.session_id)
    assert isinstance(got, BrowserRetrieveResponse)
    assert stable(got) == stable(created)
    assert ids(browsers.browsers.list()) == [created.session_id]


def test_create_with_options_and_retrieve_by_id_and_name(browsers):
    name = unique("checkout")
    created = browsers.browsers.create(
        name=name, tags={"team": "growth", "env": "staging"}, headless=True, memory="2GiB",
        viewport={"width": 1280, "height": 720, "refresh_rate": 30},
        location={"locale": "fr-FR", "timezone": "Europe/Paris"},
        telemetry=CONSOLE_ON, timeout_seconds=300, stealth=True, region="eu-west")
    assert created.name == name
    assert created.tags == {"team": "growth", "env": "staging"}
    assert (created.headless, created.memory, created.stealth, created.region) == (True, "2GiB", True, "eu-west")
    assert created.browser_live_view_url is None  # headless
    assert (created.viewport.width, created.viewport.height, created.viewport.refresh_rate) == (1280, 720, 30)
    location = created.location
    assert (location.locale, location.locale_source, location.timezone, location.timezone_source) == (
        "fr-FR", "override", "Europe/Paris", "override")
    assert created.timeout_seconds == 300
    assert created.profile is None and created.profile_save_changes is False
    categories = created.telemetry.browser
    assert categories.console.enabled is True
    assert categories.control.enabled is True and categories.connection.enabled is True  # on by default
    assert categories.network.enabled is False and categories.page.enabled is False  # off unless asked

    by_id = browsers.browsers.retrieve(created.session_id)
    by_name = browsers.browsers.retrieve(name)
    assert stable(by_id) == stable(by_name) == stable(created)
    assert ids(browsers.browsers.list(query=name)) == [created.session_id]


# In an organization of its own: a session whose record cannot be served could not be listed and
# ended, and would hold a slot of the shared organization.
def test_create_with_a_profile_by_name(new_org):
    org = new_org()
    profile = org.profiles.create(name=unique("shopper"))
    created = org.browsers.create(profile={"name": profile.name, "save_changes": True})
    assert created.profile.id == profile.id and created.profile.name == profile.name
    assert created.profile_save_changes is True
    assert stable(org.browsers.retrieve(created.session_id)) == stable(created)
    assert ids(org.browsers.list(query=profile.name)) == [created.session_id]
    assert ids(org.browsers.list(query=profile.id)) == [created.session_id]
    by_id = org.browsers.create(profile={"id": profile.id})
    assert by_id.profile.id == profile.id and by_id.profile_save_changes is False


@pytest.mark.parametrize("fields", [
    {"timeout_seconds": 9},
    {"timeout_seconds": 259201},
    {"headless": True, "memory": "8GiB"},
    {"memory": "1GiB"},
    {"viewport": {"width": 50, "height": 720}},
    {"location": {"timezone": "Mars/Olympus_Mons"}},
    {"name": "a/b"},
    {"region": "moon-1"},
], ids=["timeout-too-short", "timeout-too-long", "headless-8GiB", "headful-1GiB", "narrow-viewport",
        "unknown-timezone", "slash-in-name", "unknown-region"])
def test_invalid_creates_are_rejected(browsers, fields):
    with pytest.raises(kernel.BadRequestError) as caught:
        browsers.browsers.create(**fields)
    assert caught.value.body["code"] == "bad_request"
    assert list(browsers.browsers.list(status="all")) == []


def test_create_naming_a_missing_profile_or_invocation_is_not_found(browsers):
    with pytest.raises(kernel.NotFoundError) as caught:
        browsers.browsers.create(profile={"name": "no-such-profile"})
    assert caught.value.body["code"] == "profile_not_found"
    with pytest.raises(kernel.NotFoundError):
        browsers.browsers.create(invocation_id="no-such-invocation")
    assert list(browsers.browsers.list(status="all")) == []


def test_names_are_unique_among_active_sessions(browsers):
    name = unique("named")
    first = browsers.browsers.create(name=name)
    with pytest.raises(kernel.ConflictError) as caught:
        browsers.browsers.create(name=name)
    assert caught.value.response.headers["x-should-retry"] == "false"
    assert ids(browsers.browsers.list()) == [first.session_id]

    browsers.browsers.delete_by_id(name)
    second = browsers.browsers.create(name=name)  # free again once the first has ended
    assert browsers.browsers.retrieve(name).session_id == second.session_id
    # The ended one stays reachable by id only.
    assert browsers.browsers.retrieve(first.session_id, include_deleted=True).name == name


def test_unknown_and_other_projects_sessions_are_not_found(browsers, sdk):
    theirs = sdk.with_options(project=sdk.projects.create(name=unique("other")).name)
    foreign = theirs.browsers.create(name=unique("foreign"))
    try:
        for ref in ("no-such-browser", foreign.session_id, foreign.name):
            with pytest.raises(kernel.NotFoundError) as caught:
                browsers.browsers.retrieve(ref)
            assert caught.value.body["code"] == "browser_not_found"
            with pytest.raises(kernel.NotFoundError):
                browsers.browsers.retrieve(ref, include_deleted=True)
            with pytest.raises(kernel.NotFoundError):
                browsers.browsers.update(ref, name="mine")
            with pytest.raises(kernel.NotFoundError):
                browsers.browsers.delete_by_id(ref)
            with pytest.raises(kernel.NotFoundError):
                browsers.browsers.telemetry.events(ref)
            with pytest.raises(kernel.NotFoundError):
                browsers.browsers.telemetry.stream(ref)
            with pytest.raises(kernel.NotFoundError):
                browsers.browsers.logs.stream(ref, source="path", path=APP_LOG, follow=False)
        assert theirs.browsers.retrieve(foreign.session_id).deleted_at is None
    finally:
        end_all(theirs)


# --- update ---------------------------------------------------------------------------------------

def test_update_name_tags_and_telemetry(browsers, driver):
    old_name, new_name = unique("before"), unique("after")
    created = browsers.browsers.create(name=old_name, tags={"team": "a", "env": "dev"}, telemetry=CONSOLE_ON)

    renamed = browsers.browsers.update(created.session_id, name=new_name)
    assert isinstance(renamed, BrowserUpdateResponse)
    assert renamed.name == new_name and renamed.tags == {"team": "a", "env": "dev"}  # the rest is kept
    assert browsers.browsers.retrieve(new_name).session_id == created.session_id
    with pytest.raises(kernel.NotFoundError):
        browsers.browsers.retrieve(old_name)

    assert browsers.browsers.update(new_name, tags={"team": "b"}).tags == {"team": "b"}  # a full replace
    assert ids(browsers.browsers.list(tags={"team": "b"})) == [created.session_id]
    assert ids(browsers.browsers.list(tags={"team": "a"})) == []
    assert browsers.browsers.update(created.session_id, tags={}).tags == {}
    browsers.browsers.update(created.session_id, tags={"x": "1"})
    assert browsers.browsers.update(created.session_id, tags=None).tags == {}
    assert browsers.browsers.retrieve(created.session_id).tags == {}

    cleared = browsers.browsers.update(created.session_id, name=None)
    assert cleared.name is None
    with pytest.raises(kernel.NotFoundError):
        browsers.browsers.retrieve(new_name)

    assert driver.post_events(created.session_id, [console_log("kept")]) == {
        "accepted": 1, "dropped": 0, "last_seq": 1}
    stopped = browsers.browsers.update(created.session_id, telemetry={"enabled": False})
    assert stopped.telemetry.to_dict().get("enabled") is False
    assert driver.post_events(created.session_id, [console_log("dropped")]) == {
        "accepted": 0, "dropped": 1, "last_seq": 1}
    assert texts(browsers.browsers.telemetry.events(created.session_id)) == ["kept"]
    # null and {} leave the config as it is.
    assert browsers.browsers.update(created.session_id, telemetry=None).telemetry == stopped.telemetry
    assert browsers.browsers.update(created.session_id, telemetry={}).telemetry == stopped.telemetry


def test_update_cannot_take_a_name_in_use(browsers):
    taken = unique("taken")
    browsers.browsers.create(name=taken)
    other = browsers.browsers.create()
    with pytest.raises(kernel.ConflictError):
        browsers.browsers.update(other.session_id, name=taken)
    assert browsers.browsers.retrieve(other.session_id).name is None


# --- list -----------------------------------------------------------------------------------------

@pytest.fixture
def fleet(browsers):
    """Five sessions of one project, created oldest first; c and e have ended."""
    made = {
        "a": browsers.browsers.create(name=unique("alpha"), tags={"team": "x", "env": "prod"}),
        "b": browsers.browsers.create(name=unique("beta"), tags={"team": "x", "env": "dev"}),
        "c": browsers.browsers.create(name=unique("alpha"), tags={"team": "y"}),
        "d": browsers.browsers.create(tags={"team": "y", "env": "prod"}),
        "e": browsers.browsers.create(name=unique("gamma"), tags={"team": "x"}),
    }
    for name in "ce":
        browsers.browsers.delete_by_id(made[name].session_id)
    return {name: record.session_id for name, record in made.items()}


@pytest.mark.parametrize("filters, expected", [
    ({}, "dba"),
    ({"status": "active"}, "dba"),
    ({"status": "deleted"}, "ec"),
    ({"status": "all"}, "edcba"),
    ({"include_deleted": True}, "edcba"),
    ({"tags": {"team": "x"}}, "ba"),
    ({"tags": {"team": "x"}, "status": "all"}, "eba"),
    ({"tags": {"team": "x", "env": "prod"}}, "a"),
    ({"tags": {"env": "prod"}, "status": "all"}, "da"),
    ({"tags": {"team": "nobody"}}, ""),
    ({"query": "alpha", "status": "all"}, "ca"),
    ({"query": "beta"}, "b"),
    ({"region": "us-east"}, "dba"),
    ({"region": "eu-west"}, ""),
], ids=lambda value: repr(value) if isinstance(value, dict) else value)
def test_list_filters(browsers, fleet, filters, expected):
    listed = list(browsers.browsers.list(**filters))
    assert all(isinstance(item, BrowserListResponse) for item in listed)
    assert ids(listed) == [fleet[name] for name in expected]


def test_list_items_are_full_records(browsers, fleet):
    listed = {item.session_id: item for item in browsers.browsers.list(status="all")}
    assert listed[fleet["c"]].deleted_at is not None and listed[fleet["c"]].usage_status == "ready"
    assert listed[fleet["a"]].deleted_at is None
    assert stable(listed[fleet["a"]]) == stable(browsers.browsers.retrieve(fleet["a"]))
    assert ids(browsers.browsers.list(query=fleet["d"])) == [fleet["d"]]  # an exact id


def test_list_pages_and_auto_pager(browsers, fleet):
    everything = [fleet[name] for name in "edcba"]
    raw = browsers.browsers.with_raw_response.list(status="all", limit=2)
    assert (raw.headers["x-has-more"], raw.headers["x-next-offset"]) == ("true", "2")
    first = raw.parse()
    assert ids(first.items) == everything[:2] and first.has_next_page()
    last = browsers.browsers.with_raw_response.list(status="all", limit=2, offset=4)
    assert (last.headers["x-has-more"], last.headers["x-next-offset"]) == ("false", "0")

    assert ids(browsers.browsers.list(status="all", limit=2)) == everything  # the auto-pager walks 3 pages
    assert ids(browsers.browsers.list(status="all", limit=2, offset=3)) == everything[3:]
    for bad in ({"limit": 0}, {"limit": 101}, {"offset": -1}):
        with pytest.raises(kernel.BadRequestError):
            browsers.browsers.list(**bad)


# --- delete ---------------------------------------------------------------------------------------

def test_delete_ends_the_session_and_keeps_its_record(browsers):
    name = unique("doomed")
    created = browsers.browsers.create(name=name)
    raw = browsers.browsers.with_raw_response.delete_by_id(created.session_id)
    assert raw.status_code == 204 and raw.parse() is None

    for ref in (created.session_id, name):
        with pytest.raises(kernel.NotFoundError):
            browsers.browsers.retrieve(ref)
    with pytest.raises(kernel.NotFoundError):
        browsers.browsers.delete_by_id(created.session_id)  # already ended
    with pytest.raises(kernel.NotFoundError):
        browsers.browsers.update(created.session_id, tags={"late": "yes"})

    ended = browsers.browsers.retrieve(created.session_id, include_deleted=True)
    assert ended.deleted_at is not None and ended.deleted_at >= created.created_at
    assert ended.usage_status == "ready" and ended.name == name
    assert ended.usage.uptime_ms >= 0
    again = browsers.browsers.retrieve(created.session_id, include_deleted=True)
    assert again.usage.uptime_ms == ended.usage.uptime_ms  # an ended session's uptime no longer grows
    assert ids(browsers.browsers.list()) == []
    assert ids(browsers.browsers.list(status="deleted")) == [created.session_id]


def test_delete_by_name(browsers):
    name = unique("by-name")
    created = browsers.browsers.create(name=name)
    browsers.browsers.delete_by_id(name)
    assert browsers.browsers.retrieve(created.session_id, include_deleted=True).deleted_at is not None


# --- concurrency caps -----------------------------------------------------------------------------

def assert_cap_error(error, scope, limit, usage):
    assert error.status_code == 429
    assert int(error.response.headers["Retry-After"]) > 0
    assert error.body["code"] == "concurrency_limit_exceeded"
    [detail] = error.body["details"]
    assert (detail["code"], detail["scope"], detail["limit"], detail["usage"]) == (
        "max_concurrent_sessions", scope, limit, usage)


def test_project_cap_refuses_the_session_over_it(new_org):
    org = new_org()
    [default] = list(org.projects.list())
    assert org.projects.limits.update(default.id, max_concurrent_sessions=2).max_concurrent_sessions == 2
    first, second = org.browsers.create(), org.browsers.create()

    with pytest.raises(kernel.RateLimitError) as caught:
        org.browsers.create(name="third")
    assert_cap_error(caught.value, "project", 2, 2)
    assert set(ids(org.browsers.list(status="all"))) == {first.session_id, second.session_id}  # not recorded

    # Another project of the organization has room of its own.
    other = org.with_options(project=org.projects.create(name=unique("other")).name)
    other.browsers.create()
    limits = org.organization.limits.retrieve()
    assert (limits.concurrent_sessions_used, limits.concurrent_sessions_available) == (
        3, ORG_MAX_CONCURRENT_SESSIONS - 3)

    org.browsers.delete_by_id(first.session_id)
    assert org.browsers.create(name="third").name == "third"  # a slot is free again
    assert org.organization.limits.retrieve().concurrent_sessions_used == 3


def test_org_default_project_cap_applies_to_projects_without_one(new_org):
    org = new_org()
    org.organization.limits.update(default_project_max_concurrent_sessions=1)
    org.browsers.create()
    with pytest.raises(kernel.RateLimitError) as caught:
        org.browsers.create()
    assert_cap_error(caught.value, "project", 1, 1)

    capped = org.projects.create(name=unique("own-cap"))
    org.projects.limits.update(capped.id, max_concurrent_sessions=2)  # its own cap wins over the default
    in_capped = org.with_options(project=capped.name)
    in_capped.browsers.create()
    in_capped.browsers.create()
    with pytest.raises(kernel.RateLimitError) as caught:
        in_capped.browsers.create()
    assert_cap_error(caught.value, "project", 2, 2)


def test_org_limit_counts_sessions_of_every_project(live_server, new_org):
    name = unique("org")
    org = new_org(name)
    live_server.cli("orgs", "set-limit", "--org", name, "--max-concurrent-sessions", "3")
    second = org.with_options(project=org.projects.create(name=unique("second")).name)
    org.browsers.create()
    second.browsers.create()
    last = second.browsers.create()
    limits = org.organization.limits.retrieve()
    assert (limits.max_concurrent_sessions, limits.concurrent_sessions_used,
            limits.concurrent_sessions_available) == (3, 3, 0)

    for client in (org, second):
        with pytest.raises(kernel.RateLimitError) as caught:
            client.browsers.create()
        assert_cap_error(caught.value, "organization", 3, 3)

    second.browsers.delete_by_id(last.session_id)
    org.browsers.create()
    assert org.organization.limits.retrieve().concurrent_sessions_used == 3


def test_org_limits_count_the_sessions_in_use(new_org):
    org = new_org()
    assert org.organization.limits.retrieve().concurrent_sessions_used == 0
    made = [org.browsers.create() for _ in range(2)]
    limits = org.organization.limits.retrieve()
    assert (limits.concurrent_sessions_used, limits.concurrent_sessions_available) == (
        2, ORG_MAX_CONCURRENT_SESSIONS - 2)
    org.browsers.delete_by_id(made[0].session_id)
    assert org.organization.limits.retrieve().concurrent_sessions_used == 1


# --- invocations ----------------------------------------------------------------------------------

def test_browsers_of_an_invocation(browsers):
    invocation = browsers.invocations.create(app_name="shop", action_name="checkout", version="1", async_=True)
    other = browsers.invocations.create(app_name="shop", action_name="refund", version="1", async_=True)
    first = browsers.browsers.create(invocation_id=invocation.id, name=unique("inv"))
    second = browsers.browsers.create(invocation_id=invocation.id)
    unrelated = browsers.browsers.create()
    browsers.browsers.create(invocation_id=other.id)

    listed = browsers.invocations.list_browsers(invocation.id)
    assert isinstance(listed, InvocationListBrowsersResponse)
    assert ids(listed.browsers) == [first.session_id, second.session_id]  # oldest first
    assert stable(listed.browsers[0]) == stable(browsers.browsers.retrieve(first.session_id))

    browsers.browsers.delete_by_id(second.session_id)
    assert ids(browsers.invocations.list_browsers(invocation.id).browsers) == [first.session_id]

    assert browsers.invocations.delete_browsers(invocation.id) is None
    assert browsers.invocations.list_browsers(invocation.id).browsers == []
    with pytest.raises(kernel.NotFoundError):
        browsers.browsers.retrieve(first.session_id)
    assert browsers.browsers.retrieve(first.session_id, include_deleted=True).deleted_at is not None
    # Only that invocation's sessions ended.
    assert browsers.browsers.retrieve(unrelated.session_id).deleted_at is None
    assert len(browsers.invocations.list_browsers(other.id).browsers) == 1
    browsers.invocations.update(invocation.id, status="succeeded")
    browsers.invocations.update(other.id, status="succeeded")


# --- telemetry: ingest and the archive ------------------------------------------------------------

def test_ingest_keeps_only_enabled_categories(browsers, driver):
    created = browsers.browsers.create(telemetry=CONSOLE_ON)
    answer = driver.post_events(created.session_id, [console_log("a"), page_load("https://x.test/"),
                                                     console_error("b")])
    assert answer == {"accepted": 2, "dropped": 1, "last_seq": 2}
    # An empty batch only records activity; last_seq stays the session's newest.
    assert driver.post_events(created.session_id, []) == {"accepted": 0, "dropped": 0, "last_seq": 2}

    off = browsers.browsers.create()  # no telemetry
    assert driver.post_events(off.session_id, [console_log("c")]) == {"accepted": 0, "dropped": 1, "last_seq": 0}
    assert list(browsers.browsers.telemetry.events(off.session_id)) == []

    envelopes = list(browsers.browsers.telemetry.events(created.session_id))
    assert all(isinstance(envelope, TelemetryEventsResponse) for envelope in envelopes)
    assert seqs(envelopes) == [1, 2]
    log, error = (envelope.event for envelope in envelopes)
    assert isinstance(log, BrowserConsoleLogEvent) and isinstance(error, BrowserConsoleErrorEvent)
    assert (log.category, log.source.kind, log.data.text, log.data.level) == ("console", "cdp", "a", "log")
    assert error.data.text == "b" and log.ts > 0 and error.ts >= log.ts


def test_ingest_refuses_invalid_events(browsers, driver):
    created = browsers.browsers.create(telemetry=CONSOLE_ON)
    bad = [console_log("fine"), {"type": "console_log", "category": "network", "source": {"kind": "cdp"}}]
    answer = driver.post_events(created.session_id, bad, status=400)
    assert answer["code"] == "bad_request"
    assert list(browsers.browsers.telemetry.events(created.session_id)) == []  # the whole batch was refused
    assert driver.post_events("no-such-browser", [console_log("x")], status=404)["code"] == "browser_not_found"


def test_ingest_into_an_ended_session_is_409(browsers, driver):
    created = browsers.browsers.create(telemetry=CONSOLE_ON)
    browsers.browsers.delete_by_id(created.session_id)
    assert driver.post_events(created.session_id, [console_log("late")], status=409)["code"] == (
        "browser_session_ended")
    assert driver.post_logs(created.session_id, "late", status=409)["code"] == "browser_session_ended"


def test_events_auto_pager_walks_every_page_in_order(browsers, driver):
    created = browsers.browsers.create(telemetry=CONSOLE_ON)
    driver.post_events(created.session_id, [console_log(f"line {n}") for n in range(1, 46)])

    raw = browsers.browsers.telemetry.with_raw_response.events(created.session_id, limit=10)
    assert raw.headers["x-has-more"] == "true" and int(raw.headers["x-next-offset"]) > 0
    assert seqs(raw.parse().items) == list(range(1, 11))

    ascending = list(browsers.browsers.telemetry.events(created.session_id, limit=10))
    assert seqs(ascending) == list(range(1, 46))
    assert texts(ascending) == [f"line {n}" for n in range(1, 46)]
    assert seqs(browsers.browsers.telemetry.events(created.session_id, limit=10, order="asc")) == list(range(1, 46))

    descending = list(browsers.browsers.telemetry.events(created.session_id, limit=10, order="desc"))
    assert seqs(descending) == list(range(45, 0, -1))
    first_page = browsers.browsers.telemetry.with_raw_response.events(created.session_id, limit=7, order="desc")
    assert seqs(first_page.parse().items) == list(range(45, 38, -1))


def test_events_filter_by_category_and_type(browsers, driver):
    created = browsers.browsers.create(telemetry={"enabled": True, "browser": {"console": {"enabled": True},
                                                                               "page": {"enabled": True}}})
    driver.post_events(created.session_id, [
        console_log("1"), page_load("https://a.test/"), console_error("3"), console_log("4"),
        page_load("https://b.test/"), console_error("6"),
    ])

    def read(**filters):
        return seqs(browsers.browsers.telemetry.events(created.session_id, limit=2, **filters))

    assert read() == [1, 2, 3, 4, 5, 6]
    assert read(category=["console"]) == [1, 3, 4, 6]
    assert read(category=["page"]) == [2, 5]
    assert read(category=["page", "console"]) == [1, 2, 3, 4, 5, 6]
    assert read(category=["network"]) == []
    assert read(type=["console_error"]) == [3, 6]
    assert read(type=["console_error", "page_load"]) == [2, 3, 5, 6]
    assert read(category=["console"], type=["page_load"]) == []  # both must match
    assert read(category=["console"], order="desc") == [6, 4, 3, 1]
    pages = list(browsers.browsers.telemetry.events(created.session_id, category=["page"]))
    assert all(isinstance(envelope.event, BrowserPageLoadEvent) for envelope in pages)
    assert [envelope.event.data.url for envelope in pages] == ["https://a.test/", "https://b.test/"]
    with pytest.raises(kernel.BadRequestError):
        browsers.browsers.telemetry.events(created.session_id, category=["nonsense"])  # type: ignore[list-item]


def test_events_since_and_until(browsers, driver):
    created = browsers.browsers.create(telemetry=CONSOLE_ON)
    driver.post_events(created.session_id, [console_log(f"s{n}", ts=at_second(n)) for n in range(10)])
    driver.post_events(created.session_id, [console_log("now")])  # ts: when it arrived

    def read(**window):
        return texts(browsers.browsers.telemetry.events(created.session_id, limit=3, **window))

    assert read() == ["now"]  # the default window is the last 5 minutes
    assert read(since="2020-01-01T00:00:00Z") == [f"s{n}" for n in range(10)] + ["now"]
    assert read(since="2020-01-01T00:00:03Z", until="2020-01-01T00:00:07Z") == ["s3", "s4", "s5", "s6"]
    assert read(since="2020-01-01T01:00:00+01:00", until="2020-01-01T00:00:02Z") == ["s0", "s1"]
    assert read(since="2020-01-01T00:00:08Z", until="5m") == ["s8", "s9"]
    assert read(since="5m") == ["now"]
    assert read(order="desc", until="2020-01-01T00:00:04Z") == ["s3", "s2", "s1", "s0"]
    assert read(order="desc") == ["now"] + [f"s{n}" for n in range(9, -1, -1)]

    with pytest.raises(kernel.BadRequestError) as caught:
        browsers.browsers.telemetry.events(created.session_id, order="desc", since="5m")
    assert caught.value.status_code == 400
    for bad in ({"since": "yesterday"}, {"order": "sideways"}, {"limit": 0}, {"limit": 101}):
        with pytest.raises(kernel.BadRequestError):
            browsers.browsers.telemetry.events(created.session_id, **bad)


def test_events_of_an_ended_session_stay_readable(browsers, driver):
    created = browsers.browsers.create(telemetry=CONSOLE_ON)
    driver.post_events(created.session_id, [console_log("x"), console_log("y")])
    browsers.browsers.delete_by_id(created.session_id)
    assert texts(browsers.browsers.telemetry.events(created.session_id)) == ["x", "y"]


def test_category_settings_alone_start_capture(browsers, driver):
    created = browsers.browsers.create(telemetry={"browser": {"console": {"enabled": True}}})
    assert driver.post_events(created.session_id, [console_log("a")])["accepted"] == 1


# --- telemetry: the stream ------------------------------------------------------------------------

def test_stream_replays_resumes_without_gaps_and_ends_with_the_session(streams, driver):
    created = streams.browsers.create(telemetry=CONSOLE_ON)
    session_id = created.session_id
    driver.post_events(session_id, [console_log(f"e{n}") for n in range(1, 11)])

    replaying = Reader(lambda: streams.browsers.telemetry.stream(session_id, replay="all"))
    first = replaying.take(4)
    assert all(isinstance(envelope, TelemetryStreamResponse) for envelope in first)
    assert all(isinstance(envelope.event, BrowserConsoleLogEvent) for envelope in first)
    assert [envelope.event.type for envelope in first] == ["console_log"] * 4
    assert seqs(first) == [1, 2, 3, 4] and texts(first) == ["e1", "e2", "e3", "e4"]
    assert replaying.status_code == 200

    resumed = Reader(lambda: streams.browsers.telemetry.stream(session_id, last_event_id="4"))
    assert seqs(resumed.take(6)) == [5, 6, 7, 8, 9, 10]
    driver.post_events(session_id, [console_log(f"e{n}") for n in range(11, 16)])
    assert seqs(resumed.take(5)) == [11, 12, 13, 14, 15]  # live events follow the replay

    # Another client ends the session: both streams end, with nothing lost or repeated.
    streams.with_options().browsers.delete_by_id(session_id)
    assert resumed.rest() == []
    rest = replaying.rest()
    assert seqs(first + rest) == list(range(1, 16))
    assert texts(rest)[-1] == "e15"


def test_a_fresh_stream_sees_only_new_events(streams, driver):
    created = streams.browsers.create(telemetry=CONSOLE_ON)
    session_id = created.session_id
    driver.post_events(session_id, [console_log(f"old {n}") for n in range(3)])

    fresh = Reader(lambda: streams.browsers.telemetry.stream(session_id))
    # When the server starts following is not observable from here: post until an event arrives.
    deadline, first = time.monotonic() + WAIT, None
    while first is None:
        assert time.monotonic() < deadline, "the fresh stream received nothing"
        driver.post_events(session_id, [console_log("new")])
        try:
            first = fresh.items.get(timeout=0.2)
        except queue.Empty:
            pass
    assert not isinstance(first, Exception) and first is not END, first
    assert first.seq > 3 and first.event.data.text == "new"
    last_seq = driver.post_events(session_id, [console_log("after")] * 3)["last_seq"]
    assert seqs(fresh.take(last_seq - first.seq)) == list(range(first.seq + 1, last_seq + 1))
    streams.browsers.delete_by_id(session_id)
    assert fresh.rest() == []


def test_stream_type_filter(streams, driver):
    created = streams.browsers.create(telemetry=CONSOLE_ON)
    driver.post_events(created.session_id, [console_log("1"), console_error("2"), console_log("3"),
                                            console_error("4")])
    only_errors = Reader(lambda: streams.browsers.telemetry.stream(created.session_id, replay="all",
                                                                   type=["console_error"]))
    got = only_errors.take(2)
    assert seqs(got) == [2, 4] and all(isinstance(envelope.event, BrowserConsoleErrorEvent) for envelope in got)
    driver.post_events(created.session_id, [console_log("5"), console_error("6")])
    assert seqs(only_errors.take(1)) == [6]
    streams.browsers.delete_by_id(created.session_id)
    assert only_errors.rest() == []


def test_stream_without_telemetry_opens_and_stays_silent(streams, driver):
    created = streams.browsers.create()  # telemetry not enabled
    silent = Reader(lambda: streams.browsers.telemetry.stream(created.session_id, replay="all"))
    assert driver.post_events(created.session_id, [console_log("nobody hears this")] * 3)["accepted"] == 0
    with pytest.raises(AssertionError):
        silent.next(timeout=1.5)  # nothing arrives while the session runs
    streams.with_options().browsers.delete_by_id(created.session_id)
    assert silent.rest() == []
    assert silent.status_code == 200


def test_stream_of_an_ended_session_replays_the_archive_and_ends(streams, driver):
    created = streams.browsers.create(telemetry=CONSOLE_ON)
    driver.post_events(created.session_id, [console_log(f"e{n}") for n in range(1, 6)])
    streams.browsers.delete_by_id(created.session_id)

    replayed = read_all(streams.browsers.telemetry.stream(created.session_id, replay="all"))
    assert seqs(replayed) == [1, 2, 3, 4, 5]
    assert seqs(read_all(streams.browsers.telemetry.stream(created.session_id, last_event_id="3"))) == [4, 5]
    assert read_all(streams.browsers.telemetry.stream(created.session_id)) == []  # new events only: none


def test_stream_routes_stay_on_the_server(streams):
    """No base_url and no jwt in cdp_ws_url: the SDK sends stream requests to Lantern, with the bearer key."""
    created = streams.browsers.create()
    raw = streams.browsers.with_raw_response.retrieve(created.session_id)
    assert "base_url" not in raw.http_response.json()
    streams.browsers.delete_by_id(created.session_id)
    with streams.browsers.telemetry.with_streaming_response.stream(created.session_id, replay="all") as response:
        assert response.http_request.url.path == f"/browsers/{created.session_id}/telemetry/stream"
        assert response.http_request.headers["authorization"].startswith("Bearer ")
        assert response.headers["content-type"].startswith("text/event-stream")
        body = response.read()
    assert b"data:" not in body  # comments at most: nothing new to send for an ended session


# --- logs -----------------------------------------------------------------------------------------

def log_messages(events):
    assert all(isinstance(event, LogEvent) and event.event == "log" for event in events)
    assert all(event.timestamp.tzinfo is not None for event in events)
    return [event.message for event in events]


def test_log_stream_replays_the_stored_lines(streams, driver):
    created = streams.browsers.create()
    session_id = created.session_id
    assert driver.post_logs(session_id, "a", "b") == {"accepted": 2}
    driver.post_logs(session_id, "elsewhere", source="path", path="/var/log/other.log")
    driver.post_logs(session_id, "chrome started", source="supervisor", supervisor_process="chrome")
    driver.post_logs(session_id, "c")

    def replay(**source):
        return log_messages(read_all(streams.browsers.logs.stream(session_id, follow=False, **source)))

    assert replay(source="path", path=APP_LOG) == ["a", "b", "c"]
    assert replay(source="path", path="/var/log/other.log") == ["elsewhere"]
    assert replay(source="supervisor", supervisor_process="chrome") == ["chrome started"]
    assert replay(source="path", path="/var/log/empty.log") == []
    with pytest.raises(kernel.BadRequestError):
        streams.browsers.logs.stream(session_id, source="path", follow=False)  # which file?
    with pytest.raises(kernel.BadRequestError):
        streams.browsers.logs.stream(session_id, source="supervisor", path=APP_LOG, follow=False)


def test_log_stream_follows_new_lines_until_the_session_ends(streams, driver):
    created = streams.browsers.create()
    session_id = created.session_id
    driver.post_logs(session_id, "a", "b")

    following = Reader(lambda: streams.browsers.logs.stream(session_id, source="path", path=APP_LOG, follow=True))
    assert log_messages(following.take(2)) == ["a", "b"]
    driver.post_logs(session_id, "c")
    driver.post_logs(session_id, "d", "e")
    driver.post_logs(session_id, "not this log", source="path", path="/var/log/other.log")
    assert log_messages(following.take(3)) == ["c", "d", "e"]

    streams.with_options().browsers.delete_by_id(session_id)
    assert following.rest() == []
    assert following.status_code == 200


def test_log_stream_of_an_ended_session_replays_and_ends(streams, driver):
    created = streams.browsers.create()
    driver.post_logs(created.session_id, "x", "y")
    streams.browsers.delete_by_id(created.session_id)
    stream = streams.browsers.logs.stream(created.session_id, source="path", path=APP_LOG, follow=True)
    assert log_messages(read_all(stream)) == ["x", "y"]
