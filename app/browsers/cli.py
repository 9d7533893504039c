"""`flask --app app browsers ...`: the browser host; archive pruning and ending timed-out sessions, for cron."""
import errno
import os
import socket
import sys

import click
from flask import current_app
from flask.cli import AppGroup

from app.browsers import lifecycle, telemetry
from app.core.db import db
from app.orgs.models import Organization

# The host's exit status when its port is taken (make run then does not start it again).
PORT_TAKEN = 3

browsers_cli = AppGroup("browsers", help="Browser sessions and their telemetry.")


@browsers_cli.command("prune")
@click.option("--retention-seconds", type=int, default=None,
              help="Keep this much history (default: TELEMETRY_RETENTION_SECONDS).")
def prune_command(retention_seconds):
    """End timed-out sessions; delete telemetry and log lines older than the retention."""
    retention = current_app.config["TELEMETRY_RETENTION_SECONDS"] if retention_seconds is None else retention_seconds
    with db.connection_context():
        for org in Organization.select(Organization.id):
            lifecycle.expire_idle(org.id)
        deleted = telemetry.prune(retention)
    click.echo(f"deleted {deleted['TelemetryEvent']} telemetry event(s) and {deleted['BrowserLogLine']} log line(s)")


@browsers_cli.command("host")
@click.option("--bind", default="127.0.0.1:8790", show_default=True, help="Address:port of the host's control API.")
@click.option("--advertise", default=None,
              help="URL workers reach this host at (default: http://<bind>; set it when binding 0.0.0.0).")
@click.option("--name", default=None, help="The host's name (default: <machine name>:<port>); keep it across restarts.")
@click.option("--capacity", type=int, default=None,
              help="Most browsers at once (default: BROWSER_HOST_CAPACITY, else from the machine's memory).")
def host_command(bind, advertise, name, capacity):
    """Run a browser host: it starts, relays and stops the Chromium of the sessions placed on it."""
    from app.browsers.host.server import BrowserHostServer

    address, _, port = bind.rpartition(":")
    if not address or not port.isdigit():
        raise click.BadParameter("give ADDRESS:PORT, e.g. 127.0.0.1:8790", param_hint="--bind")
    config = current_app.config
    capacity = (capacity or config["BROWSER_HOST_CAPACITY"]
                or memory_capacity(config["BROWSER_HOST_MEMORY_PER_BROWSER_MB"]))
    try:
        server = BrowserHostServer(current_app._get_current_object(), name=name or f"{socket.gethostname()}:{port}",
                                   bind=(address, int(port)), advertise=advertise or f"http://{bind}",
                                   capacity=capacity)
    except ValueError as error:  # a sandbox setting that does not parse
        raise click.UsageError(str(error)) from None
    if not server.binary:
        click.echo("Chromium is missing: install Debian's chromium (apt-get install chromium); until then this host "
                   "takes no browser and creates answer 503 no_browser_host.", err=True)
    try:
        server.run()
    except OSError as error:
        if error.errno != errno.EADDRINUSE:
            raise
        click.echo(f"The browser host cannot listen on {bind}: the port is taken. Stop what uses it, or choose "
                   f"another port: make run BROWSER_HOST_PORT={int(port) + 1} (or --bind).", err=True)
        sys.exit(PORT_TAKEN)


def memory_capacity(per_browser_mb):
    """As many browsers as 80% of the machine's memory holds."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return max(1, int(total * 0.8 // (per_browser_mb * 1024 * 1024)))
