"""No client can forge a log line (#11 item 14): control characters are escaped, or logged as JSON."""
import json
import logging

import pytest

from app.core.requestlog import JsonFormatter, TextFormatter

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


@pytest.mark.parametrize("formatter", [TextFormatter(), JsonFormatter()], ids=["text", "json"])
def test_a_traceback_cannot_start_a_line_of_its_own(formatter):
    try:
        raise ValueError("bad\n2026-11-23 07:00:00,000 INFO forged")
    except ValueError:
        record = logging.LogRecord("app", logging.ERROR, __file__, 1, "failed", None, __import__("sys").exc_info())
    lines = formatter.format(record).splitlines()
    assert not any(line.startswith("2026-11-23") for line in lines)


def test_an_unknown_log_format_is_refused(make_app):
    with pytest.raises(ValueError, match="LOG_FORMAT"):
        make_app(LOG_FORMAT="xml")
