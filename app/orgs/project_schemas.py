"""Request and response shapes of projects and project limits (contract 6.2)."""
import marshmallow as ma
from marshmallow import validate

from app.core import clock
from app.core.fields import Choice, JsonInteger, PathName, UtcDateTime
from app.core.paging import PageArgsSchema
from app.orgs.models import ACTIVE, ARCHIVED


class ProjectName(PathName):
    """Project names also refuse "%" (contract 6.2)."""

    forbidden = "/%"


class ProjectSchema(ma.Schema):
    id = ma.fields.String()
    name = ma.fields.String()
    status = ma.fields.String(metadata={"enum": [ACTIVE, ARCHIVED]})
    created_at = UtcDateTime()
    updated_at = UtcDateTime()


def project_record(project_id, name, status, created_at, updated_at):
    """ProjectSchema's dump of a project, from its values (a row of the project list's query, or a project): the
    hot reads skip marshmallow (tests/core/test_records.py holds them equal)."""
    return {"id": project_id, "name": name, "status": status, "created_at": clock.isoformat(created_at),
            "updated_at": clock.isoformat(updated_at)}


def project_record_of(project):
    return project_record(project.id, project.name, project.status, project.created_at, project.updated_at)


class ProjectCreateSchema(ma.Schema):
    name = ProjectName(required=True)


class ProjectUpdateSchema(ma.Schema):
    name = ProjectName()
    status = Choice([ACTIVE, ARCHIVED])


class ProjectListArgsSchema(PageArgsSchema):
    name = ma.fields.String(metadata={"description": "exact name, case- and accent-insensitive"})
    query = ma.fields.String(metadata={"description": "case-insensitive substring of the name"})


class ProjectLimitsSchema(ma.Schema):
    max_concurrent_sessions = ma.fields.Integer(allow_none=True)
    max_concurrent_invocations = ma.fields.Integer(allow_none=True)
    max_pooled_sessions = ma.fields.Integer(allow_none=True, metadata={"description": "deprecated; always null"})


def must_be_null(value):
    if value is not None:
        raise ma.ValidationError("max_pooled_sessions is deprecated and can no longer be set.")


MAX_CAP = 1_000_000


class ProjectLimitsUpdateSchema(ma.Schema):
    max_concurrent_sessions = JsonInteger(allow_none=True, validate=validate.Range(0, MAX_CAP),
                                          metadata={"description": "0 or null removes the cap"})
    max_concurrent_invocations = JsonInteger(allow_none=True, validate=validate.Range(0, MAX_CAP),
                                             metadata={"description": "0 or null removes the cap"})
    max_pooled_sessions = JsonInteger(allow_none=True, validate=must_be_null,
                                      metadata={"description": "deprecated: any value but null is refused",
                                                "enum": [None]})
