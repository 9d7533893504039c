"""Where clients reach this server: PUBLIC_BASE_URL (set it behind a proxy), else the request's host."""
from flask import current_app, request


def public_base_url():
    """`scheme://host[:port][/path]`, without a trailing slash."""
    return (current_app.config["PUBLIC_BASE_URL"] or request.host_url).rstrip("/")
