"""Browser profiles (/profiles)."""
import json

from flask import Response, g
from flask.views import MethodView

from app.core.api import Blueprint
from app.core.paging import PAGE_HEADERS, page
from app.profiles import schemas
from app.profiles.models import Profile

blp = Blueprint("profiles", __name__, url_prefix="/profiles",
                description="Browser profiles: stored cookies and local storage, addressed by id or name.")


@blp.route("")
class Profiles(MethodView):
    @blp.arguments(schemas.ProfileListArgsSchema, location="query")
    @blp.response(200, schemas.ProfileSchema(many=True), headers=PAGE_HEADERS)
    def get(self, args):
        """List profiles of the project"""
        return page(Profile.listing(g.project.id, name=args.get("name"), query=args.get("query")), args)

    @blp.arguments(schemas.ProfileCreateSchema, required=False)
    @blp.response(201, schemas.ProfileSchema)
    def post(self, args):
        """Create a profile (the name is optional and unique in the project)"""
        return Profile.create_in(g.project, args.get("name"))


@blp.route("/<profile_ref>")
class ProfileByRef(MethodView):
    @blp.response(200, schemas.ProfileSchema)
    def get(self, profile_ref):
        """Get a profile by id or name"""
        return Profile.lookup(g.project, profile_ref)

    @blp.arguments(schemas.ProfileUpdateSchema)
    @blp.response(200, schemas.ProfileSchema)
    def patch(self, args, profile_ref):
        """Rename a profile"""
        profile = Profile.lookup(g.project, profile_ref)
        profile.rename(args["name"])
        return profile

    @blp.response(204)
    def delete(self, profile_ref):
        """Delete a profile and its stored state"""
        Profile.lookup(g.project, profile_ref).delete_with_state()


@blp.route("/<profile_ref>/download")
class ProfileDownload(MethodView):
    @blp.arguments(schemas.ProfileDownloadArgsSchema, location="query")
    @blp.response(200, {"type": "object"}, content_type="application/json",
                  description='The storage state: {"cookies": [...], "origins": [...]}')
    def get(self, args, profile_ref):
        """Download a profile's stored state (JSON storage state)"""
        profile = Profile.lookup(g.project, profile_ref)
        filename = f"{profile.name or profile.id}.json"
        return Response(json.dumps(profile.state()), mimetype="application/json",
                        headers={"Content-Disposition": f'attachment; filename="{filename}"'})
