"""Creating an organization with everything it needs to be used at once."""
import re

from app.core.db import db
from app.core.settings import settings
from app.orgs.models import ApiKey, Organization, Project, User

DEFAULT_PROJECT_NAME = "Default"
DEFAULT_OWNER_EMAIL = "owner@localhost"
# A domain of dotted labels, or one label alone (`localhost`, a LAN's name): a single-box install uses such owners.
OWNER_EMAIL = re.compile(r"[^@\s]+@(?!-)[A-Za-z0-9-]+(?<!-)(\.(?!-)[A-Za-z0-9-]+(?<!-))*")


def is_owner_email(value):
    """The one rule for an owner's e-mail, whichever command creates the organization."""
    return len(value) <= 255 and OWNER_EMAIL.fullmatch(value) is not None


def create_organization(name, owner_email, owner_name=None):
    """Organization + default project + owner + first API key, all or nothing.

    Returns the key, whose `plaintext` is available only on this object.
    """
    with db.atomic():
        config = settings()
        org = Organization.create(
            name=name, max_concurrent_sessions=config.default_org_max_concurrent_sessions,
            max_concurrent_invocations=config.default_org_max_concurrent_invocations)
        project = Project.create_in(org, DEFAULT_PROJECT_NAME)
        org.default_project_id = project.id
        org.save()
        owner = User.create(org=org, email=owner_email, name=owner_name)
        return ApiKey.issue(org=org, name=f"{owner_email} (first key)", created_by=owner)
