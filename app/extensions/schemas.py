"""Request and response shapes of extensions (contract 6.5)."""
import marshmallow as ma
from flask_smorest.fields import Upload
from marshmallow import validate

from app.core.fields import PathName, UtcDateTime
from app.core.paging import PageArgsSchema


class ExtensionSchema(ma.Schema):
    id = ma.fields.String()
    name = ma.fields.String(allow_none=True)
    created_at = UtcDateTime()
    size_bytes = ma.fields.Integer()
    checksum = ma.fields.String(metadata={"description": "lowercase hex SHA-256 of the uploaded archive"})
    last_used_at = UtcDateTime(allow_none=True)


def not_a_route(name):
    # GET /extensions/from_chrome_store is the store download, so this name could never be downloaded.
    if name == "from_chrome_store":
        raise ma.ValidationError("'from_chrome_store' is a route of this API, not a usable name.")


class ExtensionUploadFormSchema(ma.Schema):
    name = PathName(validate=[validate.Length(1, 255), not_a_route],
                    metadata={"description": "optional; unique in the project"})


class ExtensionUploadFileSchema(ma.Schema):
    file = Upload(required=True, metadata={"description": "the extension as a ZIP archive"})


class ExtensionListArgsSchema(PageArgsSchema):
    name = ma.fields.String(metadata={"description": "exact name"})
    query = ma.fields.String(metadata={"description": "substring of the name; exact id"})


class ChromeStoreArgsSchema(ma.Schema):
    url = ma.fields.String(required=True, metadata={"description": "Chrome Web Store URL of the extension"})
    os = ma.fields.String(load_default="linux", validate=validate.OneOf(["win", "mac", "linux"]))
