"""Fetching an extension from the Chrome Web Store (or a configured look-alike) as a ZIP."""
import io
import re
import socket
import urllib.error
import urllib.request
from urllib.parse import quote, urlparse

from app.core.errors import ApiError, bad_request
from app.core.settings import settings
from app.extensions.archive import InvalidArchive, crx_to_zip, validate_zip

EXTENSION_ID = re.compile(r"^[a-p]{32}$")


def extension_id(store_url):
    """The 32-letter id from a Web Store URL (…/detail/<slug>/<id>), or a bare id."""
    candidate = store_url.strip()
    if not EXTENSION_ID.match(candidate):
        segments = [s for s in urlparse(candidate).path.split("/") if s]
        candidate = next((s for s in reversed(segments) if EXTENSION_ID.match(s)), "")
    if not candidate:
        raise bad_request("url must be a Chrome Web Store extension URL (…/detail/<name>/<32-letter id>) "
                          "or an extension id.", field="url")
    return candidate


def fetch_zip(store_url, os_name):
    """Download the CRX for the extension `store_url` names and return its ZIP bytes."""
    config = settings()
    ext_id = extension_id(store_url)
    crx_url = config.chrome_store_crx_url.format(id=quote(ext_id), os=quote(os_name))
    limit = config.extension_max_upload_bytes
    try:
        with urllib.request.urlopen(crx_url, timeout=config.chrome_store_timeout_seconds) as response:
            if response.status == 204:
                raise not_in_store(ext_id)
            data = response.read(limit + 1)
    except urllib.error.HTTPError as error:
        if error.code == 404:
            raise not_in_store(ext_id) from None
        raise store_unreachable(f"the store answered HTTP {error.code}") from None
    except (urllib.error.URLError, socket.timeout, TimeoutError, ConnectionError, OSError) as error:
        raise store_unreachable(str(getattr(error, "reason", error))) from None
    if len(data) > limit:
        raise ApiError(413, "payload_too_large", f"The extension is larger than {limit} bytes.")
    if not data:
        raise not_in_store(ext_id)
    try:
        archive = crx_to_zip(data)
        validate_zip(io.BytesIO(archive), max_uncompressed=config.extension_max_uncompressed_bytes,
                     max_entries=config.extension_max_entries)
        return ext_id, archive
    except InvalidArchive as error:
        raise ApiError(502, "chrome_store_bad_response", f"The store's answer is not a usable extension: {error}") \
            from None


def not_in_store(ext_id):
    return ApiError(404, "extension_not_in_store", f"The Chrome Web Store has no extension {ext_id}.")


def store_unreachable(reason):
    return ApiError(502, "chrome_store_unreachable", f"Could not download from the Chrome Web Store: {reason}.")
