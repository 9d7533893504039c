"""`flask --app app auth ...`: run due health checks (for installs that prefer cron to the scheduler)."""
import click
from flask.cli import AppGroup

from app.auth_connections import health
from app.core.settings import settings

auth_cli = AppGroup("auth", help="Managed auth connections.")


@auth_cli.command("check")
def check_command():
    """Run the health checks that are due now."""
    config = settings()
    checked = health.run_due(timeout=config.auth_flow_http_timeout_seconds, limit=10000)
    click.echo(f"checked {checked} auth connection(s)")
