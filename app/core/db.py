"""Peewee behind a proxy: SQLite by default, Postgres (psycopg 3, pooled) by URL."""
import collections.abc
import datetime as dt
import functools
import itertools
import weakref
from contextlib import contextmanager
from urllib.parse import urlparse

from peewee import (
    DatabaseProxy,
    DateTimeField,
    Field,
    FieldAccessor,
    FieldAlias,
    ForeignKeyAccessor,
    ForeignKeyField,
    IntegerField,
    IntegrityError,
    Model,
    ModelCursorWrapper,
    ModelObjectCursorWrapper,
    ModelSelect,
    ObjectIdAccessor,
    SqliteDatabase,
    _StringField,
)
from playhouse.db_url import parse as parse_url
from playhouse.pool import PooledSqliteDatabase
from playhouse.postgres_ext import PooledPsycopg3Database

from app.core import clock
from app.core.errors import not_found

db = DatabaseProxy()

# Field descriptors whose __set__ on a fresh instance only stores the value in __data__.
PLAIN_ACCESSORS = (FieldAccessor, ForeignKeyAccessor)


def stored_as(kind, attribute):
    """The key of `__data__` whose value `attribute` of `kind`'s instances gives back unchanged (a
    model's own column, read by peewee's plain descriptor), else None."""
    if not (isinstance(kind, type) and issubclass(kind, Model)):
        return None
    accessor = _class_attribute(kind, attribute)
    return accessor.name if type(accessor) is FieldAccessor else None


def _class_attribute(kind, attribute):
    """What `attribute` names on `kind` (a descriptor), without calling it; None if nothing."""
    owner = next((klass for klass in kind.__mro__ if attribute in vars(klass)), None)
    return vars(owner)[attribute] if owner is not None else None


def _returns_read_value(field):
    """True when `field` gives back the value both drivers read for it unchanged: text
    columns read as str, integer columns as int."""
    if isinstance(field, ForeignKeyField):
        return type(field).python_value is ForeignKeyField.python_value and _returns_read_value(field.rel_field)
    return (type(field).python_value is Field.python_value
            and type(field).adapt in (_StringField.adapt, IntegerField.adapt))


def _needed(converter, field):
    """`converter` of `field`'s column, or None where the field gives back what the driver read."""
    if field is not None and getattr(converter, "__self__", None) is field and _returns_read_value(field):
        return None
    return converter


def _unaliased(converter):
    """A converter of an aliased model's column calls its field's: the field's own is the same."""
    owner = getattr(converter, "__self__", None)
    if isinstance(owner, FieldAlias) and converter.__func__ is FieldAlias.python_value:
        return owner.field.python_value
    return converter


# Row-building functions are written once per shape of rows (a model and its columns, a join of
# them): queries built per call (get_by_id, updates' checks, listings) would otherwise compile one
# per execution, which costs more than reading the rows.
@functools.lru_cache(maxsize=1024)
def _instance_builder(model, indexed_names):
    """A function building an instance of `model` from a row as peewee does (no defaults, nothing
    dirty), without a descriptor call per column: the values of plain fields go straight into the
    instance's data, converted where the field converts what the driver read (NULL stays None, as
    every field of peewee's and ours gives it back); other columns are set as attributes.
    `indexed_names`: (index, name, converter) of each column, converters unaliased.

    Its source is written for the query's columns, which spares a loop and a lookup per column on
    every row; only field names and column indexes are written into it."""
    namespace = {"model": model, "new": model.__new__}
    data, attributes = [], []
    for idx, name, converter in indexed_names:
        field = model._meta.fields.get(name)
        converter = _needed(converter, field)
        value = f"row[{idx}]"
        if converter is not None:
            namespace[f"convert_{idx}"] = converter
            value = f"None if row[{idx}] is None else convert_{idx}(row[{idx}])"
        if field is not None and type(model.__dict__.get(name)) in PLAIN_ACCESSORS:
            data.append(f"{name!r}: {value}")
        else:
            attributes.append(f"    setattr(instance, {name!r}, {value})")
    source = "\n".join([
        "def build(row):",
        "    instance = new(model)",
        f"    instance.__data__ = {{{', '.join(data)}}}",
        "    instance._dirty = set()",
        "    instance.__rel__ = {}",
        *attributes,
        *(["    instance._dirty.clear()"] if attributes else []),
        "    return instance",
    ])
    exec(compile(source, f"<row builder of {model.__name__}>", "exec"), namespace)
    return namespace["build"]


@functools.lru_cache(maxsize=1024)
def _row_linker(model, builders, presence, links):
    """A function building a row's instances and linking each joined one to its source, as
    ModelCursorWrapper.process_row does: an outer join that matched nothing gives None; a
    reference verified absent stays an id. Which joined models the row holds anything of
    decides which links are made. `builders`: (key, builder) of each joined model; `presence`:
    (key, column indexes) of each; `links`: peewee's src_to_dest, each with the keys reachable
    from its dest. Its source is written for the query's joins (see _instance_builder); only
    indexes and the joins' attribute names are written into it."""
    number = {key: n for n, (key, _) in enumerate(builders)}
    namespace = {f"build_{n}": build for n, (_, build) in enumerate(builders)}
    lines = ["def process_row(row):", *(f"    o_{n} = build_{n}(row)" for n in range(len(builders)))]
    filled = {}
    for n, (key, indexes) in enumerate(presence):
        filled[key] = f"f_{n}"
        lines.append(f"    f_{n} = {' or '.join(f'row[{idx}] is not None' for idx in indexes)}")
    for src, attr, dest, is_dict, is_outer, is_fk, reachable in links:
        if dest not in number:
            continue
        source, joined = f"o_{number[src]}", f"o_{number[dest]}"
        reached = " or ".join(filled[key] for key in (dest, *reachable) if key in filled) or "False"
        if is_outer:
            lines += [f"    if {filled.get(src, 'False')} or {filled.get(dest, 'False')}:",
                      f"        joined = {joined} if {reached} else None"]
            joined = "joined"
        else:
            lines.append(f"    if {reached}:")
        if is_dict:
            lines.append(f"        {source}[{attr!r}] = {joined}")
            continue
        attach = [f"setattr({source}, {attr!r}, {joined})", f"{source}._dirty.discard({attr!r})"]
        if is_fk and is_outer:
            lines += [f"        if {joined} is None:", f"            {source}.__rel__[{attr!r}] = None",
                      "        else:", *(f"            {line}" for line in attach)]
        else:
            lines += [f"        {line}" for line in attach]
    lines.append(f"    return o_{number[model]}")
    exec(compile("\n".join(lines), f"<rows of {model.__name__} joined>", "exec"), namespace)
    return namespace["process_row"]


class _SingleModelRows(ModelObjectCursorWrapper):
    """Rows of a query on one model."""

    _columns = None  # (index, name, converter) of each column, once our builder reads the rows

    def initialize(self):
        super().initialize()
        if self.is_model and self.constructor.__init__ is Model.__init__:
            self._columns = tuple((idx, self.unique_columns[idx], _unaliased(self.converters[idx]))
                                  for idx in range(self.ncols))
            self.process_row = _instance_builder(self.constructor, self._columns)

    def layout(self):
        """The RowLayout of these rows (asked once per compiled shape), or None when peewee builds them."""
        if self._columns is None:
            return None
        model = self.constructor
        return RowLayout(model, {model: model}, {model: self._columns}, (), {})


class _JoinedRows(ModelCursorWrapper):
    """Rows of a query joining models: one instance per joined model, linked as peewee links them."""

    _columns_of = None  # of each joined model's key, (index, name, converter) of its columns, once linked

    def initialize(self):
        super().initialize()
        if any(is_model and constructor.__init__ is not Model.__init__
               for _, constructor, is_model in self._constructor_list):
            return  # a model that builds itself: peewee's way
        columns_of, indexes_of = {}, {}
        for idx, key, column, converter in self._row_spec:
            owner = key if key in self.key_to_constructor else self.model
            columns_of.setdefault(owner, []).append((idx, column, _unaliased(converter)))
            indexes_of.setdefault(key, []).append(idx)
        builders = tuple((key, _instance_builder(constructor, tuple(columns_of.get(key, ()))) if is_model
                          else functools.partial(_row_dict, tuple(columns_of.get(key, ()))))
                         for key, constructor, is_model in self._constructor_list)
        built = {key for key, _ in builders}
        if self.model in built and all(src in built for src, *_ in self.src_to_dest):
            self.process_row = _row_linker(
                self.model, builders, tuple((key, tuple(indexes)) for key, indexes in indexes_of.items()),
                tuple((*link, tuple(self._dest_reachable.get(link[2], ()))) for link in self.src_to_dest))
            self._columns_of = columns_of

    def layout(self):
        """The RowLayout of these rows (asked once per compiled shape), or None when peewee builds them."""
        if self._columns_of is None:
            return None
        models = {key: constructor for key, constructor, is_model in self._constructor_list if is_model}
        return RowLayout(self.model, models, self._columns_of, self.src_to_dest, self._dest_reachable)


def _row_dict(columns, row):
    return {name: (row[idx] if convert is None else convert(row[idx])) for idx, name, convert in columns}


class RowLayout:
    """Where a query's rows hold each joined model's columns, and how the joins link the models: what
    a list page's dump needs to write its items straight from the driver's rows (app/core/dumping.py),
    to the letter of the instances the rows would build.

    `root`: the key of the queried model; `models`: the model class of each key (a model or an alias);
    `columns`: of each key, its columns' names with their (index, converter or None); `links`: of each
    (source key, attribute) a model's join sets, (destination key, outer join?, foreign key?);
    `reachable`: of a destination key, the keys joined through it."""

    def __init__(self, root, models, columns_of, src_to_dest, reachable):
        self.root, self.models, self.reachable = root, models, reachable
        self.columns = {}
        for key, columns in columns_of.items():
            fields = models[key]._meta.fields if key in models else {}
            self.columns[key] = {name: (idx, _needed(convert, fields.get(name))) for idx, name, convert in columns}
        self.links = {(src, attr): (dest, is_outer, is_fk)
                      for src, attr, dest, src_is_dict, is_outer, is_fk in src_to_dest
                      if not src_is_dict and src in models and dest in models}
        self.item_dumps = {}  # dumping's, by schema

    def present(self, key):
        """The indexes of the columns of `key` and of what is joined through it: a join links a row of
        `key` when any of them holds a value (_row_linker's rule)."""
        keys = (key, *self.reachable.get(key, ()))
        return tuple(idx for each in keys for idx, _ in self.columns.get(each, {}).values())

    def column(self, key, name):
        """(index, converter or None) of `key`'s column `name`; (None, None) when not selected (read as None)."""
        return self.columns.get(key, {}).get(name, (None, None))

    def source(self, key, attribute):
        """How `attribute` of the instance built for `key` reads from a row, as one of
        ("column", (index, converter)): that column's value;
        ("joined", destination key, outer?): the instance its foreign key's join linked, or, through
            an outer join that matched nothing, None;
        ("foreign id", (index, converter), destination key, (index, converter)): the id of a joined
            row, the destination's column where the join linked one, else the foreign key column;
        ("related", destination key, outer?, (index, converter)): a RelatedColumn, the destination's
            column where the join linked one, else None;
        or None when it reads something no row holds (a property, a relation not joined)."""
        accessor = _class_attribute(self.models[key], attribute)
        kind = type(accessor)
        if kind is FieldAccessor:
            return ("column", self.column(key, accessor.name))
        if accessor is None and attribute in self.columns.get(key, {}):
            return ("column", self.column(key, attribute))  # a selected expression, set as an attribute
        if kind is ObjectIdAccessor:
            field = accessor.field
            dest, _, _ = self.links.get((key, field.name), (None, None, None))
            if dest is None:
                return ("column", self.column(key, field.name))
            return ("foreign id", self.column(key, field.name), dest, self.column(dest, field.rel_field.name))
        if kind is ForeignKeyAccessor and (key, attribute) in self.links:
            dest, outer, _ = self.links[key, attribute]
            return ("joined", dest, outer)
        if kind is RelatedColumn and (key, accessor.relation) in self.links:
            dest, outer, is_fk = self.links[key, accessor.relation]
            if is_fk:
                return ("related", dest, outer, self.column(dest, accessor.column))
        return None


class Page(collections.abc.Sequence):
    """A list page's rows of a compiled query (CompiledQuery.pages), kept as the driver read them and
    built into model instances (with their joins, as the query gives them) when first looked at. A
    response schema's dump writes its items straight from them where it can (dumping.speed_up): for
    20 API keys with creator and project, 116 us of instances and dump become 32 us here."""

    __slots__ = ("rows", "layout", "_read_row", "_instances")

    def __init__(self, rows, layout, read_row):
        self.rows, self.layout, self._read_row, self._instances = rows, layout, read_row, None

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return Page(self.rows[index], self.layout, self._read_row)
        return self.instances[index]

    def __iter__(self):
        return iter(self.instances)

    @property
    def instances(self):
        if self._instances is None:
            self._instances = list(map(self._read_row, self.rows))
        return self._instances


class RelatedColumn:
    """A model's attribute that is a column of the row its foreign key `relation` points to, None when
    it points nowhere (ApiKey.project_name). Declared this way, not as a property, so that a list page
    of rows joined to that model reads it from the row (RowLayout)."""

    def __init__(self, relation, column):
        self.relation, self.column = relation, column

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        related = getattr(instance, self.relation)
        return None if related is None else getattr(related, self.column)

    def __set__(self, instance, value):
        raise AttributeError(f"{self.column} of {self.relation} is read from the related row")


class Select(ModelSelect):
    """Model queries whose rows skip peewee's per-column descriptor calls (see _instance_builder)."""

    def _get_model_cursor_wrapper(self, cursor):
        if len(self._from_list) == 1 and not self._joins:
            return _SingleModelRows(cursor, self.model, self._returning, self.model)
        return _JoinedRows(cursor, self.model, self._returning, self._from_list, self._joins)


class BaseModel(Model):
    class Meta:
        database = db
        legacy_table_names = False
        # save() writes only the columns this instance changed, so a row loaded
        # earlier in a request never puts back columns another request changed since.
        only_save_dirty = True

    @classmethod
    def select(cls, *fields):
        return Select(cls, fields or cls._meta.sorted_fields, is_default=not fields)

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

    def isoformat_of_read(self, value):
        """clock.isoformat of python_value(value), a value read from the database (not None). The
        text SQLite stores for a datetime with microseconds is turned into it directly: 0.35 us
        rather than 1.3 here (datetime.isoformat is most of that), for every timestamp of a list
        page. fromisoformat checks the text is a valid date and time in the layout the slices
        assume; any other value (Postgres's datetimes, text without microseconds) is converted."""
        if (type(value) is str and len(value) == 26 and value[4] == value[7] == "-" and value[10] == " "
                and value[13] == value[16] == ":" and value[19] == "."):
            try:
                dt.datetime.fromisoformat(value)
            except ValueError:
                pass
            else:
                return f"{value[:10]}T{value[11:]}Z"
        return clock.isoformat(self.python_value(value))


class _Unshaped(Exception):
    """A parameter of a type a stand-in cannot take (a dict, a list): the call builds its query."""


class _Text(str):
    """Stands in for a text parameter while a query is compiled."""


class _Number(int):
    """Stands in for an integer parameter while a query is compiled."""


class _Moment(dt.datetime):
    """Stands in for a (naive UTC) datetime parameter while a query is compiled."""


def _refuse(self, *args):
    raise TypeError("a CompiledQuery parameter's value cannot steer the query's shape; pass it by keyword")


for _kind in (_Text, _Number, _Moment):
    for _name in ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"):
        setattr(_kind, _name, _refuse)
    _kind.__hash__ = object.__hash__
_Number.__bool__ = _refuse
STAND_INS = (_Text, _Number, _Moment)


def _kind(value):
    """What a parameter contributes to its query's shape: the kind of its stand-in, or itself
    when it is None, True or False (the query may differ for those)."""
    kind = type(value)
    if kind is str:
        return _Text
    if kind is int:
        return _Number
    if kind is dt.datetime and value.tzinfo is None:
        return _Moment
    if value is None or value is True or value is False:
        return value
    raise _Unshaped


def _stand_in(kind, index, pass_number):
    """A stand-in, different in each of the two passes that compile a shape."""
    if kind is _Text:  # of other lengths and ends, so no text made from one is the same in both
        return _Text(f"\x1eparameter {index}\x1e" if pass_number == 0 else f"\x1f\x1fparameter {index} again\x1f\x1f")
    if kind is _Number:
        return _Number(index * 2 + pass_number)
    return _Moment(2000 + pass_number, 1, 1, microsecond=index)


class CompiledQuery:
    """A query whose SQL text is built once per database and shape; only its parameters change.

    Peewee rebuilds the SQL of a query on every execution, which for a read by
    key or a page of a list costs more than running it. `build(*params,
    **options)` returns the query; it is called twice per shape with stand-ins
    for the parameters (texts, integers, naive datetimes), and the compiled
    SQL's parameters say where each goes (see _Shape.compile). The shape is
    the keyword options and which parameters are None, True or False, so
    `build` may branch on those and on nothing else (comparing a stand-in
    raises TypeError). A shape whose SQL transforms a parameter (`contains`
    adds wildcards), and a call with a parameter of another type (a dict), are
    built afresh instead. Options name shapes, so each takes a few values only.

    The rows are built by the cursor wrapper of the shape's first execution, so
    they form the same model graph as executing the query itself would; later
    executions hand it the driver's rows directly.
    """

    def __init__(self, build):
        self._build = build
        self._shapes = weakref.WeakKeyDictionary()

    def first(self, *params, **options):
        """The first row (a model instance with its joins), or None."""
        found = self._fetch(params, options, limit=1)
        return found[0] if found else None

    def all(self, *params, **options):
        """Every row, as model instances with their joins."""
        return self._fetch(params, options)

    def scalar(self, *params, **options):
        """The first column of the first row (a count), or None."""
        shape = self._shape(params, options)
        if shape is None:
            return self._build(*params, **options).scalar()
        cursor = shape.execute(params)
        try:
            row = cursor.fetchone()
        finally:
            cursor.close()
        return row[0] if row else None

    def _fetch(self, params, options, limit=None, paged=False):
        shape = self._shape(params, options)
        if shape is None:
            return list(itertools.islice(self._build(*params, **options).execute(), limit))
        cursor = shape.execute(params)
        try:
            if shape.read_row is None:
                rows = shape.query._get_cursor_wrapper(cursor)
                # Set up from the cursor's description, before any row: a query that finds nothing
                # (an overdue check) needs no new wrapper on every later call either.
                rows.initialize()
                shape.layout = rows.layout() if isinstance(rows, (_SingleModelRows, _JoinedRows)) else None
                shape.read_row = _row_reader(rows)
            found = cursor.fetchall() if limit is None else cursor.fetchmany(limit)
            if paged and shape.layout is not None:
                return Page(found, shape.layout, shape.read_row)
            return list(map(shape.read_row, found))
        finally:
            cursor.close()

    def pages(self, *params, **options):
        """The page fetcher paging.page() takes: rows (a Page) for a limit and an offset, the last
        two parameters of `build`."""
        return functools.partial(self._page, params, options)

    def _page(self, params, options, limit, offset):
        return self._fetch((*params, limit, offset), options, paged=True)

    def _shape(self, params, options):
        try:
            kinds = tuple(map(_kind, params))
        except _Unshaped:
            return None
        key = (kinds, tuple(sorted(options.items())) if options else ())
        shapes = self._shapes.get(db.obj)
        if shapes is None:
            shapes = self._shapes.setdefault(db.obj, {})
        if key not in shapes:
            shapes[key] = _Shape.compile(self._build, params, kinds, options)
        return shapes[key]


def _row_reader(rows):
    """The row builder of a cursor wrapper that is set up: its set-up (which column goes to
    which model of the join) depends only on the query, so it builds every row of it (what
    the wrapper's iteration would do for each)."""
    rows.cursor, rows.row_cache = None, []
    return rows.process_row


class _Shape:
    def __init__(self, query, sql, sources):
        self.query, self.sql, self.sources, self.read_row, self.layout = query, sql, sources, None, None

    @classmethod
    def compile(cls, build, params, kinds, options):
        """The shape's SQL and where each of its parameters comes from, or None if the SQL is
        not reusable. Built twice, with different stand-ins: a compiled parameter that is a
        stand-in is that parameter; one equal in both builds is a constant of the query
        (LIMIT 1, an IN list); any other was made from a parameter (contains' wildcards)."""
        builds = []
        for pass_number in (0, 1):
            stand_ins = [_stand_in(kind, index, pass_number) if kind in STAND_INS else None
                         for index, kind in enumerate(kinds)]
            query = build(*[value if stand_in is None else stand_in
                            for value, stand_in in zip(params, stand_ins, strict=True)], **options)
            sql, compiled = query.sql()
            if any(isinstance(value, _Text) and value in sql for value in stand_ins):
                raise ValueError("a CompiledQuery parameter was written into the SQL text")
            builds.append((query, sql, compiled, {id(s): index for index, s in enumerate(stand_ins) if s is not None}))
        (query, sql, compiled, position), (_, other_sql, other_compiled, other_position) = builds
        if sql != other_sql or len(compiled) != len(other_compiled):
            return None
        sources = []
        for value, other in zip(compiled, other_compiled, strict=True):
            if id(value) in position and position[id(value)] == other_position.get(id(other)):
                sources.append((position[id(value)], None))
            elif id(value) not in position and id(other) not in other_position and type(value) is type(other) \
                    and value == other:
                sources.append((None, value))
            else:
                return None
        return cls(query, sql, tuple(sources))

    def execute(self, params):
        """The cursor of the shape's SQL run with `params`. The caller closes it: an unfinished SQLite
        statement would otherwise hold its read snapshot until the cursor is collected."""
        return db.obj.execute_sql(self.sql, self.arguments(params))

    def arguments(self, params):
        return [constant if index is None else params[index] for index, constant in self.sources]


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
        app.config["DATABASE_URL"],
        sqlite_pragmas=app.config["SQLITE_PRAGMAS"],
        pool_size=app.config["DB_POOL_SIZE"],
        pool_timeout=app.config["DB_POOL_TIMEOUT_SECONDS"],
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
