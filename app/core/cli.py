"""`flask --app app db ...`: schema migrations."""
import click
from flask import current_app
from flask.cli import AppGroup

from app.core import migrations

db_cli = AppGroup("db", help="Database schema commands.")


@db_cli.command("upgrade")
def upgrade_command():
    """Apply pending schema migrations."""
    applied = migrations.upgrade(current_app.extensions["database"])
    click.echo(f"applied {len(applied)} migration(s)" + (": " + ", ".join(applied) if applied else ""))
