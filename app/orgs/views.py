"""API keys (/org/api_keys) and organization limits (/org/limits)."""
from datetime import timedelta

from flask import current_app, g
from flask.views import MethodView

from app.core import clock
from app.core.api import Blueprint
from app.core.auth import require_org_wide_key
from app.core.errors import bad_request, forbidden, not_found
from app.core.paging import PAGE_HEADERS, page
from app.orgs import schemas, usage
from app.orgs.models import ApiKey
from app.projects.models import ACTIVE, Project

api_keys_blp = Blueprint("api_keys", __name__, url_prefix="/org/api_keys",
                         description="API keys of the organization.")
org_limits_blp = Blueprint("org_limits", __name__, url_prefix="/org/limits",
                           description="The organization's concurrency limit and default per-project cap.")


def visible_key(key_id, include_deleted=False):
    """A key of the caller's organization (and project, for a scoped caller), or 404."""
    key = ApiKey.get_or_none((ApiKey.id == key_id) & (ApiKey.org == g.org.id))
    scoped_out = g.api_key.project_id is not None and key is not None and key.project_id != g.api_key.project_id
    if key is None or scoped_out or (key.deleted_at is not None and not include_deleted):
        raise not_found(f"API key {key_id!r} not found.")
    return key


def key_expiry(args):
    if args.get("days_to_expire") is not None:
        return clock.now() + timedelta(days=args["days_to_expire"])
    return args.get("expires_at")


def key_project(project_id):
    scoped_to = g.api_key.project_id
    if scoped_to is not None and project_id not in (None, scoped_to):
        raise forbidden("A project-scoped API key can create keys only for its own project.")
    project_id = project_id or scoped_to
    if project_id is None:
        return None
    project = Project.live(g.org.id).where((Project.id == project_id) & (Project.status == ACTIVE)).first()
    if project is None:
        raise bad_request(f"Project {project_id!r} not found or inactive.", field="project_id")
    return project


@api_keys_blp.route("")
class ApiKeys(MethodView):
    @api_keys_blp.arguments(schemas.ApiKeyListArgsSchema, location="query")
    @api_keys_blp.response(200, schemas.ApiKeySchema(many=True), headers=PAGE_HEADERS)
    def get(self, args):
        """List API keys"""
        status = "all" if args.pop("include_deleted", False) and args["status"] == "active" else args["status"]
        keys = ApiKey.listing(
            g.org.id, project_id=g.api_key.project_id, status=status, name=args.get("name"),
            query=args.get("query"), sort_by=args["sort_by"], sort_direction=args["sort_direction"],
        )
        return page(keys, args)

    @api_keys_blp.arguments(schemas.ApiKeyCreateSchema)
    @api_keys_blp.response(201, schemas.CreatedApiKeySchema)
    def post(self, args):
        """Create an API key; the response shows its plaintext once"""
        return ApiKey.issue(org=g.org.id, name=args["name"], created_by=g.api_key.created_by,
                            project=key_project(args.get("project_id")), expires_at=key_expiry(args),
                            not_after=g.api_key.expires_at)


@api_keys_blp.route("/<key_id>")
class ApiKeyById(MethodView):
    @api_keys_blp.arguments(schemas.ApiKeyGetArgsSchema, location="query")
    @api_keys_blp.response(200, schemas.ApiKeySchema)
    def get(self, args, key_id):
        """Get an API key (a deleted one only with include_deleted=true)"""
        return visible_key(key_id, include_deleted=args["include_deleted"])

    @api_keys_blp.arguments(schemas.ApiKeyUpdateSchema)
    @api_keys_blp.response(200, schemas.ApiKeySchema)
    def patch(self, args, key_id):
        """Rename an API key"""
        key = visible_key(key_id)
        key.rename(args["name"])
        return key

    @api_keys_blp.response(204)
    def delete(self, key_id):
        """Delete an API key (soft delete; a key cannot delete itself)"""
        visible_key(key_id).soft_delete(acting_key=g.api_key)


@api_keys_blp.route("/<key_id>/rotate")
class ApiKeyRotation(MethodView):
    @api_keys_blp.arguments(schemas.ApiKeyRotateSchema)
    @api_keys_blp.response(200, schemas.CreatedApiKeySchema)
    def post(self, args, key_id):
        """Rotate an API key: issue its successor; the old key expires after a grace period"""
        grace = args.get("expire_in_days")
        return visible_key(key_id, include_deleted=True).rotate(
            acting_key=g.api_key,
            days_to_expire=args.get("days_to_expire"),
            expire_in_days=current_app.config["API_KEY_ROTATION_GRACE_DAYS"] if grace is None else grace,
        )


def org_limits(org):
    counts = usage.usage(org)
    limit = org.max_concurrent_sessions
    return {
        "max_concurrent_sessions": limit,
        "default_project_max_concurrent_sessions": org.default_project_max_concurrent_sessions,
        "concurrent_sessions_available": None if limit is None else max(0, limit - counts["concurrent_sessions_used"]),
        "max_auth_connections": None,
        "max_vaults": None,
        "min_health_check_interval_seconds": current_app.config["MIN_HEALTH_CHECK_INTERVAL_SECONDS"],
        **counts,
    }


@org_limits_blp.route("")
class OrgLimits(MethodView):
    @org_limits_blp.response(200, schemas.OrgLimitsSchema)
    def get(self):
        """Get the organization's limits and usage"""
        return org_limits(g.org)

    @org_limits_blp.arguments(schemas.OrgLimitsUpdateSchema)
    @org_limits_blp.response(200, schemas.OrgLimitsSchema)
    def patch(self, args):
        """Update the default per-project concurrency cap"""
        require_org_wide_key("change organization limits")
        if "default_project_max_concurrent_sessions" in args:
            g.org.set_default_project_cap(args["default_project_max_concurrent_sessions"])
        return org_limits(g.org)
