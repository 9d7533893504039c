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
data, anything else by attribute. A list page of a compiled query (db.Page)
is dumped from the driver's rows without building its instances, by a function
written for the schema and the rows' layout (_ItemsFromRows), where every field
reads what a row holds.
"""
import json

import marshmallow as ma
import orjson
from flask.json.provider import DefaultJSONProvider
from marshmallow.decorators import POST_DUMP, PRE_DUMP
from marshmallow.utils import missing

from app.core import clock
from app.core.db import Page, UtcDateTimeField, stored_as
from app.core.fields import UtcDateTime

# Field types whose _serialize returns a value of exactly this type unchanged.
PASS_THROUGH = {ma.fields.String: str, ma.fields.Integer: int, ma.fields.Boolean: bool}
# Field types whose _serialize is this function of the value, None staying None.
DIRECT = {UtcDateTime: clock.isoformat}
# _serialize methods that read only the value (not the object it came from): a list page's items
# written from rows, where there is no object, may call them.
OF_THE_VALUE = {klass._serialize for klass in (ma.fields.Field, ma.fields.String, ma.fields.Number,
                                                ma.fields.Boolean, ma.fields.DateTime, ma.fields.Mapping)}


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
        if many and type(obj) is Page:
            write_item = obj.layout.item_dumps.get(self)
            if write_item is None:
                write_item = obj.layout.item_dumps[self] = _ItemsFromRows(obj.layout).write(self) or False
            if write_item:
                try:
                    return list(map(write_item, obj.rows))
                except _Unreadable:
                    pass  # a row lacks what its instance would load by itself: dump the instances
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
            lines.append(f"{indent}out[{key!r}] = {_serialized(namespace, idx, field, name, passes, 'obj')}")
        if reads_data:
            lines.insert(1, "    data = obj.__data__")
        lines.append("    return out")
        exec(compile("\n".join(lines), f"<dump of {kind.__name__}>", "exec"), namespace)
        self.by_type[kind] = namespace["dump"]
        return namespace["dump"]


def _serialized(namespace, suffix, field, name, passes, obj):
    """The expression of `value` serialized as `field`'s _serialize does (with `obj`, the
    expression of the object it came from), and what it needs put in `namespace`."""
    namespace[f"field_{suffix}"] = field
    serialized = f"field_{suffix}._serialize(value, {name!r}, {obj})"
    if type(field) in DIRECT:
        namespace[f"direct_{suffix}"] = DIRECT[type(field)]
        serialized = f"None if value is None else direct_{suffix}(value)"
    elif type(field) is ma.fields.Nested:  # its _serialize, less a call and the schema's lookup
        namespace[f"nested_{suffix}"] = field.schema.dump
        serialized = f"None if value is None else nested_{suffix}(value, many={field.schema.many or field.many})"
    if passes is not None:
        namespace[f"passes_{suffix}"] = passes
        serialized = f"value if type(value) is passes_{suffix} else {serialized}"
    return serialized


class _Unreadable(Exception):
    """A row of a page lacks what its instance would read with a query of its own."""


def _unreadable():
    raise _Unreadable


class _Unwritable(Exception):
    """A schema reads something of its objects that the rows of a page do not hold."""


class _ItemsFromRows:
    """Writes the function that dumps a list page's row as the dump of the instances the row would
    build does (the plan of _Dump, values read as RowLayout.source says the instance reads them),
    or finds the schema cannot be dumped that way (a field reading a property, or its object)."""

    def __init__(self, layout):
        self.layout, self.namespace, self.functions = layout, {"unreadable": _unreadable}, {}

    def write(self, dump):
        try:
            return self.namespace[self._function(dump, self.layout.root)]
        except _Unwritable:
            return None

    def _function(self, dump, key):
        """The name of the function writing `dump`'s item from the columns of the row's `key` instance."""
        if (dump, key) not in self.functions:
            name = self.functions[dump, key] = f"item_{len(self.functions)}"
            lines = [f"def {name}(row):", "    out = {}"]
            for idx, entry in enumerate(dump.plan):
                lines += self._field(key, f"{name}_{idx}", *entry)
            lines.append("    return out")
            source = "\n".join(lines)
            exec(compile(source, f"<items of {self.layout.models[key].__name__} rows>", "exec"), self.namespace)
        return self.functions[dump, key]

    def _field(self, key, prefix, out_key, field_name, source, field, passes, own_way):
        """The lines writing one field of the item."""
        read = None if own_way else self.layout.source(key, source)
        if read is None:
            raise _Unwritable
        if read[0] == "joined":
            _, dest, outer = read
            nested = getattr(field.schema, "dump", None) if type(field) is ma.fields.Nested else None
            if not isinstance(nested, _Dump) or field.schema.many or field.many or not self.layout.present(dest):
                raise _Unwritable
            return [f"    out[{out_key!r}] = {self._function(nested, dest)}(row) if {self._present(dest)} "
                    f"else {'None' if outer else 'unreadable()'}"]
        if type(field) not in DIRECT and type(field)._serialize not in OF_THE_VALUE:
            raise _Unwritable
        if read[0] == "column" and self._stored_timestamp(read[1], field):
            idx, convert = read[1]
            self.namespace[f"isoformat_{prefix}"] = convert.__self__.isoformat_of_read
            return [f"    value = row[{idx}]",
                    f"    out[{out_key!r}] = None if value is None else isoformat_{prefix}(value)"]
        if read[0] == "column":
            value = self._value(read[1], prefix)
        elif read[0] == "foreign id":
            _, own, dest, joined = read
            value = f"{self._value(joined, prefix + 'j')} if {self._present(dest)} else {self._value(own, prefix)}"
        else:  # related
            _, dest, outer, column = read
            value = f"{self._value(column, prefix)} if {self._present(dest)} else {'None' if outer else 'unreadable()'}"
        serialized = _serialized(self.namespace, prefix, field, field_name, passes, "None")
        return [f"    value = {value}", f"    out[{out_key!r}] = {serialized}"]

    def _value(self, column, prefix):
        """The expression of a column's value as the instance holds it: converted, NULL staying None."""
        idx, convert = column
        if idx is None:
            return "None"
        if convert is None:
            return f"row[{idx}]"
        self.namespace[f"convert_{prefix}"] = convert
        return f"(None if row[{idx}] is None else convert_{prefix}(row[{idx}]))"

    @staticmethod
    def _stored_timestamp(column, field):
        """True for a UtcDateTimeField column dumped by clock.isoformat, which the field turns into
        that text in one step."""
        idx, convert = column
        return (idx is not None and getattr(convert, "__func__", None) is UtcDateTimeField.python_value
                and DIRECT.get(type(field)) is clock.isoformat)

    def _present(self, key):
        return " or ".join(f"row[{idx}] is not None" for idx in self.layout.present(key)) or "False"


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
