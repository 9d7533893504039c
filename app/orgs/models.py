"""An organization, its users and API keys, and its projects: one aggregate (a key belongs to the organization
and may be scoped to one of its projects; a project lives in one organization)."""
import hashlib
import secrets
import string
from contextlib import contextmanager
from datetime import timedelta

from peewee import JOIN, CharField, DeferredForeignKey, ForeignKeyField, IntegerField

from app.core import clock
from app.core.compiled import CompiledQuery
from app.core.db import BaseModel, UtcDateTimeField, by_status, exclusive, matching, save_or_conflict
from app.core.errors import bad_request, conflict, project_not_found
from app.core.ids import new_id
from app.core.text import fold
from app.orgs.resources import active_resource_counter, active_resources

KEY_PREFIX = "sk_"
# Letters and digits only, so a key never starts with "-" or breaks a shell word.
KEY_ALPHABET = string.ascii_letters + string.digits
KEY_LENGTH = 43  # about 256 bits


def hash_key(plaintext):
    """Keys carry about 256 random bits, so a plain SHA-256 is enough to store them."""
    return hashlib.sha256(plaintext.encode()).hexdigest()


class Organization(BaseModel):
    id = CharField(primary_key=True, default=new_id)
    name = CharField()
    # The concurrency limit: browsers running at once across sessions and pool reservations.
    max_concurrent_sessions = IntegerField(null=True)
    # Running invocations at once across all projects (None: only project caps).
    max_concurrent_invocations = IntegerField(null=True)
    # Cap for projects without their own max_concurrent_sessions.
    default_project_max_concurrent_sessions = IntegerField(null=True)
    # Not a foreign key: projects reference the organization, and the default moves
    # to another active project when this one is deleted or archived.
    default_project_id = CharField(null=True)
    created_at = UtcDateTimeField(default=clock.now)

    def set_default_project_cap(self, value):
        """0 or None removes the default; it may not exceed the organization's limit."""
        value = value or None
        if value is not None and self.max_concurrent_sessions is not None and value > self.max_concurrent_sessions:
            raise bad_request(
                f"default_project_max_concurrent_sessions ({value}) may not exceed the organization's "
                f"concurrency limit ({self.max_concurrent_sessions}).",
                field="default_project_max_concurrent_sessions",
            )
        self.default_project_max_concurrent_sessions = value
        self.save()


class User(BaseModel):
    id = CharField(primary_key=True, default=new_id)
    org = ForeignKeyField(Organization, backref="users", on_delete="CASCADE")
    email = CharField()
    name = CharField(null=True)
    created_at = UtcDateTimeField(default=clock.now)


class ApiKey(BaseModel):
    """A bearer credential. Only its SHA-256 and a masked form are stored."""

    id = CharField(primary_key=True, default=new_id)
    org = ForeignKeyField(Organization, backref="api_keys", on_delete="CASCADE")
    # None: an organization-wide key. Otherwise the key can act only in this project.
    project = DeferredForeignKey("Project", null=True, backref="api_keys")
    name = CharField()
    name_key = CharField()
    key_hash = CharField(unique=True)
    masked_key = CharField()
    created_by = ForeignKeyField(User, backref="api_keys")
    created_at = UtcDateTimeField(default=clock.now)
    expires_at = UtcDateTimeField(null=True)
    deleted_at = UtcDateTimeField(null=True)
    # The lifetime the key was issued with, reused by rotation when none is given.
    lifetime_seconds = IntegerField(null=True)

    @classmethod
    def issue(cls, *, org, name, created_by, project=None, expires_at=None, not_after=None):
        """Create a key; returns it with its plaintext, which is never stored.

        `not_after` caps the expiry, so a key cannot mint one that outlives its own authority.
        """
        if not_after is not None and (expires_at is None or expires_at > not_after):
            raise bad_request(f"The new key may not expire after {clock.isoformat(not_after)}, "
                              "when the key that issues it expires.", field="expires_at")
        plaintext = KEY_PREFIX + "".join(secrets.choice(KEY_ALPHABET) for _ in range(KEY_LENGTH))
        now = clock.now()
        key = cls.create(
            org=org, project=project, name=name, name_key=fold(name),
            key_hash=hash_key(plaintext), masked_key=f"{KEY_PREFIX}...{plaintext[-4:]}",
            created_by=created_by, created_at=now, expires_at=expires_at,
            lifetime_seconds=int((expires_at - now).total_seconds()) if expires_at else None,
        )
        key.plaintext = plaintext
        return key

    @classmethod
    def in_org(cls, org_id, key_id):
        """The key `key_id` of the organization with its creator and project, in one query built once; or None."""
        return _key_in_org.first(key_id, org_id)

    @classmethod
    def listing(cls, org, *, project_id=None, status="active", name=None, query=None,
                sort_by="created_at", sort_direction="desc"):
        """Pages (paging.page) of the keys of `org` (only `project_id`'s when given), filtered and ordered."""
        return _key_listing.pages(org, project_id, None if name is None else fold(name), query or None,
                              status=status, sort_by=sort_by, sort_direction=sort_direction)

    @property
    def is_expired(self):
        return self.expires_at is not None and self.expires_at <= clock.now()

    @property
    def project_name(self):
        return self.project.name if self.project_id is not None else None

    def rename(self, name):
        self.name, self.name_key = name, fold(name)
        self.save()

    def rotate(self, *, acting_key, days_to_expire=None, expire_in_days):
        """Issue the successor (same name and project); this key expires after the grace period.

        `days_to_expire` None reuses this key's original lifetime (or none). A key
        rotating itself may renew that lifetime but not lengthen it; a key rotating
        another may not mint a successor that outlives itself (as with create).
        """
        if self.deleted_at is not None:
            raise conflict("api_key_deleted", "A deleted API key cannot be rotated.")
        if self.is_expired:
            raise conflict("api_key_expired", "An expired API key cannot be rotated.")
        if self.id == acting_key.id and expire_in_days == 0:
            # It would cut off the very key making the call, which a key may not delete either.
            raise conflict("cannot_expire_current_key",
                           "An API key cannot rotate itself with expire_in_days 0; give it a grace "
                           "period or use another key.")
        now = clock.now()
        if days_to_expire is not None:
            expires_at = now + timedelta(days=days_to_expire)
        elif self.lifetime_seconds is not None:
            expires_at = now + timedelta(seconds=self.lifetime_seconds)
        else:
            expires_at = None
        if acting_key.id != self.id:
            not_after = acting_key.expires_at
        elif self.lifetime_seconds is not None:
            not_after = now + timedelta(seconds=self.lifetime_seconds)
        else:
            not_after = None
        grace_ends = now + timedelta(days=expire_in_days)
        successor = ApiKey.issue(
            org=self.org_id, name=self.name, created_by=acting_key.created_by_id,
            project=self.project_id, expires_at=expires_at, not_after=not_after,
        )
        if self.expires_at is None or grace_ends < self.expires_at:
            self.expires_at = grace_ends
            self.save()
        return successor

    def soft_delete(self, *, acting_key):
        if self.id == acting_key.id:
            raise conflict("cannot_delete_current_key",
                           "An API key cannot delete itself; use another key.")
        self.deleted_at = clock.now()
        self.save()


@active_resource_counter("api_keys")
def live_project_keys(project):
    now = clock.now()
    return (ApiKey.select()
            .where((ApiKey.project == project.id) & ApiKey.deleted_at.is_null()
                   & (ApiKey.expires_at.is_null() | (ApiKey.expires_at > now)))
            .count())


def _build_key_in_org(key_id, org_id):
    # The whole key; of its creator and project, what its record shows (paging.page says why).
    return (ApiKey.select(ApiKey, User.id, User.email, User.name, Project.id, Project.name)
            .join(User, on=(ApiKey.created_by == User.id))
            .switch(ApiKey).join(Project, JOIN.LEFT_OUTER, on=(ApiKey.project == Project.id))
            .where((ApiKey.id == key_id) & (ApiKey.org == org_id)))


_key_in_org = CompiledQuery(_build_key_in_org)


def _build_key_listing(org_id, project_id, name_key, query, limit, offset, *, status, sort_by, sort_direction):
    # What a list item shows (paging.page): the key, its creator and its project's name.
    # In the order of schemas.api_key_record's arguments: the rows are its arguments.
    keys = (ApiKey.select(ApiKey.id, ApiKey.name, ApiKey.masked_key, ApiKey.created_at, User.id, User.email,
                          User.name, ApiKey.expires_at, ApiKey.deleted_at, ApiKey.project, Project.name)
            .join(User, on=(ApiKey.created_by == User.id))
            .switch(ApiKey).join(Project, JOIN.LEFT_OUTER, on=(ApiKey.project == Project.id))
            .where(ApiKey.org == org_id))
    if project_id is not None:
        keys = keys.where(ApiKey.project == project_id)
    keys = by_status(keys, ApiKey.deleted_at, status)
    if name_key is not None:
        keys = keys.where(ApiKey.name_key == name_key)
    if query is not None:
        folded = fold(query)
        keys = keys.where(
            ApiKey.name_key.contains(folded) | User.email.contains(query) | User.name.contains(query)
            | Project.name_key.contains(folded) | (ApiKey.id == query) | ApiKey.masked_key.startswith(query)
        )
    # Names sort as people read them: case and accents do not reorder.
    column = ApiKey.name_key if sort_by == "name" else getattr(ApiKey, sort_by)
    order = column.asc(nulls="LAST") if sort_direction == "asc" else column.desc(nulls="LAST")
    return keys.order_by(order, ApiKey.id).limit(limit).offset(offset).tuples()


_key_listing = CompiledQuery(_build_key_listing)


# -- projects: the unit of scoping inside an organization

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
        return _project_listing.pages(org, project_id, None if name is None else fold(name),
                                      fold(query) if query else None)

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


def _build_project_listing(org_id, project_id, name_key, name_part, limit, offset):
    # What a list item shows (paging.page), in the order of project_schemas.project_record's arguments.
    rows = Project.live(org_id).select(Project.id, Project.name, Project.status, Project.created_at,
                                       Project.updated_at)
    if project_id is not None:
        rows = rows.where(Project.id == project_id)
    if name_key is not None:
        rows = rows.where(Project.name_key == name_key)
    if name_part is not None:
        rows = rows.where(Project.name_key.contains(name_part))
    return rows.order_by(Project.created_at, Project.id).limit(limit).offset(offset).tuples()


_project_listing = CompiledQuery(_build_project_listing)
