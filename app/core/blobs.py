"""Content-addressed blob store on disk (profile states, extension archives).

A blob is named by the SHA-256 of its bytes, so identical uploads share one
file. Writes go to a temp file in the same folder and are renamed into place,
so a reader never sees a partial blob. Records point at blobs through
BlobRefField columns; a blob no record references is removed.
"""
import hashlib
import io
import os
import tempfile

from flask import current_app
from peewee import CharField

CHUNK = 1024 * 1024


class BlobRefField(CharField):
    """A column holding a blob digest; the store checks every one before removing a blob."""


class BlobStore:
    def __init__(self, root):
        self.root = root
        os.makedirs(os.path.join(root, "tmp"), exist_ok=True)

    def path(self, digest):
        return os.path.join(self.root, digest[:2], digest)

    def put_stream(self, stream, *, limit=None):
        """Copy `stream` in chunks into the store; returns (digest, size).

        Raises ValueError when more than `limit` bytes arrive (nothing is kept).
        """
        sha, size = hashlib.sha256(), 0
        descriptor, temp_path = tempfile.mkstemp(dir=os.path.join(self.root, "tmp"))
        try:
            with os.fdopen(descriptor, "wb") as out:
                while chunk := stream.read(CHUNK):
                    size += len(chunk)
                    if limit is not None and size > limit:
                        raise ValueError(f"more than {limit} bytes")
                    sha.update(chunk)
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
            digest = sha.hexdigest()
            final = self.path(digest)
            os.makedirs(os.path.dirname(final), exist_ok=True)
            os.replace(temp_path, final)
            return digest, size
        except BaseException:
            if os.path.exists(temp_path):
                os.unlink(temp_path)
            raise

    def put_bytes(self, data):
        return self.put_stream(io.BytesIO(data))[0]

    def read(self, digest):
        with open(self.path(digest), "rb") as blob:
            return blob.read()

    def delete(self, digest):
        try:
            os.unlink(self.path(digest))
        except FileNotFoundError:
            pass


def init_app(app):
    root = app.config["BLOB_DIR"] or os.path.join(app.instance_path, "blobs")
    app.extensions["blobs"] = BlobStore(root)


def store():
    return current_app.extensions["blobs"]


def release(base, digest):
    """Remove the blob `digest` unless a BlobRefField of any model below `base` still names it."""
    if digest is None:
        return
    pending = [base]
    while pending:
        model = pending.pop()
        pending.extend(model.__subclasses__())
        for field in model._meta.sorted_fields:
            if isinstance(field, BlobRefField) and model.select().where(field == digest).exists():
                return
    store().delete(digest)
