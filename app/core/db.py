"""Peewee behind a proxy: SQLite by default, Postgres (psycopg 3, pooled) by URL; the models' base, and the
few query rules every area shares."""
import datetime as dt
import functools
from contextlib import contextmanager
from urllib.parse import urlparse

from peewee import DatabaseProxy, DateTimeField, IntegrityError, Model, SqliteDatabase
from playhouse.db_url import parse as parse_url
from playhouse.pool import PooledSqliteDatabase
from playhouse.postgres_ext import PooledPsycopg3Database

from app.core.compiled import CompiledQuery
from app.core.errors import not_found
from app.core.settings import settings

db = DatabaseProxy()

class BaseModel(Model):
    class Meta:
        database = db
        legacy_table_names = False
        # save() writes only the columns this instance changed, so a row loaded
        # earlier in a request never puts back columns another request changed since.
        only_save_dirty = True

    @classmethod
    def get_by_id(cls, pk):
        """peewee's get_by_id with its SQL built once (a compiled lookup by key): sessions' ingest,
        streams and lifecycles read rows by key again and again."""
        found = matching(cls, cls._meta.primary_key.name).first(pk)
        if found is None:
            raise cls.DoesNotExist(f"{cls.__name__} instance matching query does not exist: id={pk!r}")
        return found


class UtcDateTimeField(DateTimeField):
    """Naive UTC in the database on both backends; aware values are converted on the way in."""

    def db_value(self, value):
        if isinstance(value, dt.datetime) and value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return super().db_value(value)

    def python_value(self, value):
        # SQLite hands back the text it stored ("2026-11-25 12:00:00.123456"); fromisoformat reads
        # it several times faster than peewee's strptime formats, which handle anything else.
        if type(value) is str:
            try:
                parsed = dt.datetime.fromisoformat(value)
            except ValueError:
                return super().python_value(value)
            if parsed.tzinfo is None:
                return parsed
        return super().python_value(value)


@functools.cache
def matching(model, *equal, null=()):
    """The compiled query for rows of `model` whose `equal` fields (names) equal the values
    given to first()/all(), in that order, and whose `null` fields are NULL: a lookup by key."""
    fields = model._meta.fields

    def build(*values):
        return model.select().where(*[fields[name] == value for name, value in zip(equal, values, strict=True)],
                                    *[fields[name].is_null() for name in null])
    return CompiledQuery(build)


def by_status(rows, deleted_at, status):
    """`rows` narrowed by their soft-delete column: "active" rows (not deleted), "deleted" ones, or "all"."""
    if status == "active":
        return rows.where(deleted_at.is_null())
    if status == "deleted":
        return rows.where(deleted_at.is_null(False))
    return rows


class NamedInProject:
    """Mixed into models whose rows belong to a project and are addressed by id or name
    (`/things/{id_or_name}`); they need `project`, `name` and `created_at` fields."""

    noun = "Resource"

    @classmethod
    def lookup(cls, project, id_or_name):
        """The row with this id, else with this name, in `project`; 404 otherwise."""
        row = (matching(cls, "project", "id").first(project.id, id_or_name)
               or matching(cls, "project", "name").first(project.id, id_or_name))
        if row is None:
            raise not_found(f"{cls.noun} {id_or_name!r} not found.")
        return row

    @classmethod
    def listing(cls, project, *, name=None, query=None):
        """Rows of `project` for a list page: `name` exact, `query` a substring of the name or an exact id."""
        rows = cls.select().where(cls.project == project)
        if name is not None:
            rows = rows.where(cls.name == name)
        if query:
            rows = rows.where(cls.name.contains(query) | (cls.id == query))
        return rows.order_by(cls.created_at, cls.id)


def save_or_conflict(row, error, *, force_insert=False):
    """Save `row` in a savepoint; a unique-index violation raises `error` instead."""
    try:
        with db.atomic():
            row.save(force_insert=force_insert)
    except IntegrityError:
        raise error from None


@contextmanager
def exclusive(row):
    """A transaction that holds `row` against every other `exclusive(row)` caller.

    For check-then-write rules (the last active project, concurrency caps): Postgres
    locks the row with SELECT ... FOR UPDATE; SQLite takes the write lock at BEGIN
    (IMMEDIATE), which serializes all writers. Nested inside another transaction it
    is a savepoint and relies on the outer transaction's lock.
    """
    database = db.obj
    if isinstance(database, SqliteDatabase):
        with database.atomic("IMMEDIATE") as txn:
            yield txn
        return
    with database.atomic() as txn:
        _locking(type(row)).scalar(row.get_id())
        yield txn


@functools.cache
def _locking(model):
    """The compiled SELECT ... FOR UPDATE of a row of `model` by its key."""
    key = model._meta.primary_key
    return CompiledQuery(lambda value: model.select(key).where(key == value).for_update())


def open_database(url, *, sqlite_pragmas=None, pool_size=20, pool_timeout=10):
    """Build (not connect) the database an URL names.

    `postgresql://` and `postgres://` use psycopg 3, which cooperates with gevent
    without psycogreen; connections come from a pool so per-request connect and
    close are cheap.
    """
    scheme = urlparse(url).scheme
    if scheme == "sqlite":
        # Pooled too: closing the last connection to a WAL database checkpoints it
        # (an fsync), which per request cost more than the request itself. Pooled
        # connections skip that and the per-connection pragmas.
        path = parse_url(url)["database"]
        return PooledSqliteDatabase(path, pragmas=sqlite_pragmas or {}, autoconnect=False,
                                    max_connections=pool_size, timeout=pool_timeout, stale_timeout=300,
                                    check_same_thread=False)
    if scheme in ("postgres", "postgresql"):
        params = parse_url(url)
        database = params.pop("database")
        return PooledPsycopg3Database(
            database, max_connections=pool_size, timeout=pool_timeout,
            stale_timeout=300, autoconnect=False, **params,
        )
    raise ValueError(f"unsupported database URL scheme {scheme!r}: use sqlite:/// or postgresql://")


def init_app(app):
    database = open_database(
        settings(app).database_url,
        sqlite_pragmas=settings(app).sqlite_pragmas,
        pool_size=settings(app).db_pool_size,
        pool_timeout=settings(app).db_pool_timeout_seconds,
    )
    db.initialize(database)
    app.extensions["database"] = database

    # The hooks call the database the proxy stands for: each method looked up through the proxy
    # fails a lookup on the proxy first, which costs an AttributeError.
    @app.before_request
    def open_connection():
        db.obj.connect(reuse_if_open=True)

    @app.teardown_request
    def close_connection(exc):
        # Runs twice for streamed responses (Flask pushes the context again).
        database = db.obj
        if not database.is_closed():
            database.close()
