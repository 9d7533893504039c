"""Projects: the unit of scoping inside an organization."""
from peewee import CharField, ForeignKeyField, IntegerField

from app.core import clock
from app.core.db import BaseModel, UtcDateTimeField, exclusive, save_or_conflict
from app.core.errors import ApiError, NO_RETRY, conflict, not_found
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
    def lookup(cls, org, id_or_name):
        """A live project by id, else by (folded) name; 404 otherwise."""
        project = (cls.live(org).where(cls.id == id_or_name).first()
                   or cls.live(org).where(cls.name_key == fold(id_or_name)).first())
        if project is None:
            raise not_found(f"Project {id_or_name!r} not found.", code="project_not_found")
        return project

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
        with exclusive(self.org):
            if status == ARCHIVED and self.status == ACTIVE:
                self._ensure_not_last_active()
                self._hand_over_default()
            if status is not None:
                self.status = status
            if name is not None:
                self.name, self.name_key = name, fold(name)
            self.updated_at = clock.now()
            save_or_conflict(self, name_taken(name))

    def soft_delete(self):
        """Delete a project that holds nothing, unless it is the last active one."""
        with exclusive(self.org):
            if self.status == ACTIVE:
                self._ensure_not_last_active()
            live = active_resources(self)
            if live:
                raise ApiError(
                    409, "project_not_empty",
                    "The project still has active resources; delete them first.",
                    details=[{"code": kind, "message": f"{count} active {kind.replace('_', ' ')}"}
                             for kind, count in sorted(live.items())],
                    headers=NO_RETRY,
                )
            self._hand_over_default()
            self.deleted_at = self.updated_at = clock.now()
            self.save()

    def update_limits(self, changes):
        """Only present fields change; 0 or None removes that cap."""
        for field in LIMIT_FIELDS:
            if field in changes:
                setattr(self, field, changes[field] or None)
        self.updated_at = clock.now()
        self.save()

    def _other_active(self):
        return (Project.live(self.org_id)
                .where((Project.status == ACTIVE) & (Project.id != self.id))
                .order_by(Project.created_at, Project.id))

    def _ensure_not_last_active(self):
        if not self._other_active().exists():
            raise conflict("last_active_project",
                           "The organization must keep at least one active project.")

    def _hand_over_default(self):
        org = Organization.get_by_id(self.org_id)
        if org.default_project_id == self.id:
            successor = self._other_active().first()
            org.default_project_id = successor.id if successor else None
            org.save()
