"""Request and response shapes of extensions (contract 6.5)."""
from urllib.parse import urlsplit

import marshmallow as ma
from flask_smorest.fields import Upload
from marshmallow import validate

from app.core.fields import Choice, PathName, UtcDateTime
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


def parsable_url(value):
    try:
        urlsplit(value.strip())
    except ValueError as error:  # e.g. "http://[x": an unclosed IPv6 host
        raise ma.ValidationError(f"Not a URL: {error}.") from None


# The shapes chrome_store.extension_id takes: a bare 32-letter id, or a URL whose path ends with one.
STORE_URL = r"^([a-p]{32}|https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[^\s/?#;\[\]]*)*/[a-p]{32}/?([?#]\S*)?)$"


class ChromeStoreArgsSchema(ma.Schema):
    url = ma.fields.String(required=True, validate=parsable_url,
                           metadata={"description": "Chrome Web Store URL of the extension "
                                                    "(…/detail/<name>/<32-letter id>), or its id",
                                     "pattern": STORE_URL})
    os = Choice(["win", "mac", "linux"], load_default="linux")
