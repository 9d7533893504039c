"""Organization-wide usage figures for GET /org/limits, gathered from every area.

An area that runs or stores something the organization limits registers a
counter here; a figure with no counter is zero because nothing of that kind
can exist yet.
"""
from flask import current_app

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


def limits_of(org):
    """The OrgLimits record: the organization's limit and default cap, with usage."""
    counts = usage(org)
    limit = org.max_concurrent_sessions
    return {
        "max_concurrent_sessions": limit,
        "default_project_max_concurrent_sessions": org.default_project_max_concurrent_sessions,
        "concurrent_sessions_available": None if limit is None else max(0, limit - counts["concurrent_sessions_used"]),
        # A self-hosted install caps neither.
        "max_auth_connections": None,
        "max_vaults": None,
        "min_health_check_interval_seconds": current_app.config["MIN_HEALTH_CHECK_INTERVAL_SECONDS"],
        **counts,
    }
