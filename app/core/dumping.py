"""Response schemas dumped without marshmallow's per-field call chain.

marshmallow serializes each field through five calls (serialize, get_value, the
schema's accessor, get_value again, the key lookup) before the field's own
_serialize; for a 20-row list that is most of the response's cost. `speed_up`
gives a schema instance a `dump` that reads each value the way marshmallow's
default accessor does, passes strings, integers and booleans through when they
already have the type the field would give them, gives timestamps straight to
clock.isoformat and nested objects straight to their schema's dump (what those
fields' _serialize does), and hands every other value to the field's own
_serialize: the output is marshmallow's, field for field.
Schemas with dump hooks or their own accessor keep marshmallow's dump; fields
that read nothing, a dotted path, or in their own way go through marshmallow's
serialize.

The dump of one object is a function written for the schema's fields and the
object's type (as the row builders in app/core/db.py are for a query's columns):
a dict's values are read by key, a model's stored columns straight from its
data, anything else by attribute.
"""
import json

import marshmallow as ma
import orjson
from flask.json.provider import DefaultJSONProvider
from marshmallow.decorators import POST_DUMP, PRE_DUMP
from marshmallow.utils import missing

from app.core import clock
from app.core.db import stored_as
from app.core.fields import UtcDateTime

# Field types whose _serialize returns a value of exactly this type unchanged.
PASS_THROUGH = {ma.fields.String: str, ma.fields.Integer: int, ma.fields.Boolean: bool}
# Field types whose _serialize is this function of the value, None staying None.
DIRECT = {UtcDateTime: clock.isoformat}


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
        self.by_type = {}

    def __call__(self, obj, *, many=None):
        many = self.many if many is None else bool(many)
        by_type = self.by_type
        if many and obj is not None:
            return [(by_type.get(type(item)) or self._write(type(item)))(item) for item in obj]
        return (by_type.get(type(obj)) or self._write(type(obj)))(obj)

    def _write(self, kind):
        """The function dumping one object of type `kind`, written for the plan's fields."""
        namespace = {"missing": missing, "value_of": _value, "get_attribute": self.get_attribute}
        lines = ["def dump(obj):", "    out = {}"]
        reads_data = False
        for idx, (key, name, source, field, passes, own_way) in enumerate(self.plan):
            namespace[f"field_{idx}"] = field
            if own_way:
                lines += [f"    value = field_{idx}.serialize({name!r}, obj, accessor=get_attribute)",
                          "    if value is not missing:",
                          f"        out[{key!r}] = value"]
                continue
            column = stored_as(kind, source)
            reads_data = reads_data or column is not None
            if column is not None:
                lines.append(f"    value = data.get({column!r})")  # as peewee's descriptor reads it
            elif kind is dict:
                lines.append(f"    value = obj[{source!r}] if {source!r} in obj else getattr(obj, {source!r}, missing)")
            elif any("__getitem__" in vars(klass) for klass in kind.__mro__):  # the instances' own, not a metaclass's
                lines.append(f"    value = value_of(obj, {source!r})")
            else:
                lines.append(f"    value = getattr(obj, {source!r}, missing)")
            indent = "    "
            if column is None:
                default = field.dump_default
                if default is not missing:
                    namespace[f"default_{idx}"] = default
                    lines += ["    if value is missing:",
                              f"        value = default_{idx}{'()' if callable(default) else ''}"]
                lines.append("    if value is not missing:")
                indent += "    "
            serialized = f"field_{idx}._serialize(value, {name!r}, obj)"
            if type(field) in DIRECT:
                namespace[f"direct_{idx}"] = DIRECT[type(field)]
                serialized = f"None if value is None else direct_{idx}(value)"
            elif type(field) is ma.fields.Nested:  # its _serialize, less a call and the schema's lookup
                namespace[f"nested_{idx}"] = field.schema.dump
                serialized = f"None if value is None else nested_{idx}(value, many={field.schema.many or field.many})"
            if passes is not None:
                namespace[f"passes_{idx}"] = passes
                serialized = f"value if type(value) is passes_{idx} else {serialized}"
            lines.append(f"{indent}out[{key!r}] = {serialized}")
        if reads_data:
            lines.insert(1, "    data = obj.__data__")
        lines.append("    return out")
        exec(compile("\n".join(lines), f"<dump of {kind.__name__}>", "exec"), namespace)
        self.by_type[kind] = namespace["dump"]
        return namespace["dump"]


_plain_json = json.JSONEncoder(separators=(",", ":")).encode


def ascii_json(value):
    """Compact JSON text in ASCII of a value made of JSON's own types: the value (and, but for
    the spelling of small floats' exponents and of DEL, the text) that
    json.dumps(value, separators=(",", ":")) writes, in a tenth of its time (7 -> 0.7 us for a
    200-byte telemetry event here). Text orjson writes outside ASCII, which the json module
    escapes, and whatever orjson refuses go to the json module: ASCII keeps an SSE frame one line
    for every client (str.splitlines also breaks at U+2028)."""
    try:
        text = orjson.dumps(value).decode()
    except TypeError:  # orjson.JSONEncodeError
        return _plain_json(value)
    return text if text.isascii() else _plain_json(value)


class JsonProvider(DefaultJSONProvider):
    """Flask's JSON, with compact bodies (every response but debug mode's indented ones) written by
    orjson: about nine times faster than the json module on a 20-row list (116 -> 13 us here), which
    is most of a list's cost after the dump. The value is the same, only its spelling may differ:
    non-ASCII text is written as UTF-8 rather than \\u escapes (the body is UTF-8 either way).
    Datetimes and dataclasses still go to Flask's `default`; what orjson refuses (integers beyond
    64 bits, lone surrogates, keys that are not strings, types `default` cannot take) goes to the
    json module as before, which writes it or raises its own error. (NaN and infinities would be
    written as null, not as the json module's invalid NaN; requests cannot store them.)"""

    COMPACT = {"separators": (",", ":")}

    def __init__(self, app):
        super().__init__(app)
        self._options = (orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
                         | (orjson.OPT_SORT_KEYS if self.sort_keys else 0))
        # Built once: json.dumps builds a new encoder on every call that passes options.
        self._compact = json.JSONEncoder(default=self.default, ensure_ascii=self.ensure_ascii,
                                         sort_keys=self.sort_keys, **self.COMPACT)

    def dumps(self, obj, **kwargs):
        if kwargs != self.COMPACT:
            return super().dumps(obj, **kwargs)
        try:
            return orjson.dumps(obj, default=self.default, option=self._options).decode()
        except TypeError:  # orjson.JSONEncodeError
            return self._compact.encode(obj)
