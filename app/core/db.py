"""Peewee behind a proxy: SQLite by default, Postgres (psycopg 3, pooled) by URL."""
import datetime as dt
import weakref
from contextlib import contextmanager
from urllib.parse import urlparse

from peewee import DatabaseProxy, DateTimeField, IntegrityError, Model, SqliteDatabase
from playhouse.db_url import parse as parse_url
from playhouse.pool import PooledSqliteDatabase
from playhouse.postgres_ext import PooledPsycopg3Database

from app.core.errors import not_found

db = DatabaseProxy()


class BaseModel(Model):
    class Meta:
        database = db
        legacy_table_names = False
        # save() writes only the columns this instance changed, so a row loaded
        # earlier in a request never puts back columns another request changed since.
        only_save_dirty = True


class UtcDateTimeField(DateTimeField):
    """Naive UTC in the database on both backends; aware values are converted on the way in."""

    def db_value(self, value):
        if isinstance(value, dt.datetime) and value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return super().db_value(value)


class CompiledQuery:
    """A query whose SQL text is built once per database; only its parameters change.

    Peewee rebuilds the SQL of a query on every execution, which for the
    per-request authentication join costs more than running it. `build(*params)`
    must return a query whose parameters are exactly `params`, in order; the
    template query's cursor wrapper then builds the same model graph as
    executing the query itself would. That wrapper's set-up (which column
    goes to which model of the join), as costly again, depends only on the
    query, so it is worked out once too and given to each later wrapper.
    """

    # What a cursor wrapper holds for one execution; the rest of its state is the set-up.
    PER_EXECUTION = frozenset({"cursor", "count", "index", "initialized", "populated", "row_cache"})

    def __init__(self, build):
        self._build = build
        self._compiled = weakref.WeakKeyDictionary()
        self._setups = weakref.WeakKeyDictionary()

    def first(self, *params):
        """The first row (a model instance with its joins), or None."""
        rows = self._rows(params)
        row = next(iter(rows), None)
        self._keep_setup(rows)
        return row

    def all(self, *params):
        """Every row, as model instances with their joins."""
        rows = self._rows(params)
        found = list(rows)
        self._keep_setup(rows)
        return found

    def scalar(self, *params):
        """The first column of the first row (a count), or None."""
        database, _, sql = self._compile(params)
        row = database.execute_sql(sql, params).fetchone()
        return row[0] if row else None

    def _compile(self, params):
        database = db.obj
        if database not in self._compiled:
            query = self._build(*params)
            sql, compiled_params = query.sql()
            if list(compiled_params) != list(params):
                raise ValueError(f"query parameters {compiled_params!r} are not {params!r}")
            self._compiled[database] = (query, sql)
        return (database, *self._compiled[database])

    def _rows(self, params):
        database, query, sql = self._compile(params)
        rows = query._get_cursor_wrapper(database.execute_sql(sql, params))
        setup = self._setups.get(database)
        if setup is not None:
            rows.__dict__.update(setup)
            rows.initialized = True
        return rows

    def _keep_setup(self, rows):
        database = db.obj
        if database not in self._setups and rows.initialized:
            self._setups[database] = {name: value for name, value in rows.__dict__.items()
                                      if name not in self.PER_EXECUTION}


class NamedInProject:
    """Mixed into models whose rows belong to a project and are addressed by id or name
    (`/things/{id_or_name}`); they need `project`, `name` and `created_at` fields."""

    noun = "Resource"

    @classmethod
    def lookup(cls, project, id_or_name):
        """The row with this id, else with this name, in `project`; 404 otherwise."""
        in_project = cls.project == project
        row = (cls.get_or_none(in_project & (cls.id == id_or_name))
               or cls.get_or_none(in_project & (cls.name == id_or_name)))
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
        model = type(row)
        model.select(model._meta.primary_key).where(model._meta.primary_key == row.get_id()).for_update().execute()
        yield txn


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
        app.config["DATABASE_URL"],
        sqlite_pragmas=app.config["SQLITE_PRAGMAS"],
        pool_size=app.config["DB_POOL_SIZE"],
        pool_timeout=app.config["DB_POOL_TIMEOUT_SECONDS"],
    )
    db.initialize(database)
    app.extensions["database"] = database

    @app.before_request
    def open_connection():
        db.connect(reuse_if_open=True)

    @app.teardown_request
    def close_connection(exc):
        # Runs twice for streamed responses (Flask pushes the context again).
        if not db.is_closed():
            db.close()
