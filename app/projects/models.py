"""Projects: the unit of scoping inside an organization."""
from contextlib import contextmanager

from peewee import CharField, ForeignKeyField, IntegerField

from app.core import clock
from app.core.compiled import CompiledQuery
from app.core.db import BaseModel, UtcDateTimeField, exclusive, matching, save_or_conflict
from app.core.errors import conflict, project_not_found
from app.core.ids import new_id
from app.core.text import fold
from app.orgs.models import Organization
from app.projects.resources import active_resources

ACTIVE, ARCHIVED = "active", "archived"
LIMIT_FIELDS = ("max_concurrent_sessions", "max_concurrent_invocations")


def name_taken(name):
    return conflict("project_name_taken", f"A project named {name!r} already exists in this organization.")


class Project(BaseModel):
    id = CharField(primary_key=True, default=new_id)
    org = ForeignKeyField(Organization, backref="projects", on_delete="CASCADE")
    name = CharField()
    # fold(name): unique per organization among live projects (a partial unique index),
    # and what the exact-name filter compares, case- and accent-insensitively.
    name_key = CharField()
    status = CharField(default=ACTIVE)
    created_at = UtcDateTimeField(default=clock.now)
    updated_at = UtcDateTimeField(default=clock.now)
    deleted_at = UtcDateTimeField(null=True)
    # None: no project-level cap; the organization's default cap and limit apply.
    max_concurrent_sessions = IntegerField(null=True)
    max_concurrent_invocations = IntegerField(null=True)

    @classmethod
    def live(cls, org):
        return cls.select().where((cls.org == org) & cls.deleted_at.is_null())

    @classmethod
    def listing(cls, org, *, project_id=None, name=None, query=None):
        """Pages (paging.page) of the organization's live projects, oldest first: only `project_id`
        when given, `name` exactly and `query` within the name (both folded)."""
        return _listing.pages(org, project_id, None if name is None else fold(name), fold(query) if query else None)

    @classmethod
    def find(cls, org, id_or_name):
        """A live project by id, else by (folded) name; None otherwise."""
        return (matching(cls, "org", "id", null=("deleted_at",)).first(org, id_or_name)
                or matching(cls, "org", "name_key", null=("deleted_at",)).first(org, fold(id_or_name)))

    @classmethod
    def lookup(cls, org, id_or_name):
        """`find`, or 404 project_not_found."""
        project = cls.find(org, id_or_name)
        if project is None:
            raise project_not_found(id_or_name)
        return project

    @classmethod
    def active(cls, org):
        return cls.live(org).where(cls.status == ACTIVE)

    @classmethod
    def create_in(cls, org, name):
        project = cls(org=org, name=name, name_key=fold(name))
        save_or_conflict(project, name_taken(name), force_insert=True)
        return project

    @property
    def max_pooled_sessions(self):
        """Deprecated cap; never set."""
        return None

    def update_fields(self, *, name=None, status=None):
        """Rename, archive or reactivate; returns the project as saved."""
        with self._locked() as project:
            if status == ARCHIVED and project.status == ACTIVE:
                project._ensure_not_last_active()
                project._hand_over_default()
            if status is not None:
                project.status = status
            if name is not None:
                project.name, project.name_key = name, fold(name)
            project.updated_at = clock.now()
            save_or_conflict(project, name_taken(name))
        return project

    def soft_delete(self):
        """Delete a project that holds nothing, unless it is the last active one."""
        with self._locked() as project:
            if project.status == ACTIVE:
                project._ensure_not_last_active()
            live = active_resources(project)
            if live:
                raise conflict("project_not_empty", "The project still has active resources; delete them first.",
                               details=[{"code": kind, "message": f"{count} active {kind.replace('_', ' ')}"}
                                        for kind, count in sorted(live.items())])
            project._hand_over_default()
            project.deleted_at = project.updated_at = clock.now()
            project.save()

    @contextmanager
    def _locked(self):
        """This project as committed, read while holding its organization (see core.db.exclusive).

        Rules that count other projects or resources check committed state, and a
        project deleted meanwhile is 404 instead of coming back.
        """
        with exclusive(Organization(id=self.org_id)):
            current = Project.live(self.org_id).where(Project.id == self.id).first()
            if current is None:
                raise project_not_found(self.id)
            yield current

    def update_limits(self, changes):
        """Only present fields change; 0 or None removes that cap."""
        for field in LIMIT_FIELDS:
            if field in changes:
                setattr(self, field, changes[field] or None)
        self.updated_at = clock.now()
        self.save()

    def _other_active(self):
        return (Project.active(self.org_id).where(Project.id != self.id)
                .order_by(Project.created_at, Project.id))

    def _ensure_not_last_active(self):
        if not self._other_active().exists():
            raise conflict("last_active_project",
                           "The organization must keep at least one active project.")

    def _hand_over_default(self):
        successor = self._other_active().first()
        (Organization.update(default_project_id=successor.id if successor else None)
         .where((Organization.id == self.org_id) & (Organization.default_project_id == self.id))
         .execute())


def _build_listing(org_id, project_id, name_key, name_part, limit, offset):
    rows = Project.live(org_id).select(Project.id, Project.name, Project.status, Project.created_at,
                                       Project.updated_at)  # what a list item shows (paging.page)
    if project_id is not None:
        rows = rows.where(Project.id == project_id)
    if name_key is not None:
        rows = rows.where(Project.name_key == name_key)
    if name_part is not None:
        rows = rows.where(Project.name_key.contains(name_part))
    return rows.order_by(Project.created_at, Project.id).limit(limit).offset(offset)


_listing = CompiledQuery(_build_listing)
