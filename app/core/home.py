"""GET /: what this server is and where its API is described (public, like the docs)."""
import marshmallow as ma
from flask import Response, current_app

from app.core.api import Blueprint

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
    config = current_app.config
    return {"name": config["API_TITLE"], "version": config["API_VERSION"],
            "docs": "/" + config["OPENAPI_SWAGGER_UI_PATH"], "openapi": "/" + config["OPENAPI_JSON_PATH"],
            "authentication": "Every other route needs 'Authorization: Bearer <API key>'."}


@blp.route("/favicon.ico")
@blp.response(204)
@blp.doc(**PUBLIC)
def favicon():
    """No icon (browsers ask for one on every page; the answer is cached for a day)"""
    return Response(status=204, headers={"Cache-Control": "public, max-age=86400"})
