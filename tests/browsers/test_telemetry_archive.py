"""The telemetry archive: ingest (seq, validation, what is kept), paged reads and retention.

The rules: spec part 4 "Browser telemetry" (paging rules 1-4, query parameters), contract 6.8.3;
DESIGN.md 1 (offset is an integer cursor, never a seq; category repeated or comma-joined).
"""
import logging
import random
from datetime import timedelta

import pytest

from app.browsers import telemetry
from app.browsers.models import BrowserSession
from app.core import clock, settings
from app.core.db import db
from app.migrations import m0010_telemetry_ts_high
from tests.browsers.test_logs import messages, open_stream
from tests.conftest import client_for
from tests.invocations.conftest import read_frames

T0 = clock.parse_rfc3339("2026-06-01T12:00:00Z")
ON = {"enabled": True, "browser": {"console": {"enabled": True}, "network": {"enabled": True}}}


def console(text, **extra):
    return {"type": "console_log", "source": {"kind": "cdp"}, "data": {"text": str(text)}, **extra}


def network(url="https://x.test", **extra):
    return {"type": "network_request", "source": {"kind": "cdp"}, "data": {"url": url, "method": "GET"}, **extra}


def cdp(method, **data):
    return {"type": "cdp_command", "source": {"kind": "cdp"}, "data": {"method": method, **data}}


def at(moment):
    """The ts (Unix microseconds) of a moment."""
    return clock.micros(moment)


def new_session(client, telemetry_config=ON, **fields):
    body = dict(fields)
    if telemetry_config is not None:
        body["telemetry"] = telemetry_config
    response = client.post("/browsers", json=body)
    assert response.status_code == 201, response.get_json()
    return response.get_json()["session_id"]


def ingest(client, session_id, events, status=201):
    response = client.post(f"/browsers/{session_id}/telemetry/events", json={"events": events})
    assert response.status_code == status, response.get_json()
    return response.get_json()


def read(client, session_id, **query):
    """(envelopes, has_more, next_offset) of one page."""
    response = client.get(f"/browsers/{session_id}/telemetry/events", query_string=query)
    assert response.status_code == 200, response.get_json()
    assert response.headers["X-Has-More"] in ("true", "false")
    next_offset = response.headers["X-Next-Offset"]
    assert next_offset.isdigit(), next_offset  # an integer (the SDK int()s it)
    return response.get_json(), response.headers["X-Has-More"] == "true", int(next_offset)


def seqs(envelopes):
    return [envelope["seq"] for envelope in envelopes]


def read_all(client, session_id, **query):
    """Every envelope, following X-Next-Offset while X-Has-More is true (paging rule 1)."""
    envelopes, pages = [], 0
    page, has_more, next_offset = read(client, session_id, **query)
    envelopes += page
    while has_more:
        pages += 1
        assert pages < 2000, "paging does not end"
        page, has_more, next_offset = read(client, session_id, **query, offset=next_offset)
        envelopes += page
    return envelopes


@pytest.fixture
def frozen():
    clock.freeze(T0)
    return T0


@pytest.fixture
def thousand(client, frozen):
    """A session with 1,000 archived events, alternating console (odd seqs) and network (even seqs)."""
    session_id = new_session(client)
    events = [console(i) if i % 2 else network(f"https://x.test/{i}") for i in range(1, 1001)]
    last = 0
    for start in range(0, 1000, 200):
        result = ingest(client, session_id, events[start:start + 200])
        assert result == {"accepted": 200, "dropped": 0, "last_seq": start + 200}
        last = result["last_seq"]
    assert last == 1000
    return session_id


# -- paging -----------------------------------------------------------------------------------

ODD = list(range(1, 1001, 2))
EVEN = list(range(2, 1001, 2))
ALL = list(range(1, 1001))


@pytest.mark.parametrize("order", ["asc", "desc"])
def test_paging_returns_every_archived_event_once_in_order(client, thousand, order):
    cases = [
        ({}, ALL),
        ({"limit": 37}, ALL),
        ({"category": "console"}, ODD),
        ({"category": "console", "limit": 33}, ODD),
        ({"category": "network"}, EVEN),
        ({"category": ["console", "network"]}, ALL),  # repeated parameter
        ({"category": "console,network"}, ALL),  # comma-joined, as the SDK sends it
        ({"type": "network_request"}, EVEN),
        ({"type": "console_log,network_request"}, ALL),
        ({"type": ["console_log", "network_request"]}, ALL),
        ({"category": "console", "type": "network_request"}, []),  # AND of both filters
        ({"category": "page"}, []),
    ]
    for query, expected in cases:
        query = {"limit": 100, **query, "order": order}
        envelopes = read_all(client, thousand, **query)
        want = expected if order == "asc" else expected[::-1]
        assert seqs(envelopes) == want, query
    console_texts = [e["event"]["data"]["text"] for e in read_all(client, thousand, category="console", limit=100)]
    assert console_texts == [str(i) for i in ODD]
    assert {e["event"]["category"] for e in read_all(client, thousand, category="network", limit=100)} == {"network"}


def test_a_page_has_the_envelope_shape_and_the_default_limit(client, thousand):
    envelopes, has_more, _ = read(client, thousand)
    assert len(envelopes) == 20 and has_more
    first = envelopes[0]
    assert set(first) == {"seq", "event"}
    assert first["seq"] == 1
    assert first["event"] == {"type": "console_log", "category": "console", "ts": at(T0), "source": {"kind": "cdp"},
                              "data": {"text": "1"}}
    newest, has_more, _ = read(client, thousand, order="desc", limit=100)
    assert seqs(newest) == list(range(1000, 900, -1)) and has_more


def test_the_last_page_says_no_more(client, frozen):
    session_id = new_session(client)
    assert read(client, session_id) == ([], False, 0)  # nothing archived yet
    assert read(client, session_id, order="desc") == ([], False, 0)
    ingest(client, session_id, [console(i) for i in range(5)])
    page, has_more, _ = read(client, session_id, limit=5)
    assert seqs(page) == [1, 2, 3, 4, 5] and not has_more
    page, has_more, _ = read(client, session_id, limit=5, order="desc")
    assert seqs(page) == [5, 4, 3, 2, 1] and not has_more
    page, has_more, _ = read(client, session_id, limit=4, order="desc")
    assert seqs(page) == [5, 4, 3, 2] and has_more


def test_the_offset_is_an_archive_cursor_not_a_seq(client, frozen):
    """Two sessions' events interleave in the archive: each session's cursor still pages its own events."""
    a, b = new_session(client), new_session(client)
    for round_ in range(3):
        ingest(client, a, [console(f"a{round_}-{i}") for i in range(4)])
        ingest(client, b, [console(f"b{round_}-{i}") for i in range(2)])
    page, has_more, cursor = read(client, b, limit=2)
    assert seqs(page) == [1, 2] and has_more
    assert cursor != 2  # b's seq 2 is not b's 2nd archived row: the cursor is not the seq
    collected = seqs(page)
    while has_more:
        page, has_more, cursor = read(client, b, limit=2, offset=cursor)
        collected += seqs(page)
    assert collected == [1, 2, 3, 4, 5, 6]
    assert [e["event"]["data"]["text"][0] for e in read_all(client, b, limit=2)] == ["b"] * 6
    assert seqs(read_all(client, a, limit=5)) == list(range(1, 13))
    assert seqs(read_all(client, a, limit=5, order="desc")) == list(range(12, 0, -1))


def test_an_offset_ignores_since(client, frozen):
    session_id = new_session(client)
    ingest(client, session_id, [console(i) for i in range(3)])
    page, has_more, cursor = read(client, session_id, limit=2)
    assert seqs(page) == [1, 2] and has_more
    clock.advance(minutes=10)  # the events are now older than the default since (5m) and than since=1m
    assert read(client, session_id)[0] == []
    assert read(client, session_id, since="1m")[0] == []
    page, has_more, _ = read(client, session_id, limit=2, offset=cursor)
    assert seqs(page) == [3] and not has_more
    page, has_more, _ = read(client, session_id, limit=2, offset=cursor, since="1m")
    assert seqs(page) == [3] and not has_more
    later = clock.isoformat(clock.now())
    page, has_more, _ = read(client, session_id, limit=2, offset=cursor, since=later)
    assert seqs(page) == [3] and not has_more


def test_until_is_exclusive_and_bounds_pages_read_with_an_offset(client, frozen):
    session_id = new_session(client)
    ingest(client, session_id, [console(i, ts=at(T0 - timedelta(minutes=m))) for i, m in enumerate((4, 3, 2, 1))])
    until = clock.isoformat(T0 - timedelta(minutes=2))  # exactly seq 3's ts: not included
    assert seqs(read(client, session_id, until=until)[0]) == [1, 2]
    assert seqs(read(client, session_id, until="2m")[0]) == [1, 2]  # a duration ago, the same instant
    page, has_more, cursor = read(client, session_id, until=until, limit=1)
    assert seqs(page) == [1] and has_more
    page, has_more, cursor = read(client, session_id, until=until, limit=1, offset=cursor)
    assert seqs(page) == [2] and not has_more
    page, has_more, _ = read(client, session_id, until=until, limit=5, offset=cursor)
    assert page == [] and not has_more
    assert seqs(read(client, session_id, limit=1, offset=cursor)[0]) == [3]  # without until, seq 3 follows
    # desc reads back from until, and until still bounds its offset pages
    page, has_more, cursor = read(client, session_id, order="desc", until=until, limit=1)
    assert seqs(page) == [2] and has_more
    assert seqs(read_all(client, session_id, order="desc", until=until, limit=1)) == [2, 1]
    assert seqs(read_all(client, session_id, order="desc", limit=1)) == [4, 3, 2, 1]


def test_windows_hold_exactly_the_events_of_their_ts_range_when_events_come_late(client, frozen):
    """Pages find their window through the archive order (app/browsers/telemetry.py _window): events
    whose ts is below one archived before them must still be in every window they belong to."""
    randomness = random.Random(13)
    session_id = new_session(client)
    minutes = [randomness.choice((randomness.randint(0, 120), randomness.randint(0, 10), 240)) for _ in range(300)]
    moments = [at(T0 - timedelta(minutes=240 - m)) for m in minutes]
    events = [console(i, ts=ts) if i % 3 else network(f"https://x.test/{i}", ts=ts) for i, ts in enumerate(moments)]
    for start in range(0, 300, 50):
        ingest(client, session_id, events[start:start + 50])
    stored = [(seq, event["ts"], "network" if event["type"] == "network_request" else "console")
              for seq, event in enumerate(events, start=1)]
    for _ in range(40):
        since, until = sorted(randomness.sample(range(0, 250), 2))
        category = randomness.choice((None, "console", "network"))
        query = {"since": clock.isoformat(T0 - timedelta(minutes=250 - since)),
                 "until": clock.isoformat(T0 - timedelta(minutes=250 - until)),
                 "limit": randomness.choice((1, 7, 100)), **({"category": category} if category else {})}
        want = [seq for seq, ts, kind in stored if at(T0 - timedelta(minutes=250 - since)) <= ts
                < at(T0 - timedelta(minutes=250 - until)) and category in (None, kind)]
        # (A page after the first one does not take since: test_an_offset_ignores_since.)
        assert seqs(read(client, session_id, **query)[0]) == want[:query["limit"]], query
        query.pop("since")
        want_desc = [seq for seq, ts, kind in stored if ts < at(T0 - timedelta(minutes=250 - until))
                     and category in (None, kind)][::-1]
        assert seqs(read_all(client, session_id, order="desc", **query)) == want_desc, query


def test_the_migration_gives_an_existing_archive_its_ts_high(app, client, frozen):
    session_id = new_session(client)
    ingest(client, session_id, [console(i, ts=at(T0 - timedelta(minutes=m))) for i, m in enumerate((5, 9, 3, 4, 1))])
    with db.connection_context():
        db.execute_sql("UPDATE telemetry_event SET ts_high = 0")  # as before m0010
        db.execute_sql("UPDATE browser_session SET telemetry_ts_high = 0")
        m0010_telemetry_ts_high.backfill(db)
        rows = db.execute_sql("SELECT ts, ts_high FROM telemetry_event ORDER BY id").fetchall()
        high = db.execute_sql("SELECT telemetry_ts_high FROM browser_session").fetchone()[0]
    minutes = [5, 5, 3, 3, 1]  # the running highest ts: 5 minutes ago, then 3, then 1
    assert [ts_high for _, ts_high in rows] == [at(T0 - timedelta(minutes=m)) for m in minutes]
    assert high == at(T0 - timedelta(minutes=1))
    assert seqs(read(client, session_id, since="4m", limit=10)[0]) == [3, 4, 5]  # since is inclusive


def test_since_defaults_to_five_minutes_ago(client, frozen):
    session_id = new_session(client)
    ingest(client, session_id, [console("old", ts=at(T0 - timedelta(minutes=10))),
                                console("edge", ts=at(T0 - timedelta(minutes=5))),
                                console("new")])
    assert seqs(read(client, session_id)[0]) == [2, 3]  # since is inclusive: 5m ago exactly is in
    assert seqs(read(client, session_id, since="15m")[0]) == [1, 2, 3]
    assert seqs(read(client, session_id, since="1m")[0]) == [3]
    assert seqs(read(client, session_id, since=clock.isoformat(T0 - timedelta(minutes=11)))[0]) == [1, 2, 3]
    assert seqs(read(client, session_id, since="2026-06-01T11:49:00Z")[0]) == [1, 2, 3]
    assert seqs(read(client, session_id, since="2026-06-01T13:49:00+02:00")[0]) == [1, 2, 3]  # an offset
    assert seqs(read(client, session_id, since="2026-06-01T11:59:00Z")[0]) == [3]
    # desc has no since: it reads back from the newest, old events included
    assert seqs(read(client, session_id, order="desc")[0]) == [3, 2, 1]


@pytest.mark.parametrize("query, field", [
    ({"order": "desc", "since": "1m"}, "since"),
    ({"order": "desc", "since": "2026-06-01T11:00:00Z"}, "since"),
    ({"limit": 0}, "limit"),
    ({"limit": 101}, "limit"),
    ({"limit": "many"}, "limit"),
    ({"offset": -1}, "offset"),
    ({"offset": "next"}, "offset"),
    ({"since": "soon"}, "since"),
    ({"since": "2026-13-01T00:00:00Z"}, "since"),
    ({"until": "later"}, "until"),
    ({"category": "bogus"}, "category"),
    ({"category": "console,bogus"}, "category"),
    ({"category": ["console", "bogus"]}, "category"),
    ({"order": "sideways"}, "order"),
])
def test_bad_queries_are_400_in_the_error_shape(client, frozen, query, field):
    session_id = new_session(client)
    response = client.get(f"/browsers/{session_id}/telemetry/events", query_string=query)
    assert response.status_code == 400, response.get_data(as_text=True)
    body = response.get_json()
    assert body["code"] == "bad_request" and isinstance(body["message"], str) and body["message"]
    assert body["details"] and all(isinstance(d["code"], str) and isinstance(d["message"], str)
                                   for d in body["details"])
    assert any(d.get("field", "").split(".")[0] == field for d in body["details"]), body


def test_desc_reads_back_from_until_or_the_cursor(client, frozen):
    session_id = new_session(client)
    ingest(client, session_id, [console(1)])
    assert seqs(read(client, session_id, order="desc", until="1m", limit=100)[0]) == []
    assert seqs(read(client, session_id, order="desc", limit=1, offset=0)[0]) == [1]  # 0: no cursor
    assert seqs(read(client, session_id, order="asc", limit=1)[0]) == [1]


# -- what is kept -----------------------------------------------------------------------------

@pytest.mark.parametrize("body", [{}, {"telemetry": None}, {"telemetry": {}}, {"telemetry": {"enabled": False}},
                                  {"telemetry": {"browser": {name: {"enabled": False} for name in
                                                             ("control", "connection", "system", "captcha")}}}])
def test_a_session_without_telemetry_counts_events_as_dropped(client, frozen, body):
    response = client.post("/browsers", json=body)
    assert response.status_code == 201, response.get_json()
    session_id = response.get_json()["session_id"]
    assert ingest(client, session_id, [console(1), network()]) == {"accepted": 0, "dropped": 2, "last_seq": 0}
    for query in ({}, {"order": "desc"}, {"since": "1d"}, {"category": "console"}):
        assert read(client, session_id, **query) == ([], False, 0), query


def test_switching_telemetry_off_drops_later_events(client, frozen):
    session_id = new_session(client)
    assert ingest(client, session_id, [console(1)]) == {"accepted": 1, "dropped": 0, "last_seq": 1}
    response = client.patch(f"/browsers/{session_id}", json={"telemetry": {"enabled": False}})
    assert response.status_code == 200, response.get_json()
    assert ingest(client, session_id, [console(2), network()]) == {"accepted": 0, "dropped": 2, "last_seq": 1}
    assert seqs(read(client, session_id)[0]) == [1]


def test_categories_switched_off_drop_their_events(client, frozen):
    session_id = new_session(client, telemetry_config={"enabled": True, "browser": {"console": {"enabled": True}}})
    result = ingest(client, session_id, [console(1), network(), console(2), network()])
    assert result == {"accepted": 2, "dropped": 2, "last_seq": 2}
    assert [(e["seq"], e["event"]["type"]) for e in read(client, session_id)[0]] == [(1, "console_log"),
                                                                                     (2, "console_log")]
    assert read(client, session_id, category="network") == ([], False, 0)
    assert read(client, session_id, type="network_request") == ([], False, 0)
    # network is off by default when telemetry is enabled; console as well
    defaults = new_session(client, telemetry_config={"enabled": True})
    assert ingest(client, defaults, [console(1), network(), cdp("Page.bringToFront")]) == \
        {"accepted": 1, "dropped": 2, "last_seq": 1}
    assert [e["event"]["type"] for e in read(client, defaults)[0]] == ["cdp_command"]


def test_excluded_cdp_methods_are_dropped(client, frozen):
    config = {"enabled": True, "browser": {"control": {"enabled": True,
                                                       "cdp": {"excluded_methods": ["Input.insertText"]}}}}
    session_id = new_session(client, telemetry_config=config)
    result = ingest(client, session_id, [cdp("Input.insertText", text_length=3), cdp("Page.bringToFront"),
                                         cdp("Input.insertText", text_length=1)])
    assert result == {"accepted": 1, "dropped": 2, "last_seq": 1}
    page = read(client, session_id, type="cdp_command")[0]
    assert [(e["seq"], e["event"]["data"]["method"]) for e in page] == [(1, "Page.bringToFront")]
    assert page[0]["event"]["category"] == "control"


def test_an_unknown_session_is_404(app, client, make_org, frozen):
    assert client.get("/browsers/nope/telemetry/events").status_code == 404
    theirs = client_for(app, make_org("Other", "owner@other.test").plaintext)
    session_id = new_session(theirs)
    ingest(theirs, session_id, [console(1)])
    for method in (client.get, client.post):
        response = method(f"/browsers/{session_id}/telemetry/events", json={"events": [console(2)]})
        assert response.status_code == 404 and response.get_json()["code"] == "browser_not_found"
    assert seqs(read(theirs, session_id)[0]) == [1]
    response = client.post("/browsers/nope/telemetry/events", json={"events": [console(1)]})
    assert response.status_code == 404 and response.get_json()["code"] == "browser_not_found"


def test_an_ended_sessions_archive_stays_readable(client, frozen):
    session_id = new_session(client, name="reader")
    ingest(client, session_id, [console(i) for i in range(3)])
    assert client.delete(f"/browsers/{session_id}").status_code == 204
    assert seqs(read(client, session_id)[0]) == [1, 2, 3]
    assert seqs(read_all(client, session_id, order="desc", limit=2)) == [3, 2, 1]
    timed_out = new_session(client, timeout_seconds=10)
    ingest(client, timed_out, [console("t")])
    clock.advance(seconds=11)
    assert seqs(read(client, timed_out)[0]) == [1]
    assert client.get(f"/browsers/{timed_out}").status_code == 404  # it has ended


# -- ingest -----------------------------------------------------------------------------------

def test_a_batch_with_a_malformed_event_is_refused_whole(client, frozen):
    session_id = new_session(client)
    assert ingest(client, session_id, [console("a"), console("b")])["last_seq"] == 2
    bad = {"type": "console_log", "source": {"kind": "cdp"}, "data": {"text": 3}}
    body = ingest(client, session_id, [console("c"), bad, console("d")], status=400)
    assert body["code"] == "bad_request"
    assert [d["field"] for d in body["details"]] == ["events.1.data.text"]
    body = ingest(client, session_id, [{"type": "no_such_type", "source": {"kind": "cdp"}}, console("e"),
                                       "not an object"], status=400)
    fields = sorted(d.get("field", "") for d in body["details"])
    assert fields[0] == "events.0.type" and fields[1].startswith("events.2"), fields
    assert ingest(client, session_id, [console("f")]) == {"accepted": 1, "dropped": 0, "last_seq": 3}
    page = read(client, session_id)[0]
    assert [(e["seq"], e["event"]["data"]["text"]) for e in page] == [(1, "a"), (2, "b"), (3, "f")]


@pytest.mark.parametrize("body", [{}, {"events": None}, {"events": "console"}, {"events": {"type": "console_log"}}])
def test_an_ingest_body_without_an_events_list_is_400(client, frozen, body):
    session_id = new_session(client)
    response = client.post(f"/browsers/{session_id}/telemetry/events", json=body)
    assert response.status_code == 400, response.get_json()
    assert any(d.get("field", "").startswith("events") for d in response.get_json()["details"])


def test_an_empty_batch_only_records_activity(client, frozen):
    session_id = new_session(client)
    ingest(client, session_id, [console(1)])
    assert ingest(client, session_id, []) == {"accepted": 0, "dropped": 0, "last_seq": 1}


def test_more_than_the_batch_limit_is_400(app, client, frozen):
    settings.change(app, TELEMETRY_MAX_BATCH=3)
    session_id = new_session(client)
    body = ingest(client, session_id, [console(i) for i in range(4)], status=400)
    assert [d["field"] for d in body["details"]] == ["events"]
    assert ingest(client, session_id, [console(i) for i in range(3)]) == {"accepted": 3, "dropped": 0, "last_seq": 3}


def test_seqs_rise_per_session_from_1(client, frozen):
    a, b = new_session(client), new_session(client)
    assert ingest(client, a, [console(1), console(2), console(3)])["last_seq"] == 3
    assert ingest(client, b, [network(), network()])["last_seq"] == 2
    assert ingest(client, a, [console(4)])["last_seq"] == 4
    assert ingest(client, b, [console(5)])["last_seq"] == 3
    assert seqs(read(client, a)[0]) == [1, 2, 3, 4]
    assert seqs(read(client, b)[0]) == [1, 2, 3]
    assert [e["event"]["type"] for e in read(client, b)[0]] == ["network_request", "network_request", "console_log"]


def test_ingest_into_a_deleted_session_is_409_and_stores_nothing(client, frozen):
    session_id = new_session(client)
    ingest(client, session_id, [console(1)])
    assert client.delete(f"/browsers/{session_id}").status_code == 204
    response = client.post(f"/browsers/{session_id}/telemetry/events", json={"events": [console(2)]})
    assert response.status_code == 409 and response.get_json()["code"] == "browser_session_ended"
    assert response.headers["x-should-retry"] == "false"
    assert seqs(read(client, session_id)[0]) == [1]


def test_ingest_into_a_timed_out_session_is_409(client, frozen):
    session_id = new_session(client, timeout_seconds=10)
    clock.advance(seconds=11)
    body = ingest(client, session_id, [console(1)], status=409)
    assert body["code"] == "browser_session_ended"
    assert read(client, session_id) == ([], False, 0)


# -- retention --------------------------------------------------------------------------------

def test_prune_cli_removes_what_is_older_than_the_retention(app, client, frozen):
    session_id = new_session(client, timeout_seconds=86400)
    ingest(client, session_id, [console("old-1"), console("old-2")])
    logged = client.post(f"/browsers/{session_id}/logs",
                         json={"source": "path", "path": "/var/log/app.log", "lines": [{"message": "old"}]})
    assert logged.status_code == 201
    clock.advance(hours=2)
    ingest(client, session_id, [console("new")])
    result = app.test_cli_runner().invoke(args=["browsers", "prune", "--retention-seconds", "3600"])
    assert result.exit_code == 0, result.output
    assert "deleted 2 telemetry event(s), 1 log line(s) and 0 recording(s)" in result.output
    page = read(client, session_id, since="1d")[0]
    assert [(e["seq"], e["event"]["data"]["text"]) for e in page] == [(3, "new")]
    again = app.test_cli_runner().invoke(args=["browsers", "prune", "--retention-seconds", "3600"])
    assert "deleted 0 telemetry event(s), 0 log line(s) and 0 recording(s)" in again.output


def test_prune_cli_defaults_to_the_configured_retention(app, client, frozen):
    session_id = new_session(client, timeout_seconds=86400)
    ingest(client, session_id, [console("old")])
    clock.advance(hours=2)
    ingest(client, session_id, [console("new")])
    settings.change(app, TELEMETRY_RETENTION_SECONDS=3 * 3600)
    assert "deleted 0 telemetry" in app.test_cli_runner().invoke(args=["browsers", "prune"]).output
    settings.change(app, TELEMETRY_RETENTION_SECONDS=3600)
    assert "deleted 1 telemetry" in app.test_cli_runner().invoke(args=["browsers", "prune"]).output
    assert seqs(read(client, session_id, since="1d")[0]) == [2]


def test_prune_function_keeps_newer_events(app, client, frozen):
    session_id = new_session(client, timeout_seconds=86400)
    ingest(client, session_id, [console(i) for i in range(3)])
    clock.advance(minutes=30)
    ingest(client, session_id, [console("kept")])
    clock.advance(minutes=40)  # the first three were received 70 minutes ago, the last 40
    with app.app_context(), db.connection_context():
        assert telemetry.prune(3600) == {"TelemetryEvent": 3, "BrowserLogLine": 0}
        assert telemetry.prune(3600) == {"TelemetryEvent": 0, "BrowserLogLine": 0}
    assert seqs(read(client, session_id, since="1d")[0]) == [4]
    # seqs keep rising after a prune
    assert ingest(client, session_id, [console("after")])["last_seq"] == 5


def test_a_burst_is_archived_by_one_prepared_statement_and_takes_its_seqs_at_once(client, frozen, caplog):
    session_id = new_session(client)
    with caplog.at_level(logging.DEBUG, logger="peewee"):
        ingest(client, session_id, [console(n) for n in range(1000)])
    # No SQL built per row: the rows go to the driver's executemany with one statement.
    built_inserts = [r for r in caplog.records if 'INSERT INTO "telemetry_event"' in r.getMessage()]
    seq_updates = [r for r in caplog.records
                   if 'UPDATE "browser_session"' in r.getMessage() and '"last_seq"' in r.getMessage()]
    assert built_inserts == []
    assert len(seq_updates) == 1  # the whole batch takes its seqs at once
    assert seqs(read_all(client, session_id, since="1h", limit=100)) == list(range(1, 1001))


# -- the archive's budget per session ------------------------------------------------------------

def lantern_log(client, session_id):
    return messages(read_frames(open_stream(client, session_id, {"source": "supervisor",
                                                                 "supervisor_process": "lantern"}, follow=False)))


def test_past_its_archive_budget_a_sessions_events_are_dropped_counted_and_said_once(app, client, frozen):
    """One page logging without end wrote 9.5 MB/s into the archive, kept 7 days."""
    session_id = new_session(client)
    assert ingest(client, session_id, [console(1)])["accepted"] == 1
    with app.app_context(), db.connection_context():
        one = BrowserSession.get_by_id(session_id).telemetry_bytes  # the JSON of console(n), n of one digit
    assert one > 0
    settings.change(app, TELEMETRY_ARCHIVE_SESSION_MAX_BYTES=3 * one)
    assert ingest(client, session_id, [console(2), console(3)]) == {"accepted": 2, "dropped": 0, "last_seq": 3}
    assert lantern_log(client, session_id) == []  # full to the byte, nothing dropped yet
    assert ingest(client, session_id, [console(4), console(5)]) == {"accepted": 0, "dropped": 2, "last_seq": 3}
    assert ingest(client, session_id, [console(6)]) == {"accepted": 0, "dropped": 1, "last_seq": 3}
    [said] = lantern_log(client, session_id)
    assert "telemetry archive is full" in said and "TELEMETRY_ARCHIVE_SESSION_MAX_BYTES" in said
    assert [envelope["event"]["data"]["text"] for envelope in read_all(client, session_id)] == ["1", "2", "3"]
    with app.app_context(), db.connection_context():
        session = BrowserSession.get_by_id(session_id)
    assert (session.telemetry_bytes, session.telemetry_dropped) == (3 * one, 3)
    settings.change(app, TELEMETRY_ARCHIVE_SESSION_MAX_BYTES=4 * one + one // 2)  # the rest of a batch past it
    assert ingest(client, session_id, [console(7), console(8)]) == {"accepted": 1, "dropped": 1, "last_seq": 4}
    assert len(lantern_log(client, session_id)) == 1  # once


def test_without_a_budget_the_archive_takes_what_comes(app, client, frozen):
    settings.change(app, TELEMETRY_ARCHIVE_SESSION_MAX_BYTES=None)
    session_id = new_session(client)
    assert ingest(client, session_id, [console("x" * 100_000)] * 20)["accepted"] == 20
