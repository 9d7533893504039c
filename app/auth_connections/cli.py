"""`flask --app app auth ...`: run due health checks (for installs that prefer cron to the scheduler)."""
import click
from flask import current_app
from flask.cli import AppGroup

from app.auth_connections import health

auth_cli = AppGroup("auth", help="Managed auth connections.")


@auth_cli.command("check")
def check_command():
    """Run the health checks that are due now."""
    config = current_app.config
    checked = health.run_due(timeout=config["AUTH_FLOW_HTTP_TIMEOUT_SECONDS"], limit=10000)
    click.echo(f"checked {checked} auth connection(s)")
