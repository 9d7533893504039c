"""Opaque random identifiers: nothing in a URL reveals order or count."""
import base64
import secrets


def new_id():
    """24 lowercase base32 characters (120 random bits)."""
    return base64.b32encode(secrets.token_bytes(15)).decode().lower()
