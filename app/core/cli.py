"""`flask --app app db ...` (schema migrations) and `secrets ...` (encryption keys)."""
import click
from flask import current_app
from flask.cli import AppGroup

from app.core import blobs, crypto, migrations
from app.core.db import BaseModel, db

db_cli = AppGroup("db", help="Database schema commands.")


@db_cli.command("upgrade")
def upgrade_command():
    """Apply pending schema migrations."""
    applied = migrations.upgrade(current_app.extensions["database"])
    click.echo(f"applied {len(applied)} migration(s)" + (": " + ", ".join(applied) if applied else ""))


blobs_cli = AppGroup("blobs", help="The blob store of profile states and extension archives.")


@blobs_cli.command("sweep")
def sweep_command():
    """Remove blobs no record refers to (older than BLOB_GRACE_SECONDS)."""
    with db.connection_context():
        click.echo(f"removed {blobs.sweep(BaseModel)} unreferenced blob(s)")


secrets_cli = AppGroup("secrets", help="Encryption keys of secrets stored at rest.")


@secrets_cli.command("generate-key")
def generate_key_command():
    """Print a new Fernet key (put it first in ENCRYPTION_KEYS, then run `secrets rotate`)."""
    from cryptography.fernet import Fernet

    click.echo(Fernet.generate_key().decode())


@secrets_cli.command("rotate")
def rotate_command():
    """Re-encrypt every stored secret with the newest (first) encryption key."""
    with db.connection_context(), db.atomic():
        count = crypto.rotate_all(BaseModel)
    click.echo(f"re-encrypted {count} value(s) with the newest key; older keys can now be removed")
