"""Bearer API key -> organization, key, acting user and project (spec part 5).

Every request except the public OpenAPI document and docs is authenticated
before routing errors are reported, so nothing is revealed to a caller without
a live key.
"""
from flask import current_app, g, request
from peewee import JOIN, fn

from app.core.compiled import CompiledQuery
from app.core.db import matching
from app.core.errors import ApiError, bad_request, forbidden, project_not_found
from app.orgs.models import ACTIVE, ApiKey, Organization, Project, hash_key
from lantern_wire.hosts import API_PREFIX

PUBLIC_PATHS = {"/", "/favicon.ico", "/openapi.json", "/docs"}
# Routes that authorise themselves another way: the hosted login page (a flow's handoff code); the
# internal API for browser hosts (each host's own credential, app/browsers/host_api.py); and Swagger
# UI's files for /docs (app/core/docs.py), public like /docs itself.
PUBLIC_PREFIXES = ("/auth/hosted/", API_PREFIX + "/", "/docs/assets/")


def unauthorized(message):
    return ApiError(401, "unauthorized", message, headers={"WWW-Authenticate": 'Bearer realm="lantern"'})


def _key_with_home_project(key_hash):
    """The key, its organization and its home project (its own, else the org default).

    One query answers the common request, which names no project.
    """
    home = Project.alias()
    return (ApiKey.select(ApiKey, Organization, home)
            .join(Organization)
            .switch(ApiKey)
            .join(home, JOIN.LEFT_OUTER, attr="home_project",
                  on=(home.id == fn.COALESCE(ApiKey.project, Organization.default_project_id))
                  & home.deleted_at.is_null())
            .where(ApiKey.key_hash == key_hash))


key_with_home_project = CompiledQuery(_key_with_home_project)


def init_app(app):
    app.before_request(authenticate)


def authenticate():
    current = request._get_current_object()  # one lookup of the request for every read below
    path, headers = current.path, current.headers
    if path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES):
        return
    authorization = headers.get("Authorization")
    if authorization is None and "token" in current.args and _takes_tokens():
        return  # the view checks the token (a browser's CDP URL: clients that cannot set headers)
    scheme, _, token = (authorization or "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise unauthorized("Missing or malformed Authorization header; expected 'Bearer <api key>'.")
    key = key_with_home_project.first(hash_key(token))
    # A key scoped to an archived or deleted project is as unusable as a deleted key, and
    # answers the same: a 404 naming the project would tell the caller the key is real.
    if key is None or key.deleted_at is not None or (key.project_id is not None and not _live(key.home_project)):
        raise unauthorized("Invalid API key.")
    if key.is_expired:
        raise unauthorized("This API key has expired.")
    context = g._get_current_object()  # one lookup of the request's globals for the three set here
    context.api_key, context.org = key, key.org
    context.project = resolve_project(key, headers)


def takes_tokens(view):
    """Mark a view that authorises a request by its own `?token=` when no key is given."""
    view.takes_tokens = True
    return view


def _takes_tokens():
    view = current_app.view_functions.get(request.endpoint)
    return getattr(view, "takes_tokens", False)


def _live(project):
    return project is not None and project.id is not None and project.status == ACTIVE


def resolve_project(key, headers):
    """The project a request acts in: headers, else the key's project, else the org default."""
    by_id = headers.get("X-Kernel-Project-Id")
    by_ref = headers.get("X-Kernel-Project")
    named = []
    if by_id:
        named.append(matching(Project, "org", "id", null=("deleted_at",)).first(key.org_id, by_id))
    if by_ref:
        named.append(Project.find(key.org_id, by_ref))
    if any(p is None or p.status != ACTIVE for p in named):
        raise project_not_found()
    if len(named) == 2 and named[0].id != named[1].id:
        raise bad_request("X-Kernel-Project-Id and X-Kernel-Project name different projects.")
    project = named[0] if named else None
    if key.project_id is not None and project is not None and project.id != key.project_id:
        raise forbidden("This API key is scoped to another project.")
    project = project or key.home_project
    if not _live(project):
        raise project_not_found()
    return project


def require_org_wide_key(action):
    """Project administration is for organization-wide keys only."""
    if g.api_key.project_id is not None:
        raise forbidden(f"A project-scoped API key cannot {action}.")
