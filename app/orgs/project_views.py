"""Projects (/org/projects) and the deprecated /projects routes."""
from flask import g
from flask.views import MethodView

from app.core.api import Blueprint, as_dumped
from app.core.deprecation import sunset_route
from app.core.errors import project_not_found
from app.core.paging import PAGE_HEADERS, page
from app.orgs import project_schemas as schemas
from app.orgs.auth import require_org_wide_key
from app.orgs.models import Project

projects_blp = Blueprint("projects", __name__, url_prefix="/org/projects",
                         description="Projects of the organization and their limits.")
legacy_blp = Blueprint("projects_deprecated", __name__, url_prefix="/projects",
                       description="Deprecated project routes; removed at the sunset (then 410).")


def visible_project(project_ref):
    """A live project by id or name; a project-scoped key sees only its own."""
    project = Project.lookup(g.org.id, project_ref)
    if g.api_key.project_id not in (None, project.id):
        raise project_not_found(project_ref)
    return project


@projects_blp.route("")
class Projects(MethodView):
    @projects_blp.arguments(schemas.ProjectListArgsSchema, location="query")
    @projects_blp.response(200, schemas.ProjectSchema(many=True), headers=PAGE_HEADERS)
    def get(self, args):
        """List projects"""
        rows = page(Project.listing(g.org.id, project_id=g.api_key.project_id, name=args.get("name"),
                                    query=args.get("query")), args)
        return as_dumped([schemas.project_record(*row) for row in rows])

    @projects_blp.arguments(schemas.ProjectCreateSchema)
    @projects_blp.response(201, schemas.ProjectSchema)
    def post(self, args):
        """Create a project"""
        require_org_wide_key("create projects")
        return Project.create_in(g.org.id, args["name"])


@projects_blp.route("/<project_ref>")
class ProjectById(MethodView):
    @projects_blp.response(200, schemas.ProjectSchema)
    def get(self, project_ref):
        """Get a project by id or name"""
        return as_dumped(schemas.project_record_of(visible_project(project_ref)))

    @projects_blp.arguments(schemas.ProjectUpdateSchema, required=False)
    @projects_blp.response(200, schemas.ProjectSchema)
    def patch(self, args, project_ref):
        """Rename, archive or reactivate a project"""
        require_org_wide_key("change projects")
        return visible_project(project_ref).update_fields(**args)

    @projects_blp.response(204)
    def delete(self, project_ref):
        """Delete an empty project (soft delete)"""
        require_org_wide_key("delete projects")
        visible_project(project_ref).soft_delete()


@projects_blp.route("/<project_ref>/limits")
class ProjectLimits(MethodView):
    @projects_blp.response(200, schemas.ProjectLimitsSchema)
    def get(self, project_ref):
        """Get a project's concurrency caps"""
        return visible_project(project_ref)

    @projects_blp.arguments(schemas.ProjectLimitsUpdateSchema, required=False)
    @projects_blp.response(200, schemas.ProjectLimitsSchema)
    def patch(self, args, project_ref):
        """Change a project's caps: only present fields change, 0 or null removes a cap"""
        require_org_wide_key("change project limits")
        project = visible_project(project_ref)
        project.update_limits(args)
        return project


def deprecated(view):
    return legacy_blp.doc(deprecated=True)(sunset_route("projects_routes")(view))


@legacy_blp.route("")
class LegacyProjects(MethodView):
    get = deprecated(Projects.get)
    post = deprecated(Projects.post)


@legacy_blp.route("/<project_ref>/limits")
class LegacyProjectLimits(MethodView):
    get = deprecated(ProjectLimits.get)
