"""What counts as an active resource of a project, gathered from every area.

Each area registers a counter when its models module is imported, so deleting a
project can refuse while anything of any area still lives in it, without this
area importing the others.
"""
_counters = {}


def active_resource_counter(name):
    """Register `fn(project) -> int` under `name` (e.g. "api_keys")."""
    def register(fn):
        _counters[name] = fn
        return fn
    return register


def active_resources(project):
    """Non-zero counts of live resources in `project`, by kind."""
    counts = {name: count(project) for name, count in _counters.items()}
    return {name: n for name, n in counts.items() if n}
