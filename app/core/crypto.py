"""Encryption at rest for secrets (credential values, TOTP secrets, provider tokens).

Fernet keys come from ENCRYPTION_KEYS (newest first). MultiFernet encrypts with
the first and decrypts with any, so a key is rotated by putting a new one in
front, running `flask --app app secrets rotate`, then dropping the old one.
Without configured keys, one is generated once into the instance folder.
"""
import logging
import os
import tempfile

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from flask import current_app
from peewee import TextField

from app.core.settings import settings

logger = logging.getLogger(__name__)
KEY_FILE = "encryption.keys"


class CiphertextField(TextField):
    """Marks a column that holds Fernet ciphertext, so rotation can find every one."""


def configured_keys(app):
    """ENCRYPTION_KEYS (app/config.py checked it); else the instance file."""
    keys = settings(app).encryption_keys
    if keys is None:
        return load_or_create_key_file(os.path.join(app.instance_path, KEY_FILE))
    return list(keys)


def load_or_create_key_file(path, make=lambda: Fernet.generate_key().decode(), what="encryption key"):
    """Read an instance secret file (one secret a line), creating it (mode 0600) with `make()` if missing.

    Created via a hard link of a complete temp file, so processes starting at once
    (workers, a browser host) agree on one secret and never read a half-written file.
    """
    if not os.path.exists(path):
        descriptor, temp_path = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".keys-")
        try:
            with os.fdopen(descriptor, "w") as handle:
                handle.write(make() + "\n")
            os.link(temp_path, path)
            logger.warning("generated a new %s in %s; back it up with the database", what, path)
        except FileExistsError:
            pass
        finally:
            os.unlink(temp_path)
    with open(path) as handle:
        return [line.strip() for line in handle if line.strip() and not line.startswith("#")]


class Vault:
    """Encrypts and decrypts text with the application's keys."""

    def __init__(self, keys):
        try:
            self._fernet = MultiFernet([Fernet(k) for k in keys])
        except (ValueError, TypeError) as error:
            raise RuntimeError("ENCRYPTION_KEYS must be url-safe base64 Fernet keys "
                               "(make one with: flask --app app secrets generate-key)") from error

    def encrypt(self, text):
        return self._fernet.encrypt(text.encode()).decode()

    def decrypt(self, ciphertext):
        try:
            return self._fernet.decrypt(ciphertext.encode()).decode()
        except InvalidToken:
            raise RuntimeError("stored ciphertext does not decrypt with any configured encryption key") from None

    def rotate(self, ciphertext):
        """The same plaintext, encrypted with the newest key."""
        try:
            return self._fernet.rotate(ciphertext.encode()).decode()
        except InvalidToken:
            raise RuntimeError("stored ciphertext does not decrypt with any configured encryption key") from None


def init_app(app):
    app.extensions["vault"] = Vault(configured_keys(app))


def _vault():
    return current_app.extensions["vault"]


def encrypt(text):
    return _vault().encrypt(text)


def decrypt(ciphertext):
    return _vault().decrypt(ciphertext)


def ciphertext_columns(base):
    """(model, field) for every CiphertextField of every model below `base`."""
    pending, found = [base], []
    while pending:
        model = pending.pop()
        pending.extend(model.__subclasses__())
        if model._meta.table_name and model is not base:
            found.extend((model, f) for f in model._meta.sorted_fields if isinstance(f, CiphertextField))
    return found


def rotate_all(base):
    """Re-encrypt every stored ciphertext with the newest key; returns the number of values.

    Each update applies only if the value is still the one read, so a secret
    written meanwhile is never replaced by the re-encrypted older one (it was
    encrypted with the newest key anyway).
    """
    count = 0
    for model, field in ciphertext_columns(base):
        pk = model._meta.primary_key
        for row_id, value in model.select(pk, field).where(field.is_null(False)).tuples():
            count += (model.update({field: _vault().rotate(value)})
                      .where((pk == row_id) & (field == value)).execute())
    return count
