"""Flask's JSON by orjson (app/core/jsonprovider.py): the value Flask's own provider writes, and SSE frames'
compact ASCII JSON."""
import dataclasses
import datetime as dt
import decimal
import json
import uuid

import pytest
from flask import Flask
from flask.json.provider import DefaultJSONProvider

from app.core import jsonprovider


@dataclasses.dataclass
class Point:
    x: int


@pytest.mark.parametrize("value", [
    {"b": [1, 2.5, None, True], "a": {"z": "text", "y": ""}},
    {"at": dt.datetime(2026, 11, 25, 12, 0, 1)},  # Flask's default: an HTTP date
    {"point": Point(3)},
    {"id": uuid.UUID(int=5), "amount": decimal.Decimal("1.50")},
    {"big": 2**70},  # beyond orjson's 64 bits: the json module writes it
    {"lone": "\ud800"},
    {1: "a key that is not a string"},
    {"text": "é ☃ \u2028"},
], ids=["plain", "datetime", "dataclass", "uuid-decimal", "big-int", "lone-surrogate", "int-key", "non-ascii"])
def test_compact_responses_hold_the_value_flask_writes(value):
    app = Flask(__name__)
    ours, flasks = jsonprovider.JsonProvider(app), DefaultJSONProvider(app)
    with app.app_context():
        written, expected = ours.dumps(value, **ours.COMPACT), flasks.dumps(value, **ours.COMPACT)
    assert json.loads(written) == json.loads(expected)
    assert written == expected or not written.isascii()  # only non-ASCII text is spelled otherwise


def test_compact_responses_refuse_what_flask_refuses():
    app = Flask(__name__)
    with pytest.raises(TypeError), app.app_context():
        jsonprovider.JsonProvider(app).dumps({"what": object()}, **jsonprovider.JsonProvider.COMPACT)


@pytest.mark.parametrize("value", [
    {"type": "console_log", "ts": 1764000000000000, "data": {"text": "x" * 50, "level": "log", "n": [1, 2.5, None]}},
    {"text": "é ☃ \u2028 \u2029 \x85"},  # the json module's escapes, so a frame stays one line
    {"text": "a lone \ud800"},
    {"big": 2**70, "small": 1e-7},
], ids=["ascii", "non-ascii", "lone-surrogate", "beyond-orjson"])
def test_ascii_json_is_the_json_modules_value_in_ascii(value):
    written = jsonprovider.ascii_json(value)
    assert written.isascii() and "\n" not in written and len(written.splitlines()) == 1
    assert json.loads(written) == value
    if value.get("text"):
        assert written == json.dumps(value, separators=(",", ":"))
