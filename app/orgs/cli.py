"""`flask --app app orgs ...`: create organizations and set their limits."""
import click
from flask.cli import AppGroup

from app.core.db import db
from app.core.errors import ApiError
from app.orgs.models import Organization
from app.orgs.onboarding import create_organization

orgs_cli = AppGroup("orgs", help="Organization administration.")


def print_new_org(key):
    org = key.org
    click.echo(f"organization: {org.name} ({org.id})")
    click.echo(f"owner:        {key.created_by.email}")
    click.echo(f"default project id: {org.default_project_id}")
    click.echo("API key (shown once, store it now):")
    click.echo(key.plaintext)


def find_org(ref):
    orgs = list(Organization.select().where((Organization.id == ref) | (Organization.name == ref))
                if ref else Organization.select().limit(2))
    if len(orgs) != 1:
        raise click.UsageError(f"no organization {ref!r}" if ref else "several organizations exist: pass --org")
    return orgs[0]


@orgs_cli.command("create")
@click.option("--name", required=True, help="Organization name.")
@click.option("--owner-email", required=True, help="E-mail of the owner user.")
@click.option("--owner-name", default=None, help="Display name of the owner user.")
def create_command(name, owner_email, owner_name):
    """Create an organization, its default project, owner and first API key.

    The plaintext key is printed alone on the last line.
    """
    with db.connection_context():
        print_new_org(create_organization(name, owner_email, owner_name))


@orgs_cli.command("init")
@click.option("--name", default="My organization", show_default=True)
@click.option("--owner-email", default="owner@localhost", show_default=True)
def init_command(name, owner_email):
    """Create a first organization unless one exists (used by `make run`)."""
    with db.connection_context():
        if Organization.select().exists():
            click.echo("An organization exists already; its API keys are unchanged.")
            return
        print_new_org(create_organization(name, owner_email))


@orgs_cli.command("set-limit")
@click.option("--org", "org_ref", default=None, help="Organization id or name (optional with one organization).")
@click.option("--max-concurrent-sessions", type=click.IntRange(min=0), default=None,
              help="Concurrency limit: browsers running at once (0 = no limit).")
@click.option("--default-project-cap", type=click.IntRange(min=0), default=None,
              help="Default per-project max_concurrent_sessions (0 = none).")
def set_limit_command(org_ref, max_concurrent_sessions, default_project_cap):
    """Set an organization's concurrency limit and default per-project cap."""
    with db.connection_context():
        org = find_org(org_ref)
        if max_concurrent_sessions is not None:
            org.max_concurrent_sessions = max_concurrent_sessions or None
        if default_project_cap is None:
            default_project_cap = org.default_project_max_concurrent_sessions
        try:
            # Validates the default cap against the (possibly new) limit, then saves both.
            org.set_default_project_cap(default_project_cap)
        except ApiError as error:
            raise click.UsageError(error.message) from None
        click.echo(f"{org.name}: max_concurrent_sessions={org.max_concurrent_sessions} "
                   f"default_project_max_concurrent_sessions={org.default_project_max_concurrent_sessions}")
