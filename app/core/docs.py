"""Swagger UI's own files, served by Lantern so that /docs works offline and behind a firewall.

flask-smorest's /docs page loads swagger-ui.css, swagger-ui-bundle.js and
swagger-ui-standalone-preset.js from OPENAPI_SWAGGER_UI_URL. When that setting is a path
on this server (the default, /docs/assets/), the files are served here from the pinned
flask-swagger-ui package, whose dist/ folder is Swagger UI's release build. Only the
stylesheets, scripts and icons in that folder are served, each by its exact name.
"""
import os
from importlib.resources import files

from flask import Blueprint, send_from_directory

from app.core.errors import not_found
from app.core.settings import settings

DIST = files("flask_swagger_ui") / "dist"
# (Flask adds "; charset=utf-8" to the text types.)
CONTENT_TYPES = {".css": "text/css", ".js": "text/javascript", ".png": "image/png"}
# The names carry no version, so a browser may keep an upgraded file's old copy this long (then revalidates).
CACHE_SECONDS = 24 * 3600

blp = Blueprint("api-docs-assets", __name__)


def _served_files():
    """File name -> content type, for each file in DIST whose suffix is in CONTENT_TYPES."""
    served = {}
    for entry in DIST.iterdir():
        suffix = os.path.splitext(entry.name)[1]
        if entry.is_file() and suffix in CONTENT_TYPES:
            served[entry.name] = CONTENT_TYPES[suffix]
    return served


ASSETS = _served_files()


@blp.get("/<filename>")
def asset(filename):
    """One of Swagger UI's files; 404 for any other name (a path never reaches the disk unless listed)."""
    content_type = ASSETS.get(filename)
    if content_type is None:
        raise not_found(f"No docs asset named {filename!r}.")
    response = send_from_directory(DIST, filename, mimetype=content_type, max_age=CACHE_SECONDS,
                                   conditional=True)
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response


def init_app(app):
    """Serve the assets at OPENAPI_SWAGGER_UI_URL when it is a path here; a URL elsewhere (a CDN) is left alone."""
    base = settings(app).openapi_swagger_ui_url
    if base.startswith("/") and not base.startswith("//"):
        app.register_blueprint(blp, url_prefix=base.rstrip("/"))
