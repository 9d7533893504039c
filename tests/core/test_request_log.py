"""No client can forge a log line (#11 item 14): control characters are escaped, or logged as JSON."""
import json
import logging

import pytest

from app.core.requestlog import JsonFormatter, TextFormatter, escape_controls
from lantern_wire.settings_errors import SettingsError

FORGED = "/nope%0A2026-11-23%2007:00:00,000%20INFO%20[1]%20app.requests:%20GET%20/admin%20200%E2%80%A8x"


def request_records(caplog, anonymous):
    caplog.set_level("INFO", logger="app.requests")
    anonymous.get(FORGED)
    return [r for r in caplog.records if r.name == "app.requests"]


def test_the_text_format_keeps_a_request_on_one_line(caplog, anonymous):
    (record,) = request_records(caplog, anonymous)
    line = TextFormatter().format(record)
    assert "\n" not in line and "\u2028" not in line
    assert "/nope\\n2026-11-23 07:00:00,000 INFO" in line and "\\u2028x 401" in line


def test_the_json_format_is_one_object_per_line(caplog, anonymous):
    (record,) = request_records(caplog, anonymous)
    line = JsonFormatter().format(record)
    assert "\n" not in line
    entry = json.loads(line)
    assert entry["level"] == "INFO" and entry["logger"] == "app.requests" and entry["time"].endswith("Z")
    assert entry["message"].startswith("GET /nope\n2026-11-23 07:00:00,000 INFO")


def test_every_control_character_is_escaped_and_printable_text_kept():
    controls = [chr(c) for c in [*range(0x20), *range(0x7f, 0xa0), 0x2028, 0x2029]]
    for control in controls:
        for tail in ("b", "b\u00a0\u00e9"):
            escaped = escape_controls(f"GET /a{control}{tail}")
            assert control not in escaped and escaped.startswith("GET /a\\") and escaped.endswith(tail)
    assert escape_controls("GET /caf\u00e9/\u2603 200") == "GET /caf\u00e9/\u2603 200"


@pytest.mark.parametrize("formatter", [TextFormatter(), JsonFormatter()], ids=["text", "json"])
def test_a_traceback_cannot_start_a_line_of_its_own(formatter):
    try:
        raise ValueError("bad\n2026-11-23 07:00:00,000 INFO forged")
    except ValueError:
        record = logging.LogRecord("app", logging.ERROR, __file__, 1, "failed", None, __import__("sys").exc_info())
    lines = formatter.format(record).splitlines()
    assert not any(line.startswith("2026-11-23") for line in lines)


def test_an_unknown_log_format_is_refused(make_app):
    with pytest.raises(SettingsError, match="^Lantern cannot start: LOG_FORMAT='xml' .*: should be 'text' or 'json'$"):
        make_app(LOG_FORMAT="xml")


def test_the_text_format_writes_the_time_as_logging_does():
    ours, logging_own = TextFormatter(), logging.Formatter()
    for created in (1_700_000_000.123, 1_700_000_000.999, 1_700_000_001.0, 1_700_000_000.5):
        record = logging.LogRecord("app", logging.INFO, __file__, 1, "x", None, None)
        record.created, record.msecs = created, (created - int(created)) * 1000
        assert ours.formatTime(record) == logging_own.formatTime(record)


def test_a_request_id_is_echoed_or_made_up_anew(caplog, client):
    caplog.set_level("INFO", logger="app.requests")
    given = client.get("/org/limits", headers={"X-Request-Id": "mine-1"})
    made = [client.get("/org/limits").headers["X-Request-Id"] for _ in range(2)]
    assert given.headers["X-Request-Id"] == "mine-1"
    assert all(len(id_) == 24 for id_ in made) and made[0] != made[1]
    logged = [r.getMessage() for r in caplog.records if r.name == "app.requests"]
    assert [line.rsplit("request_id=", 1)[1] for line in logged] == ["mine-1", *made]
