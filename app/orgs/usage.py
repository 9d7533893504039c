"""Organization-wide usage figures for GET /org/limits, gathered from every area.

An area that runs or stores something the organization limits registers a
counter here; a figure with no counter is zero because nothing of that kind
can exist yet.
"""

from app.core.errors import ApiError
from app.core.settings import settings

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
        "min_health_check_interval_seconds": settings().min_health_check_interval_seconds,
        **counts,
    }


def first_cap_reached(caps):
    """`caps`: (scope, cap or None, query counting what runs in that scope), checked in order.

    The first scope whose cap is reached, as {"scope", "limit", "usage"}; None when all have room.
    """
    for scope, cap, running in caps:
        if cap is not None:
            count = running.count()
            if count >= cap:
                return {"scope": scope, "limit": cap, "usage": count}
    return None


def concurrency_limit_error(limit_name, reached, *, retry_after, advice=""):
    """The 429 for a reached concurrency cap: which limit, in which scope, and the usage."""
    scope, limit, count = reached["scope"], reached["limit"], reached["usage"]
    return ApiError(
        429, "concurrency_limit_exceeded",
        f"The {scope}'s {limit_name} ({limit}) is reached: {count} running.{' ' + advice if advice else ''}",
        details=[{"code": limit_name, "scope": scope, "limit": limit, "usage": count,
                  "message": f"{scope} limit {limit}, {count} running"}],
        headers={"Retry-After": str(retry_after)},
    )
