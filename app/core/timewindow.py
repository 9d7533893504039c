"""Points in time given as RFC 3339 or as a duration ago ("5m", "2h", "30s", "1d")."""
import re
from datetime import timedelta

import marshmallow as ma

from app.core import clock

DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d)$")
UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_point(text):
    """naive UTC datetime for an RFC 3339 timestamp, or now minus a duration; ValueError otherwise."""
    text = text.strip()
    match = DURATION.match(text)
    if match:
        try:
            return clock.now() - timedelta(seconds=float(match.group(1)) * UNITS[match.group(2)])
        except OverflowError:
            raise ValueError(f"{text!r} reaches back before year 1") from None
    try:
        return clock.parse_rfc3339(text)
    except OverflowError:  # an offset that moves year 1 or year 9999 out of range in UTC
        raise ValueError(f"{text!r} is out of range once in UTC") from None
    except ValueError:
        raise ValueError(f"{text!r} is neither an RFC 3339 timestamp nor a duration like 5m") from None


class TimePoint(ma.fields.String):
    """A query parameter holding an RFC 3339 timestamp or a duration ago."""

    def __init__(self, **kwargs):
        # Both shapes in the OpenAPI document, so a client (or a generated test) knows what is taken.
        shapes = {"anyOf": [{"format": "date-time"}, {"pattern": DURATION.pattern}]}
        super().__init__(**{**kwargs, "metadata": {**shapes, **kwargs.get("metadata", {})}})

    def _deserialize(self, value, attr, data, **kwargs):
        try:
            return parse_point(super()._deserialize(value, attr, data, **kwargs))
        except ValueError as error:
            raise ma.ValidationError(str(error)) from None
