"""Organization-wide usage figures for GET /org/limits, gathered from every area.

An area that runs or stores something the organization limits registers a
counter here; a figure with no counter is zero because nothing of that kind
can exist yet.
"""
USAGE_FIELDS = ("concurrent_sessions_used", "auth_connections_used", "vaults_used")
_counters = {}


def usage_counter(field):
    """Register `fn(org) -> int` for one of USAGE_FIELDS."""
    if field not in USAGE_FIELDS:
        raise ValueError(f"unknown usage field {field!r}")

    def register(fn):
        _counters[field] = fn
        return fn
    return register


def usage(org):
    return {field: _counters[field](org) if field in _counters else 0 for field in USAGE_FIELDS}
