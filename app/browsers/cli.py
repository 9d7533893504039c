"""`flask --app app browsers ...`: archive pruning and ending timed-out sessions, for cron."""
import click
from flask import current_app
from flask.cli import AppGroup

from app.browsers import sessions, telemetry
from app.core.db import db
from app.orgs.models import Organization

browsers_cli = AppGroup("browsers", help="Browser sessions and their telemetry.")


@browsers_cli.command("prune")
@click.option("--retention-seconds", type=int, default=None,
              help="Keep this much history (default: TELEMETRY_RETENTION_SECONDS).")
def prune_command(retention_seconds):
    """End timed-out sessions; delete telemetry and log lines older than the retention."""
    retention = current_app.config["TELEMETRY_RETENTION_SECONDS"] if retention_seconds is None else retention_seconds
    with db.connection_context():
        for org in Organization.select(Organization.id):
            sessions.expire_idle(org.id)
        deleted = telemetry.prune(retention)
    click.echo(f"deleted {deleted['TelemetryEvent']} telemetry event(s) and {deleted['BrowserLogLine']} log line(s)")
