"""What a host reports to the app (lantern_wire/reports.py): JSON both ways, and a refusal naming the field."""
import json

import pytest

from lantern_wire.hosts import MAX_REPORT_ITEMS, MAX_REPORT_LINES
from lantern_wire.reports import (
    ActivityReport,
    EndedReport,
    Heartbeat,
    HeartbeatAnswer,
    InvalidShape,
    LogsReport,
    Registered,
    Registration,
    ReplayUpload,
    ReportResults,
    ReportsRequest,
    TelemetryReport,
    parse,
    parse_report,
)

REPORTS = [
    TelemetryReport(session_id="s1", batch=3, events=[{"type": "console_log", "data": {"text": "hi"}}], lost=2),
    TelemetryReport(session_id="s1", batch=4, events=[]),
    LogsReport(session_id="s1", batch=5, source="supervisor", log_name="chromium", lines=[{"message": "m"}]),
    ActivityReport(session_id="s1"),
    EndedReport(session_id="s1", reason="oom"),
]


@pytest.mark.parametrize("report", REPORTS, ids=lambda report: type(report).__name__)
def test_a_report_comes_back_as_it_was_sent(report):
    sent = json.loads(json.dumps(report.to_dict()))
    assert sent["kind"] == report.kind and parse_report(sent) == report


def test_what_is_none_is_not_sent():
    assert "lost" not in REPORTS[1].to_dict()
    assert Registration(address="http://h:1", capacity=2, headful=True).to_dict() == {
        "address": "http://h:1", "capacity": 2, "headful": True}


@pytest.mark.parametrize("shape, data", [
    (Registration, {"address": "http://h:1", "capacity": 2, "headful": False, "unavailable_reason": "no chromium"}),
    (Heartbeat, {"sessions": ["a", "b"], "active": ["a"]}),
    (HeartbeatAnswer, {"stop": ["c"], "categories": {"a": {"revision": 2, "names": ["console", "page"]}}}),
    (Registered, {"name": "h1", "heartbeat_seconds": 2.0}),
    (ReportResults, {"results": [{"status": "ok", "accepted": 1}, {"status": "refused", "message": "no"}]}),
])
def test_the_other_shapes_round_trip(shape, data):
    assert parse(shape, json.loads(json.dumps(parse(shape, data).to_dict()))).to_dict() == data


@pytest.mark.parametrize("data, field", [
    ({"kind": "telemetry", "session_id": "s1", "batch": 0, "events": []}, "batch"),
    ({"kind": "telemetry", "session_id": "s1", "batch": True, "events": []}, "batch"),
    ({"kind": "telemetry", "session_id": "s1", "batch": 2**63, "events": []}, "batch"),
    ({"kind": "telemetry", "session_id": "s1", "batch": 1, "events": [{}] * (MAX_REPORT_LINES + 1)}, "events"),
    ({"kind": "telemetry", "session_id": "s1", "batch": 1, "events": ["x"]}, "events.0"),
    ({"kind": "telemetry", "session_id": "s1", "batch": 1, "events": [], "lost": 2**31}, "lost"),
    ({"kind": "telemetry", "session_id": "S 1", "batch": 1, "events": []}, "session_id"),
    ({"kind": "activity", "session_id": "\ud800"}, "session_id"),
    ({"kind": "logs", "session_id": "s1", "batch": 1, "source": "elsewhere", "log_name": "x", "lines": []}, "source"),
    ({"kind": "logs", "session_id": "s1", "batch": 1, "source": "path", "log_name": "x" * 256, "lines": []},
     "log_name"),
    ({"kind": "logs", "session_id": "s1", "batch": 1, "source": "path", "log_name": "x", "lines": [{}]},
     "lines.0.message"),
    ({"kind": "ended", "session_id": "s1", "reason": "because"}, "reason"),
    ({"kind": "activity", "session_id": "s1", "extra": 1}, "extra"),
    ({"kind": "resized", "session_id": "s1"}, ""),
    ([], ""),
])
def test_a_malformed_report_is_refused_naming_its_field(data, field):
    with pytest.raises(InvalidShape) as refused:
        parse_report(data)
    assert refused.value.field == field and (not field or str(refused.value).startswith(f"{field}: "))


def test_texts_with_lone_surrogates_are_checked_as_the_app_stores_them():
    """JSON carries "\\ud800" and a page's JavaScript makes one: a bounded text has U+FFFD in its place; a free
    one (a log line's message, an event) is left for the app to store replaced."""
    report = parse_report({"kind": "logs", "session_id": "s1", "batch": 1, "source": "path", "log_name": "a\ud800",
                           "lines": [{"message": "b\ud800"}]})
    assert report.log_name == "a\ufffd" and report.lines[0].message == "b\ud800"
    assert parse(Registration, {"address": "http://h:1", "capacity": 0, "headful": False,
                                "unavailable_reason": "\udfff"}).unavailable_reason == "\ufffd"


def test_registration_and_heartbeat_keep_the_limits_the_app_enforced():
    good = {"address": "http://h:1", "capacity": 1, "headful": False}
    for wrong, field in (({"capacity": -1}, "capacity"), ({"capacity": 2**31}, "capacity"),
                         ({"capacity": 1.0}, "capacity"), ({"headful": "yes"}, "headful"),
                         ({"unavailable_reason": "x" * 2001}, "unavailable_reason"), ({"address": 12}, "address")):
        with pytest.raises(InvalidShape) as refused:
            parse(Registration, {**good, **wrong})
        assert refused.value.field == field
    with pytest.raises(InvalidShape) as refused:
        parse(Heartbeat, {"sessions": ["a"] * (MAX_REPORT_ITEMS + 1), "active": []})
    assert refused.value.field == "sessions"


def test_an_envelope_counts_reports_events_and_lines_as_the_app_does():
    envelope = parse(ReportsRequest, {"reports": [r.to_dict() for r in REPORTS] + ["not a report"]})
    assert envelope.items() == len(REPORTS) + 1 + 1 + 1  # one event, one line


@pytest.mark.parametrize("query, field", [({"started_at": "nan", "finished_at": "1"}, "started_at"),
                                          ({"started_at": "1", "finished_at": "inf"}, "finished_at"),
                                          ({"started_at": "1e20", "finished_at": "1"}, "started_at"),
                                          ({"started_at": "-1", "finished_at": "1"}, "started_at"),
                                          ({"started_at": "1"}, "finished_at")])
def test_a_recordings_times_are_unix_seconds(query, field):
    with pytest.raises(InvalidShape) as refused:
        parse(ReplayUpload, query)
    assert refused.value.field == field
    upload = ReplayUpload(started_at=1700000000.5, finished_at=1700000002.5, error="why")
    assert parse(ReplayUpload, upload.query()) == upload
