"""Response schemas dumped without marshmallow's per-field call chain.

marshmallow serializes each field through five calls (serialize, get_value, the
schema's accessor, get_value again, the key lookup) before the field's own
_serialize; for a 20-row list that is most of the response's cost. `speed_up`
gives a schema instance a `dump` that reads each value the way marshmallow's
default accessor does, passes strings, integers and booleans through when they
already have the type the field would give them, and hands every other value to
the field's own _serialize: the output is marshmallow's, field for field.
Schemas with dump hooks or their own accessor keep marshmallow's dump; fields
that read nothing, a dotted path, or in their own way go through marshmallow's
serialize.
"""
import json

import marshmallow as ma
from flask.json.provider import DefaultJSONProvider
from marshmallow.decorators import POST_DUMP, PRE_DUMP
from marshmallow.utils import missing

# Field types whose _serialize returns a value of exactly this type unchanged.
PASS_THROUGH = {ma.fields.String: str, ma.fields.Integer: int, ma.fields.Boolean: bool}


def speed_up(schema):
    """Give `schema` (an instance) and the schemas nested in it the fast dump, where it applies."""
    if ("dump" in vars(schema) or schema._hooks[PRE_DUMP] or schema._hooks[POST_DUMP]
            or type(schema).get_attribute is not ma.Schema.get_attribute):
        return
    plan = []
    for name, field in schema.dump_fields.items():
        source = field.attribute if field.attribute is not None else name
        own_way = (not field._CHECK_ATTRIBUTE or "." in source or type(field).serialize is not ma.fields.Field.serialize
                   or type(field).get_value is not ma.fields.Field.get_value)
        for nested in _nested_schemas(field):
            speed_up(nested)
        passes = PASS_THROUGH.get(type(field))
        if isinstance(field, ma.fields.Integer) and field.as_string:
            passes = None
        key = field.data_key if field.data_key is not None else name
        plan.append((key, name, source, field, passes, own_way))
    schema.dump = _Dump(schema, tuple(plan))


def _nested_schemas(field):
    if isinstance(field, ma.fields.Nested):
        yield field.schema
    elif isinstance(field, ma.fields.List):
        yield from _nested_schemas(field.inner)


def _value(obj, key):
    """marshmallow's default accessor for a plain key: an item, else an attribute."""
    if not hasattr(obj, "__getitem__"):
        return getattr(obj, key, missing)
    try:
        return obj[key]
    except (KeyError, IndexError, TypeError, AttributeError):
        return getattr(obj, key, missing)


class _Dump:
    def __init__(self, schema, plan):
        self.many, self.get_attribute, self.plan = schema.many, schema.get_attribute, plan

    def __call__(self, obj, *, many=None):
        many = self.many if many is None else bool(many)
        if many and obj is not None:
            return [self.one(item) for item in obj]
        return self.one(obj)

    def one(self, obj):
        out = {}
        for key, name, source, field, passes, own_way in self.plan:
            if own_way:
                value = field.serialize(name, obj, accessor=self.get_attribute)
                if value is not missing:
                    out[key] = value
                continue
            value = _value(obj, source)
            if value is missing:
                default = field.dump_default
                value = default() if callable(default) else default
                if value is missing:
                    continue
            if value is None or type(value) is not passes:
                value = field._serialize(value, name, obj)
            out[key] = value
        return out


class JsonProvider(DefaultJSONProvider):
    """Flask's JSON, with the encoder of compact responses built once: json.dumps builds a new
    encoder on every call that passes options, which a small response pays more for than its encoding."""

    COMPACT = {"separators": (",", ":")}

    def __init__(self, app):
        super().__init__(app)
        self._compact = json.JSONEncoder(default=self.default, ensure_ascii=self.ensure_ascii,
                                         sort_keys=self.sort_keys, **self.COMPACT)

    def dumps(self, obj, **kwargs):
        if kwargs == self.COMPACT:
            return self._compact.encode(obj)
        return super().dumps(obj, **kwargs)
