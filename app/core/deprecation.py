"""Deprecated routes: Deprecation/Sunset/Link headers until the sunset, then 410 Gone."""
import calendar
import functools
from email.utils import formatdate
from urllib.parse import quote

from flask import after_this_request, current_app, request

from app.core import clock
from app.core.errors import ApiError


def sunset_route(config_prefix, successor_of=lambda path: "/org" + path):
    """Wrap a view served on a deprecated path.

    `<config_prefix>_DEPRECATED_AT` and `<config_prefix>_SUNSET_AT` (RFC 3339)
    come from configuration so tests can move the clock across the sunset.
    """
    def decorate(view):
        @functools.wraps(view)
        def wrapper(*args, **kwargs):
            config = current_app.config
            deprecated_at = clock.parse_rfc3339(config[f"{config_prefix}_DEPRECATED_AT"])
            sunset_at = clock.parse_rfc3339(config[f"{config_prefix}_SUNSET_AT"])
            # Quoted: the path is the caller's, and a header must stay one well-formed Link.
            successor = quote(successor_of(request.path), safe="/")
            link = f'<{successor}>; rel="successor-version"'
            if clock.now() >= sunset_at:
                raise ApiError(
                    410, "route_removed",
                    f"{request.method} {request.path} was removed on {clock.isoformat(sunset_at)}; "
                    f"use {request.method} {successor}.",
                    headers={"Link": link},
                )

            @after_this_request
            def announce(response):
                # RFC 9745 (Deprecation: @epoch-seconds) and RFC 8594 (Sunset: HTTP-date).
                response.headers["Deprecation"] = f"@{calendar.timegm(deprecated_at.timetuple())}"
                response.headers["Sunset"] = formatdate(calendar.timegm(sunset_at.timetuple()), usegmt=True)
                response.headers["Link"] = link
                return response

            return view(*args, **kwargs)
        return wrapper
    return decorate
