"""Deprecated routes: Deprecation/Sunset/Link headers until the sunset, then 410 Gone."""
import calendar
import functools
from email.utils import formatdate
from urllib.parse import quote

from flask import after_this_request, request

from app.core import clock
from app.core.errors import ApiError
from app.core.settings import settings


def sunset_route(prefix, successor_of=lambda path: "/org" + path):
    """Wrap a view served on a deprecated path.

    Settings `<prefix>_deprecated_at` and `<prefix>_sunset_at` (instants) are configuration so tests can
    move the clock across the sunset.
    """
    def decorate(view):
        @functools.wraps(view)
        def wrapper(*args, **kwargs):
            deprecated_at = clock.to_naive_utc(getattr(settings(), f"{prefix}_deprecated_at"))
            sunset_at = clock.to_naive_utc(getattr(settings(), f"{prefix}_sunset_at"))
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
