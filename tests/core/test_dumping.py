"""The fast response dump gives what marshmallow's dump gives, field for field."""
import dataclasses
import datetime as dt
import decimal
import json
import uuid
from types import SimpleNamespace

import marshmallow as ma
import peewee
import pytest
from flask import Flask
from flask.json.provider import DefaultJSONProvider

from app.core import dumping
from app.core.fields import UtcDateTime


class Creator(ma.Schema):
    id = ma.fields.String()
    name = ma.fields.String(allow_none=True)


class Everything(ma.Schema):
    text = ma.fields.String()
    number = ma.fields.Integer()
    number_text = ma.fields.Integer(as_string=True)
    flag = ma.fields.Boolean()
    at = UtcDateTime(allow_none=True)
    at_offset = UtcDateTime(allow_none=True)
    renamed = ma.fields.String(attribute="source_name")
    keyed = ma.fields.String(data_key="keyedOut")
    defaulted = ma.fields.String(dump_default="fallback")
    computed = ma.fields.Method("shout")
    dotted = ma.fields.String(attribute="creator.name")
    creator = ma.fields.Nested(Creator, allow_none=True)
    creators = ma.fields.List(ma.fields.Nested(Creator))
    members = ma.fields.Nested(Creator, many=True)
    tags = ma.fields.Dict(keys=ma.fields.String(), values=ma.fields.String())
    raw = ma.fields.Raw()

    def shout(self, obj):
        return str(getattr(obj, "text", obj.get("text") if isinstance(obj, dict) else "")).upper()


FULL = {
    "text": "hello", "number": 7, "number_text": 8, "flag": True, "at": dt.datetime(2026, 11, 25, 12, 0, 1, 500),
    "at_offset": dt.datetime(2026, 11, 25, 13, 0, tzinfo=dt.timezone(dt.timedelta(hours=1))),
    "members": [{"id": "u4", "name": "Di"}, SimpleNamespace(id="u5", name=None)],
    "source_name": "from source", "keyed": "k", "creator": {"id": "u1", "name": None},
    "creators": [{"id": "u2", "name": "Ann"}, SimpleNamespace(id="u3", name="Bo")], "tags": {"a": "b"},
    "raw": {"any": [1, 2]},
}
ODD_TYPES = {
    # Values whose type is not the field's: each goes through the field's own conversion.
    "text": b"bytes", "number": True, "flag": 1, "at": None, "creator": None, "creators": [], "tags": {},
    "members": None,
    "number_text": "9", "raw": None,
}


@pytest.mark.parametrize("data", [
    FULL,
    ODD_TYPES,
    {},  # nothing present: defaults only
    {"items": 1},  # a dict lacks most keys; marshmallow then reads its attributes (dict.keys, ...)
    SimpleNamespace(**FULL),
    None,
], ids=["full", "odd-types", "empty", "dict-attributes", "object", "none"])
def test_fast_dump_matches_marshmallow(data):
    fast = Everything()
    dumping.speed_up(fast)
    assert "dump" in vars(fast)
    assert fast.dump(data) == ma.Schema.dump(Everything(), data)


def test_many_and_nested_schemas_are_sped_up():
    fast = Everything(many=True)
    dumping.speed_up(fast)
    assert "dump" in vars(fast.fields["creator"].schema)
    assert "dump" in vars(fast.fields["creators"].inner.schema)
    rows = [FULL, SimpleNamespace(**FULL), {}]
    assert fast.dump(rows) == ma.Schema.dump(Everything(many=True), rows)
    assert fast.dump(FULL, many=False) == ma.Schema.dump(Everything(), FULL)


class Mapping:
    """Not a dict, but read by key first, as marshmallow reads anything with __getitem__."""

    def __init__(self, items, **attributes):
        self.items_, self.__dict__ = items, {**attributes, "items_": items}

    def __getitem__(self, key):
        return self.items_[key]


class Person(peewee.Model):
    name = peewee.CharField()


class Row(peewee.Model):
    """A model instance: stored columns, a reference, properties and plain attributes."""
    text = peewee.CharField()
    number = peewee.IntegerField(null=True)
    at = peewee.DateTimeField(null=True)
    renamed_column = peewee.CharField(column_name="other_name")
    creator_ref = peewee.ForeignKeyField(Person, null=True)

    @property
    def flag(self):
        return self.number is not None

    class Meta:
        database = None


class OfRows(ma.Schema):
    text = ma.fields.String()
    number = ma.fields.Integer(allow_none=True)
    at = UtcDateTime(allow_none=True)
    renamed = ma.fields.String(attribute="renamed_column")
    flag = ma.fields.Boolean()
    creator = ma.fields.Nested(Creator, allow_none=True)
    creator_ref_id = ma.fields.Integer(allow_none=True)
    absent = ma.fields.String()
    defaulted = ma.fields.String(dump_default=lambda: "called")


def test_models_mappings_and_mixed_lists_dump_as_marshmallow_dumps():
    """Each type's dump is written for it: a model's stored columns are read from its data, a
    dict's values by key, other mappings by marshmallow's own accessor; a list may mix them."""
    model = Row(text="t", number=None, at=dt.datetime(2026, 11, 25, 1, 2, 3), renamed_column="r")
    model.creator, model.creator_ref_id = SimpleNamespace(id="u9", name="Cy"), 4
    partial = Row(text="only text")  # columns never set read as None, as peewee's descriptor gives them
    rows = [model, partial, dict(FULL, renamed_column="d"), Mapping({"text": "m"}, number=5),
            Mapping({}, text="attribute"), SimpleNamespace(text="plain"), model]
    fast = OfRows(many=True)
    dumping.speed_up(fast)
    expected = ma.Schema.dump(OfRows(many=True), rows)
    assert fast.dump(rows) == expected
    assert fast.dump(rows) == expected  # the written dumps, now cached per type
    assert set(fast.dump.by_type) == {Row, dict, Mapping, SimpleNamespace}
    assert expected[0]["renamed"] == "r" and expected[0]["creator_ref_id"] == 4 and expected[0]["flag"] is False
    assert expected[1]["number"] is None and expected[4]["text"] == "attribute" and expected[3]["number"] == 5


def test_schemas_with_dump_hooks_keep_marshmallows_dump():
    class Hooked(ma.Schema):
        text = ma.fields.String()

        @ma.post_dump
        def tag(self, data, **kwargs):
            return {**data, "hooked": True}

    schema = Hooked()
    dumping.speed_up(schema)
    assert "dump" not in vars(schema)
    assert schema.dump({"text": "x"}) == {"text": "x", "hooked": True}


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
    ours, flasks = dumping.JsonProvider(app), DefaultJSONProvider(app)
    with app.app_context():
        written, expected = ours.dumps(value, **ours.COMPACT), flasks.dumps(value, **ours.COMPACT)
    assert json.loads(written) == json.loads(expected)
    assert written == expected or not written.isascii()  # only non-ASCII text is spelled otherwise


def test_compact_responses_refuse_what_flask_refuses():
    app = Flask(__name__)
    with pytest.raises(TypeError), app.app_context():
        dumping.JsonProvider(app).dumps({"what": object()}, **dumping.JsonProvider.COMPACT)


@pytest.mark.parametrize("value", [
    {"type": "console_log", "ts": 1764000000000000, "data": {"text": "x" * 50, "level": "log", "n": [1, 2.5, None]}},
    {"text": "é ☃ \u2028 \u2029 \x85"},  # the json module's escapes, so a frame stays one line
    {"text": "a lone \ud800"},
    {"big": 2**70, "small": 1e-7},
], ids=["ascii", "non-ascii", "lone-surrogate", "beyond-orjson"])
def test_ascii_json_is_the_json_modules_value_in_ascii(value):
    written = dumping.ascii_json(value)
    assert written.isascii() and "\n" not in written and len(written.splitlines()) == 1
    assert json.loads(written) == value
    if value.get("text"):
        assert written == json.dumps(value, separators=(",", ":"))
