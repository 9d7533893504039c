"""API keys (/org/api_keys) and organization limits (/org/limits)."""
from flask import g
from flask.views import MethodView

from app.core.api import Blueprint, as_dumped
from app.core.errors import not_found
from app.core.paging import PAGE_HEADERS, page
from app.core.settings import settings
from app.orgs import schemas, usage
from app.orgs.auth import require_org_wide_key
from app.orgs.keys import issue_key
from app.orgs.models import ApiKey

api_keys_blp = Blueprint("api_keys", __name__, url_prefix="/org/api_keys",
                         description="API keys of the organization.")
org_limits_blp = Blueprint("org_limits", __name__, url_prefix="/org/limits",
                           description="The organization's concurrency limit and default per-project cap.")


def visible_key(key_id, include_deleted=False):
    """A key of the caller's organization (and project, for a scoped caller), or 404."""
    caller = g.api_key
    key = ApiKey.in_org(caller.org_id, key_id)
    scoped_out = caller.project_id is not None and key is not None and key.project_id != caller.project_id
    if key is None or scoped_out or (key.deleted_at is not None and not include_deleted):
        raise not_found(f"API key {key_id!r} not found.")
    return key


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
        return as_dumped([schemas.api_key_record(*row) for row in page(keys, args)])

    @api_keys_blp.arguments(schemas.ApiKeyCreateSchema)
    @api_keys_blp.response(201, schemas.CreatedApiKeySchema)
    def post(self, args):
        """Create an API key; the response shows its plaintext once"""
        return issue_key(g.api_key, args)


@api_keys_blp.route("/<key_id>")
class ApiKeyById(MethodView):
    @api_keys_blp.arguments(schemas.ApiKeyGetArgsSchema, location="query")
    @api_keys_blp.response(200, schemas.ApiKeySchema)
    def get(self, args, key_id):
        """Get an API key (a deleted one only with include_deleted=true)"""
        return as_dumped(schemas.api_key_record_of(visible_key(key_id, include_deleted=args["include_deleted"])))

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
    @api_keys_blp.arguments(schemas.ApiKeyRotateSchema, required=False)
    @api_keys_blp.response(200, schemas.CreatedApiKeySchema)
    def post(self, args, key_id):
        """Rotate an API key: issue its successor; the old key expires after a grace period"""
        grace = args.get("expire_in_days")
        return visible_key(key_id, include_deleted=True).rotate(
            acting_key=g.api_key,
            days_to_expire=args.get("days_to_expire"),
            expire_in_days=settings().api_key_rotation_grace_days if grace is None else grace,
        )


@org_limits_blp.route("")
class OrgLimits(MethodView):
    @org_limits_blp.response(200, schemas.OrgLimitsSchema)
    def get(self):
        """Get the organization's limits and usage"""
        return usage.limits_of(g.org)

    @org_limits_blp.arguments(schemas.OrgLimitsUpdateSchema, required=False)
    @org_limits_blp.response(200, schemas.OrgLimitsSchema)
    def patch(self, args):
        """Update the default per-project concurrency cap"""
        require_org_wide_key("change organization limits")
        if "default_project_max_concurrent_sessions" in args:
            g.org.set_default_project_cap(args["default_project_max_concurrent_sessions"])
        return usage.limits_of(g.org)
