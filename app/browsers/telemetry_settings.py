"""Which events a session's telemetry settings keep (contract 6.8.2): the ingest's filter, and the categories
a browser host's capture is told to produce."""
from lantern_wire.hosts import CDP_CATEGORIES


def captured(event, config):
    """Whether the session's telemetry config keeps this event (contract 6.8.2)."""
    if not config.get("enabled"):
        return False
    category = event["category"]
    categories = config.get("browser") or {}
    if category == "monitor":  # not configurable: flows while any category fed by CDP is on
        return any((categories.get(name) or {}).get("enabled") for name in CDP_CATEGORIES)
    switch = categories.get(category) or {}
    if not switch.get("enabled"):
        return False
    if event["type"] == "cdp_command":
        excluded = (switch.get("cdp") or {}).get("excluded_methods") or ()
        return (event.get("data") or {}).get("method") not in excluded
    return True


def enabled_categories(config):
    """The categories whose events the session's telemetry config keeps (what a capture need produce)."""
    if not config.get("enabled"):
        return set()
    enabled = {name for name, switch in (config.get("browser") or {}).items() if (switch or {}).get("enabled")}
    return enabled | ({"monitor"} if enabled & set(CDP_CATEGORIES) else set())


def session_categories(session):
    """The categories a host's capture of `session` produces, sorted (as JSON carries them)."""
    return sorted(enabled_categories(session.options.get("telemetry") or {}))
