"""Content-addressed blob store on disk (profile states, extension archives).

A blob is named by the SHA-256 of its bytes, so identical uploads share one
file. Writes go to a temp file in the same folder and are renamed into place,
so a reader never sees a partial blob. Records point at blobs through
BlobRefField columns; a blob no record references is removed once it is older
than BLOB_GRACE_SECONDS. The grace matters: a write stores the blob before it
inserts the row naming it, so a blob written moments ago may be about to gain
a reference that no query can see yet. Blobs released inside the grace are
removed by `flask --app app blobs sweep` (run it from cron).
"""
import hashlib
import io
import os
import tempfile
import time

import werkzeug.utils
from flask import current_app, request
from peewee import CharField
from werkzeug.wsgi import FileWrapper

from app.core.settings import settings

CHUNK = 1024 * 1024
# Under gunicorn's gevent worker a read from a socket holding data, or a send to one with room, does not yield: a
# large body copied from or to a client that keeps up (nginx on the same machine) had the worker to itself until
# its last byte, its other requests (hosts' heart-beats, CDP relays) waiting: 2 s and more for 500 MiB. Copies of
# blobs pause once a CHUNK (time.sleep(0): a yield to the other greenlets under gevent, next to nothing elsewhere).


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
                    time.sleep(0)
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


class PausingFileWrapper(FileWrapper):
    """A file as a WSGI body, a CHUNK at a time with a pause between (see CHUNK); not the server's own wrapper, whose
    sendfile() does not pause."""

    def __init__(self, file, buffer_size=CHUNK):
        super().__init__(file, CHUNK)

    def __next__(self):
        time.sleep(0)
        return super().__next__()


def send_file(path, **options):
    """flask.send_file of a blob's `path` (its conditional and range requests too), sent by a PausingFileWrapper."""
    return werkzeug.utils.send_file(path, {**request.environ, "wsgi.file_wrapper": PausingFileWrapper},
                                    max_age=current_app.get_send_file_max_age,
                                    use_x_sendfile=current_app.config["USE_X_SENDFILE"],
                                    response_class=current_app.response_class, **options)


def init_app(app):
    app.extensions["blobs"] = BlobStore(settings(app).blob_dir)


def store():
    return current_app.extensions["blobs"]


def _ref_fields(base):
    pending, found = [base], []
    while pending:
        model = pending.pop()
        pending.extend(model.__subclasses__())
        found.extend((model, f) for f in model._meta.sorted_fields if isinstance(f, BlobRefField))
    return found


def _old_enough(path):
    try:
        return time.time() - os.path.getmtime(path) >= settings().blob_grace_seconds
    except FileNotFoundError:
        return False


def release(base, digest):
    """Remove the blob `digest` if no BlobRefField of a model below `base` names it and
    it is older than the grace period (else the next sweep will)."""
    if digest is None or not _old_enough(store().path(digest)):
        return
    if any(model.select().where(field == digest).exists() for model, field in _ref_fields(base)):
        return
    store().delete(digest)


def sweep(base):
    """Remove every unreferenced blob older than the grace period; returns how many."""
    referenced = set()
    for model, field in _ref_fields(base):
        referenced.update(value for (value,) in model.select(field).where(field.is_null(False)).tuples())
    removed = 0
    root = store().root
    for folder in os.listdir(root):
        if folder == "tmp":
            continue
        for name in os.listdir(os.path.join(root, folder)):
            if name not in referenced and _old_enough(os.path.join(root, folder, name)):
                store().delete(name)
                removed += 1
    return removed
