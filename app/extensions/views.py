"""Extensions (/extensions): upload, list, download, metadata, delete, and from the Chrome Web Store."""
import os

from flask import Response, g, request, send_file
from flask.views import MethodView

from app.core import blobs
from app.core.api import Blueprint
from app.core.errors import ApiError, bad_request
from app.core.paging import PAGE_HEADERS, page
from app.core.settings import settings
from app.extensions import chrome_store, schemas
from app.extensions.archive import InvalidArchive, validate_zip
from app.extensions.models import Extension

blp = Blueprint("extensions", __name__, url_prefix="/extensions",
                description="Browser extensions as ZIP archives, addressed by id or name.")
ZIP_RESPONSE = {"type": "string", "format": "binary"}
# Room for the multipart framing and the name field around the file itself.
MULTIPART_OVERHEAD = 16 * 1024


@blp.before_request
def allow_large_uploads():
    # Uploads may be far larger than the JSON bodies MAX_CONTENT_LENGTH is sized for;
    # Werkzeug spools them to a temp file, so they never sit whole in memory.
    if request.method == "POST":
        request.max_content_length = settings().extension_max_upload_bytes + MULTIPART_OVERHEAD


@blp.route("")
class Extensions(MethodView):
    @blp.arguments(schemas.ExtensionListArgsSchema, location="query")
    @blp.response(200, schemas.ExtensionSchema(many=True), headers=PAGE_HEADERS)
    def get(self, args):
        """List extensions of the project"""
        return page(Extension.listing(g.project.id, name=args.get("name"), query=args.get("query")), args)

    @blp.arguments(schemas.ExtensionUploadFormSchema, location="form")
    @blp.arguments(schemas.ExtensionUploadFileSchema, location="files")
    @blp.response(201, schemas.ExtensionSchema)
    def post(self, form, files):
        """Upload an extension (multipart: `file`, optional `name`)"""
        Extension.ensure_name_free(g.project, form.get("name"))
        upload = files["file"].stream
        limit = settings().extension_max_upload_bytes
        if upload.seek(0, os.SEEK_END) > limit:
            raise ApiError(413, "payload_too_large", f"The extension archive is larger than {limit} bytes.")
        upload.seek(0)
        try:
            validate_zip(upload, max_uncompressed=settings().extension_max_uncompressed_bytes,
                         max_entries=settings().extension_max_entries)
        except InvalidArchive as error:
            raise bad_request(str(error), field="file") from None
        upload.seek(0)
        checksum, size = blobs.store().put_stream(upload)
        return Extension.record(g.project, form.get("name"), checksum, size)


@blp.route("/from_chrome_store")
class ExtensionFromChromeStore(MethodView):
    @blp.arguments(schemas.ChromeStoreArgsSchema, location="query")
    @blp.response(200, ZIP_RESPONSE, content_type="application/zip")
    def get(self, args):
        """Download an extension from the Chrome Web Store, unpacked from CRX into a ZIP"""
        ext_id, data = chrome_store.fetch_zip(args["url"], args["os"])
        return Response(data, mimetype="application/zip",
                        headers={"Content-Disposition": f'attachment; filename="{ext_id}.zip"'})


@blp.route("/<extension_ref>")
class ExtensionByRef(MethodView):
    @blp.response(200, ZIP_RESPONSE, content_type="application/octet-stream")
    def get(self, extension_ref):
        """Download an extension: the ZIP bytes exactly as uploaded"""
        extension = Extension.lookup(g.project, extension_ref)
        return send_file(extension.path, mimetype="application/octet-stream", as_attachment=True,
                         download_name=f"{extension.name or extension.id}.zip", conditional=False)

    @blp.response(204)
    def delete(self, extension_ref):
        """Delete an extension"""
        Extension.lookup(g.project, extension_ref).delete_with_archive()


@blp.route("/<extension_ref>/metadata")
class ExtensionMetadata(MethodView):
    @blp.response(200, schemas.ExtensionSchema)
    def get(self, extension_ref):
        """Get an extension's metadata"""
        return Extension.lookup(g.project, extension_ref)
