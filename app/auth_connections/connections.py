"""Auth connections: create (the profile too), update, delete (cancels a flow), the record,
listing and the timeline."""
import json
from datetime import timedelta

from peewee import SQL, Value, fn

from app.auth_connections import loginflow
from app.auth_connections.models import AuthConnection, HealthCheck, LoginFlow
from app.core import clock
from app.core.compiled import CompiledQuery
from app.core.db import save_or_conflict
from app.core.errors import ApiError, bad_request, conflict, not_found
from app.core.settings import settings
from app.core.text import host_of
from app.credentials.models import Credential, CredentialProvider
from app.orgs.models import Project
from app.orgs.usage import usage_counter
from app.profiles.models import Profile

SETTINGS = ("auto_reauth", "health_checks", "record_session", "save_credentials")


def pair_taken(profile_name, domain):
    return conflict("auth_connection_exists", f"Profile {profile_name!r} already has a connection for {domain!r}.")


def default_interval():
    return max(3600, settings().min_health_check_interval_seconds)


def create(project, args):
    domain = host_of(args["domain"])
    if not domain:
        raise bad_request(f"{args['domain']!r} names no host.", field="domain")
    check_credential(project, args.get("credential"))
    profile = profile_named(project, args["profile_name"])
    if profile is None:
        try:
            profile = Profile.create_in(project, args["profile_name"])
        except ApiError as error:
            # Created meanwhile by a concurrent request (for another domain): use it.
            profile = profile_named(project, args["profile_name"]) if error.code == "profile_name_taken" else None
            if profile is None:
                raise
    if AuthConnection.select().where((AuthConnection.profile == profile.id)
                                       & (AuthConnection.domain == domain)).exists():
        raise pair_taken(args["profile_name"], domain)
    connection = AuthConnection(project=project.id, profile=profile, domain=domain,
                                health_check_interval=args.get("health_check_interval") or default_interval())
    apply(connection, args)
    save_or_conflict(connection, pair_taken(args["profile_name"], domain), force_insert=True)
    return connection


def profile_named(project, name):
    return Profile.get_or_none((Profile.project == project.id) & (Profile.name == name))


def apply(connection, args):
    """Copy the settings present in a create or update body onto the connection (not saved)."""
    for key in SETTINGS:
        if key in args:
            setattr(connection, key, args[key])
    if "health_check_interval" in args:
        connection.health_check_interval = args["health_check_interval"]
    if "allowed_domains" in args:
        normalized = [host_of(d.removeprefix("*.")) for d in args["allowed_domains"]]
        connection.allowed_domains = json.dumps(sorted(set(filter(None, normalized))))
    if "login_url" in args:
        connection.login_url = args["login_url"] or None
    if "credential" in args:
        connection.credential = json.dumps(args["credential"]) if args["credential"] else None
    browser = connection.browser_config
    browser.update(args.get("browser") or {})
    for legacy, key in (("proxy", "proxy"), ("browser_telemetry", "telemetry")):
        if args.get(legacy) is not None:
            browser[key] = args[legacy]
    connection.browser = json.dumps(browser)
    if not connection.health_checks:
        connection.next_check_at = None
    elif connection.last_auth_at is not None:
        connection.next_check_at = (connection.last_auth_check_at or clock.now()) + timedelta(
            seconds=connection.health_check_interval)
    connection.updated_at = clock.now()


def check_credential(project, ref):
    """A named credential or provider must exist (404 otherwise); a path is looked up at login."""
    if not ref:
        return
    if ref.get("name"):
        named = Credential.select().where((Credential.project == project.id) & (Credential.name == ref["name"]))
        if not named.exists():
            raise not_found(f"No credential named {ref['name']!r} in this project.", code="credential_not_found")
        return
    exists = CredentialProvider.select().where(
        (CredentialProvider.org == project.org_id)
        & ((CredentialProvider.id == ref["provider"]) | (CredentialProvider.name == ref["provider"]))).exists()
    if not exists:
        raise not_found(f"No credential provider {ref['provider']!r}.", code="credential_provider_not_found")


def update(connection, project, args):
    check_credential(project, args.get("credential"))
    apply(connection, args)
    connection.save()
    return AuthConnection.lookup(project, connection.id)


def delete(connection):
    """Delete the connection; a flow in progress ends CANCELED first (its followers see it)."""
    loginflow.cancel(connection)
    connection.delete_instance()


def listing(project, *, domain=None, profile_name=None, query=None):
    rows = (AuthConnection.select(AuthConnection, Profile).join(Profile).switch(AuthConnection)
            .where(AuthConnection.project == project))
    if domain:
        rows = rows.where(AuthConnection.domain == host_of(domain))
    if profile_name:
        rows = rows.where(Profile.name == profile_name)
    if query:
        rows = rows.where((AuthConnection.id == query) | AuthConnection.domain.contains(query)
                          | Profile.name.contains(query))
    return rows.order_by(AuthConnection.created_at, AuthConnection.id)


def record(connection):
    """The ManagedAuth record: settings, status, and the newest flow's state."""
    flow = connection.current_flow()
    # Read after the flow: a flow's end and the connection's new status commit together, so
    # the connection read now is at least as new as the flow (never SUCCESS with NEEDS_AUTH).
    connection = (AuthConnection.select(AuthConnection, Profile).join(Profile).switch(AuthConnection)
                  .where(AuthConnection.id == connection.id).get())
    credential = connection.credential_ref
    out = {
        "id": connection.id, "domain": connection.domain, "profile_name": connection.profile.name,
        "record_session": connection.record_session, "save_credentials": connection.save_credentials,
        "status": connection.status, "allowed_domains": connection.allowed_domain_list,
        "auto_reauth": connection.auto_reauth, "health_checks": connection.health_checks,
        "health_check_interval": connection.health_check_interval, "browser": connection.browser_config,
        "can_reauth": bool(credential),
        "can_reauth_reason": ("external_credential" if credential and credential.get("provider")
                              else "has_credential" if credential else "no_credential"),
    }
    if credential:
        out["credential"] = credential
    for key in ("login_url", "post_login_url"):
        if getattr(connection, key):
            out[key] = getattr(connection, key)
    for key in ("last_auth_at", "last_auth_check_at"):
        if getattr(connection, key):
            out[key] = clock.isoformat(getattr(connection, key))
    if flow is not None:
        if flow.is_overdue:
            flow = loginflow.expire(flow)
        state = loginflow.state_event(flow)
        state.pop("event"), state.pop("timestamp")
        out.update(state, flow_expires_at=clock.isoformat(flow.expires_at))
    return out


def timeline(connection, *, kind=None):
    """Login, re-auth and health-check entries of the connection, newest first (a query to page)."""
    flows = (LoginFlow.select(LoginFlow.id, fn.LOWER(LoginFlow.flow_type).alias("kind"),
                              LoginFlow.started_at.alias("at"))
             .where(LoginFlow.connection == connection.id))
    checks = (HealthCheck.select(HealthCheck.id, Value("health_check").alias("kind"),
                                 HealthCheck.checked_at.alias("at"))
              .where(HealthCheck.connection == connection.id))
    if kind == "health_check":
        query = checks
    elif kind:
        query = flows.where(LoginFlow.flow_type == kind.upper())
    else:
        query = flows.union_all(checks)
    return query.order_by(SQL("at").desc(), SQL("id").desc())


def timeline_entries(rows):
    """The timeline records of a page of (id, kind) rows."""
    ids = [row.id for row in rows]
    flows = {f.id: f for f in LoginFlow.select().where(LoginFlow.id.in_(ids))}
    checks = {c.id: c for c in HealthCheck.select().where(HealthCheck.id.in_(ids))}
    entries = []
    for row in rows:
        if row.id in flows:
            flow = flows[row.id]
            entry = {"id": flow.id, "type": flow.flow_type.lower(), "status": flow.status,
                     "step": "EXPIRED" if flow.status == "EXPIRED" else flow.step,
                     "timestamp": clock.isoformat(flow.started_at), "updated_at": clock.isoformat(flow.updated_at)}
            if flow.completed_at:
                entry["completed_at"] = clock.isoformat(flow.completed_at)
            for key in ("error_code", "error_message", "website_error"):
                if getattr(flow, key):
                    entry[key] = getattr(flow, key)
        else:
            check = checks[row.id]
            entry = {"id": check.id, "type": "health_check", "status": check.status,
                     "previous_status": check.previous_status, "timestamp": clock.isoformat(check.checked_at)}
            for key in ("error_code", "error_message"):
                if getattr(check, key):
                    entry[key] = getattr(check, key)
        entries.append(entry)
    return entries


@usage_counter("auth_connections_used")
def org_connections(org):
    return _connections_in_org.scalar(org.id)


_connections_in_org = CompiledQuery(lambda org_id: AuthConnection.select(fn.COUNT(AuthConnection.id))
                                    .join(Project).where(Project.org == org_id))

