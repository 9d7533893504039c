"""The one clock of the application, so tests can move time instead of sleeping."""
from datetime import datetime, timedelta, timezone

EPOCH = datetime(1970, 1, 1)

_frozen_at = None


def now():
    """Current time as a naive UTC datetime, the form every model stores."""
    if _frozen_at is not None:
        return _frozen_at
    return datetime.now(timezone.utc).replace(tzinfo=None)


def freeze(at):
    """Stop the clock at `at` (naive UTC or aware); tests only."""
    global _frozen_at
    _frozen_at = to_naive_utc(at)


def advance(**delta):
    """Move a frozen clock forward by a timedelta's keyword arguments."""
    freeze(now() + timedelta(**delta))


def unfreeze():
    global _frozen_at
    _frozen_at = None


def to_naive_utc(value):
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc).replace(tzinfo=None)
    return value


def parse_rfc3339(text):
    """Parse an RFC 3339 timestamp (with `Z` or an offset) into naive UTC."""
    return to_naive_utc(datetime.fromisoformat(text.replace("Z", "+00:00")))


def isoformat(value):
    """RFC 3339 with a `Z`, the one way timestamps leave the server."""
    if value.tzinfo is not None:
        value = to_naive_utc(value)
    return value.isoformat(timespec="microseconds") + "Z"


def micros(value):
    """Unix time in microseconds of a naive UTC datetime (telemetry timestamps)."""
    return (value - EPOCH) // timedelta(microseconds=1)
