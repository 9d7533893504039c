"""GET /: what this server is and where its API is described (public, like the docs)."""
import marshmallow as ma
from flask import Response

from app.core.api import Blueprint
from app.core.settings import settings

PUBLIC = {"security": []}

blp = Blueprint("home", __name__, description="Where to start: the docs and the OpenAPI document (no key needed).")


class HomeSchema(ma.Schema):
    name = ma.fields.String()
    version = ma.fields.String()
    docs = ma.fields.String(metadata={"description": "the interactive docs (Swagger UI)"})
    openapi = ma.fields.String(metadata={"description": "the OpenAPI document"})
    authentication = ma.fields.String()


@blp.route("/")
@blp.response(200, HomeSchema)
@blp.doc(**PUBLIC)
def index():
    """What this server is; links to the interactive docs and the OpenAPI document"""
    config = settings()
    return {"name": config.api_title, "version": config.api_version,
            "docs": "/" + config.openapi_swagger_ui_path, "openapi": "/" + config.openapi_json_path,
            "authentication": "Every other route needs 'Authorization: Bearer <API key>'."}


@blp.route("/favicon.ico")
@blp.response(204)
@blp.doc(**PUBLIC)
def favicon():
    """No icon (browsers ask for one on every page; the answer is cached for a day)"""
    return Response(status=204, headers={"Cache-Control": "public, max-age=86400"})
