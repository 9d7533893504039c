"""`flask --app app browsers ...`: browser hosts' credentials; archive pruning and ending timed-out sessions, for
cron. The browser host itself is its own program (`python -m browserhost`)."""
import click
from flask.cli import AppGroup

from app.browsers import hosts, lifecycle, replays, telemetry
from app.browsers.lost_hosts import end_sessions_of_lost_hosts
from app.core.db import db
from app.core.errors import ApiError
from app.core.settings import settings
from app.orgs.models import Organization

browsers_cli = AppGroup("browsers", help="Browser sessions and their telemetry.")


@browsers_cli.command("prune")
@click.option("--retention-seconds", type=int, default=None,
              help="Keep this much history (default: TELEMETRY_RETENTION_SECONDS).")
def prune_command(retention_seconds):
    """End timed-out sessions; delete telemetry, log lines and recordings older than the retention."""
    retention = settings().telemetry_retention_seconds if retention_seconds is None else retention_seconds
    with db.connection_context():
        for org in Organization.select(Organization.id):
            lifecycle.expire_idle(org.id)
        deleted = telemetry.prune(retention)
        recordings = replays.prune(settings().replay_retention_seconds if retention_seconds is None
                                   else retention_seconds)
    click.echo(f"deleted {deleted['TelemetryEvent']} telemetry event(s), {deleted['BrowserLogLine']} log line(s) and "
               f"{recordings} recording(s)")


hosts_cli = AppGroup("hosts", help="Browser hosts and their credentials (the hosts run `python -m browserhost`).")
browsers_cli.add_command(hosts_cli)


@hosts_cli.command("add")
@click.argument("name")
@click.option("--address", required=True, help="The http URL the app reaches the host at, as the host advertises it "
              "(--advertise), such as http://10.0.0.12:8790: its credential registers there only.")
@click.option("--replace", is_flag=True, help="Give an existing (or revoked) host a new credential and address; the "
              "old credential stops working.")
@click.option("--quiet", is_flag=True, help="Print the credential alone (for scripts such as make run).")
def hosts_add_command(name, address, replace, quiet):
    """Add a browser host and print its credential (shown once; only its hash is kept)."""
    with db.connection_context():
        try:
            credential = hosts.add(name, address, replace=replace)
        except ApiError as error:
            raise click.ClickException(error.message) from None
    if quiet:
        click.echo(credential)
        return
    click.echo(f"Browser host {name!r}: its credential, shown once (keep it as a secret of that machine):\n")
    click.echo(f"    {credential}\n")
    click.echo("Start the host with it: LANTERN_BROWSER_HOST_CREDENTIAL=<credential> LANTERN_APP_URL=<this app's URL> "
               f"python -m browserhost --bind ADDRESS:PORT --advertise {address} (docs/operations.md).")


@hosts_cli.command("list")
def hosts_list_command():
    """The browser hosts: state, address, capacity, sessions, last heartbeat."""
    timeout = settings().browser_host_timeout_seconds
    with db.connection_context():
        rows = hosts.listing(timeout)
    if not rows:
        click.echo("No browser host. Add one: flask --app app browsers hosts add NAME --address http://HOST:PORT")
    for row in rows:
        capacity = str(row["capacity"]) + ("" if row["max_browsers"] is None else f" (limit {row['max_browsers']})")
        click.echo(f"{row['name']:<24} {row['state']:<8} {row['address'] or '-':<28} capacity {capacity:<12} "
                   f"sessions {row['sessions']:<4} heartbeat {row['heartbeat_at']}"
                   + (f"  ({row['unavailable_reason']})" if row["unavailable_reason"] else ""))


class _Limit(click.ParamType):
    name = "N|none"

    def convert(self, value, param, ctx):
        if value == "none":
            return None
        if not (value.isascii() and value.isdigit()):
            self.fail(f"{value!r} is neither a whole number of browsers nor 'none'.", param, ctx)
        return int(value)


@hosts_cli.command("limit")
@click.argument("name")
@click.argument("max_browsers", metavar="N|none", type=_Limit())
def hosts_limit_command(name, max_browsers):
    """Give a host at most N browsers at once, whatever capacity it registers (0: no new session; none: what it
    registers). Its running sessions go on."""
    with db.connection_context():
        try:
            found = hosts.limit(name, max_browsers)
        except ApiError as error:
            raise click.ClickException(error.message) from None
    if not found:
        raise click.ClickException(f"No browser host named {name!r}.")
    click.echo(f"Browser host {name!r}: " + ("as many browsers as it registers." if max_browsers is None
                                             else f"at most {max_browsers} browser(s) at once."))


@hosts_cli.command("revoke")
@click.argument("name")
def hosts_revoke_command(name):
    """Refuse the host's credential from now on; its sessions end (host_lost)."""
    with db.connection_context():
        if not hosts.revoke(name):
            raise click.ClickException(f"No browser host named {name!r} with a live credential.")
    end_sessions_of_lost_hosts()
    click.echo(f"Browser host {name!r} revoked: its requests are refused and its sessions ended.")
