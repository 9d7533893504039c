"""Where clients reach this server: PUBLIC_BASE_URL (set it behind a proxy), else the request's host."""
from flask import request

from app.core.settings import settings


def public_base_url():
    """`scheme://host[:port][/path]`, without a trailing slash."""
    return (settings().public_base_url or request.host_url).rstrip("/")
