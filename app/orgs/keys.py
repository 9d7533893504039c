"""Issuing API keys through the API: scope and expiry rules of the calling key."""
from datetime import timedelta

from app.core import clock
from app.core.db import exclusive
from app.core.errors import bad_request, forbidden
from app.orgs.models import ApiKey, Organization, Project


def issue_key(acting_key, fields):
    """A new key for the caller's organization from validated create fields.

    A project-scoped caller issues keys only in its own project; no caller issues a
    key that outlives itself. The project is checked while holding the organization,
    so a concurrent project delete cannot leave a live key in a deleted project.
    """
    project_id = fields.get("project_id")
    if acting_key.project_id is not None and project_id not in (None, acting_key.project_id):
        raise forbidden("A project-scoped API key can create keys only for its own project.")
    project_id = project_id or acting_key.project_id
    expires_at = fields.get("expires_at")
    if fields.get("days_to_expire") is not None:
        expires_at = clock.now() + timedelta(days=fields["days_to_expire"])
    with exclusive(Organization(id=acting_key.org_id)):
        if project_id is not None and not Project.active(acting_key.org_id).where(Project.id == project_id).exists():
            raise bad_request(f"Project {project_id!r} not found or inactive.", field="project_id")
        return ApiKey.issue(org=acting_key.org_id, name=fields["name"], created_by=acting_key.created_by_id,
                            project=project_id, expires_at=expires_at, not_after=acting_key.expires_at)
