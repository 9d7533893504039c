"""Marshmallow fields shared by every area."""
import re

import marshmallow as ma

from app.core import clock
from app.core.text import fold


class UtcDateTime(ma.fields.DateTime):
    """RFC 3339 with `Z` out; any offset in, stored as naive UTC."""

    def _serialize(self, value, attr, obj, **kwargs):
        return None if value is None else clock.isoformat(value)

    def _deserialize(self, value, attr, data, **kwargs):
        try:
            return clock.to_naive_utc(super()._deserialize(value, attr, data, **kwargs))
        except OverflowError:  # an offset that moves year 1 or year 9999 out of range in UTC
            raise ma.ValidationError("Not a valid datetime: out of range once in UTC.") from None


class Name(ma.fields.String):
    """A trimmed, non-empty name of at most 255 characters."""

    def __init__(self, **kwargs):
        kwargs.setdefault("validate", ma.validate.Length(1, 255))
        # In the OpenAPI document too, so clients (and generated tests) know a blank name is refused.
        kwargs["metadata"] = {"pattern": self.pattern(), **kwargs.get("metadata", {})}
        super().__init__(**kwargs)

    @classmethod
    def pattern(cls):
        return r"\S"

    def _deserialize(self, value, attr, data, **kwargs):
        name = super()._deserialize(value, attr, data, **kwargs).strip()
        # Folding can lengthen a name ("ß" -> "ss"); the folded key must fit its column too.
        if len(fold(name)) > 255:
            raise ma.ValidationError("Name is too long.")
        return name


class PathName(Name):
    """A name that addresses its resource in a URL path segment (`/things/{id_or_name}`).

    A "/" would arrive as a second path segment, so the resource could never be
    reached by name; such names are refused up front.
    """

    forbidden = "/"

    @classmethod
    def pattern(cls):
        usable = "^" + re.escape(cls.forbidden) + r"\x00-\x1f\x7f"
        return rf"^[{usable}]*[{usable}\s][{usable}]*$"

    def _deserialize(self, value, attr, data, **kwargs):
        name = super()._deserialize(value, attr, data, **kwargs)
        if any(c in name for c in self.forbidden):
            raise ma.ValidationError("A name may not contain " + " or ".join(repr(c) for c in self.forbidden) + ".")
        # It also goes into headers (Content-Disposition) and URLs.
        if any(ord(c) < 32 or ord(c) == 127 for c in name):
            raise ma.ValidationError("A name may not contain control characters.")
        return name


class JsonInteger(ma.fields.Integer):
    """An integer in a JSON body: 2.5 and "3" are refused, never rounded or parsed."""

    def __init__(self, **kwargs):
        super().__init__(strict=True, **kwargs)


class JsonNumber(ma.fields.Float):
    """A number in a JSON body (an integer or a fraction): "0.05" and true are refused, never parsed."""

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.make_error("invalid")
        return super()._deserialize(value, attr, data, **kwargs)


class JsonBoolean(ma.fields.Boolean):
    """A boolean in a JSON body: only true and false, not "yes" or 1."""

    def __init__(self, **kwargs):
        super().__init__(truthy={True}, falsy={False}, **kwargs)


class Choice(ma.fields.String):
    """A string out of `choices`. Anything else, a value of another type included, is refused with a message
    naming them: String alone answers `"memory": 3` with "Not a valid string." and nothing more."""

    def __init__(self, choices, *, error=None, **kwargs):
        choices = list(choices)
        message = error or f"Must be one of: {', '.join(choices)}."
        super().__init__(validate=ma.validate.OneOf(choices, error=message), **kwargs)
        self.error_messages = {**self.error_messages, "invalid": message}
