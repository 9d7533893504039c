"""`flask --app app orgs ...`: create organizations, issue keys, set limits."""
import click
from flask.cli import AppGroup

from app.core.db import db
from app.core.errors import ApiError
from app.orgs.models import ApiKey, Organization, User
from app.orgs.onboarding import DEFAULT_OWNER_EMAIL, create_organization, is_owner_email

orgs_cli = AppGroup("orgs", help="Organization administration.")


def print_new_org(key):
    org = key.org
    click.echo(f"organization: {org.name} ({org.id})")
    click.echo(f"owner:        {key.created_by.email}")
    click.echo(f"default project id: {org.default_project_id}")
    click.echo("API key (shown once, store it now):")
    click.echo(key.plaintext)


def find_org(ref):
    orgs = list(Organization.select().where((Organization.id == ref) | (Organization.name == ref)).limit(2)
                if ref else Organization.select().limit(2))
    if not orgs:
        raise click.UsageError(f"no organization {ref!r}" if ref else "no organization exists yet")
    if len(orgs) > 1:
        raise click.UsageError(f"several organizations are named {ref!r}: pass the id" if ref
                               else "several organizations exist: pass --org")
    return orgs[0]


def check_text(value, what):
    if not value.strip() or len(value) > 255:
        raise click.BadParameter(f"{what} must be 1 to 255 characters")
    return value.strip()


def check_email(ctx, param, value):
    value = check_text(value, "the e-mail")
    if not is_owner_email(value):
        raise click.BadParameter(f"{value!r} is not an e-mail address (name@example.com, or name@localhost)")
    return value


@orgs_cli.command("create")
@click.option("--name", required=True, callback=lambda ctx, param, v: check_text(v, "the name"),
              help="Organization name.")
@click.option("--owner-email", required=True, callback=check_email, help="E-mail of the owner user.")
@click.option("--owner-name", default=None, help="Display name of the owner user.")
def create_command(name, owner_email, owner_name):
    """Create an organization, its default project, owner and first API key.

    The plaintext key is printed alone on the last line.
    """
    with db.connection_context():
        print_new_org(create_organization(name, owner_email, owner_name))


@orgs_cli.command("issue-key")
@click.option("--org", "org_ref", default=None, help="Organization id or name (optional with one organization).")
@click.option("--name", default="issued from the command line", show_default=True, help="Key name.")
def issue_key_command(org_ref, name):
    """Issue a new organization-wide key for the owner, e.g. when every key was lost.

    The plaintext key is printed alone on the last line.
    """
    with db.connection_context():
        org = find_org(org_ref)
        owner = User.select().where(User.org == org).order_by(User.created_at).first()
        key = ApiKey.issue(org=org, name=check_text(name, "the key name"), created_by=owner)
        click.echo(f"organization: {org.name} ({org.id})")
        click.echo("API key (shown once, store it now):")
        click.echo(key.plaintext)


@orgs_cli.command("init")
@click.option("--name", default="My organization", show_default=True)
@click.option("--owner-email", default=DEFAULT_OWNER_EMAIL, show_default=True, callback=check_email,
              help="E-mail of the owner user.")
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
@click.option("--max-concurrent-invocations", type=click.IntRange(min=0), default=None,
              help="Running invocations at once across the organization (0 = no limit).")
def set_limit_command(org_ref, max_concurrent_sessions, default_project_cap, max_concurrent_invocations):
    """Set an organization's concurrency limit and default per-project cap."""
    with db.connection_context():
        org = find_org(org_ref)
        if max_concurrent_sessions is not None:
            org.max_concurrent_sessions = max_concurrent_sessions or None
        if max_concurrent_invocations is not None:
            org.max_concurrent_invocations = max_concurrent_invocations or None
        if default_project_cap is None:
            default_project_cap = org.default_project_max_concurrent_sessions
        try:
            # Validates the default cap against the (possibly new) limit, then saves both.
            org.set_default_project_cap(default_project_cap)
        except ApiError as error:
            raise click.UsageError(error.message) from None
        click.echo(f"{org.name}: max_concurrent_sessions={org.max_concurrent_sessions} "
                   f"default_project_max_concurrent_sessions={org.default_project_max_concurrent_sessions} "
                   f"max_concurrent_invocations={org.max_concurrent_invocations}")
