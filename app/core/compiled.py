"""Queries whose SQL is built once per shape (CompiledQuery): peewee builds a query's SQL text on every
execution, which for a read by key or a page of a list costs more than running it."""
import datetime as dt
import functools
import itertools
import weakref


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

    Rows are read as peewee reads those of the query itself: by the query's own
    cursor wrapper (the model instances, with their joins), on a cursor of the
    compiled SQL.
    """

    def __init__(self, build):
        self._build = build
        self._shapes = weakref.WeakKeyDictionary()  # of each database, its shapes by key
        self._database = None  # the database of the queries built (a proxy): known from the first one

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

    def _fetch(self, params, options, limit=None):
        shape = self._shape(params, options)
        if shape is None:
            return list(itertools.islice(self._build(*params, **options).execute(), limit))
        cursor = shape.execute(params)
        try:
            read_row = shape.row_reader(cursor)
            return list(map(read_row, cursor.fetchall() if limit is None else cursor.fetchmany(limit)))
        finally:
            cursor.close()

    def pages(self, *params, **options):
        """The page fetcher paging.page() takes: the rows for a limit and an offset, the last two
        parameters of `build`."""
        return functools.partial(self._page, params, options)

    def _page(self, params, options, limit, offset):
        return self._fetch((*params, limit, offset), options)

    def _shape(self, params, options):
        try:
            kinds = tuple(map(_kind, params))
        except _Unshaped:
            return None
        key = (kinds, tuple(sorted(options.items())) if options else ())
        shapes = self._shapes.get(self._database.obj) if self._database is not None else None
        if shapes is None or key not in shapes:
            shape = _Shape.compile(self._build, params, kinds, options)
            self._database = shape.database
            shapes = self._shapes.setdefault(shape.database.obj, {})
            shapes[key] = shape if shape.sql is not None else None
        return shapes[key]


def row_reader(query, cursor):
    """What turns a row of `cursor`, which runs `query`'s SQL, into what peewee gives for that row of the query
    itself (a model instance with its joins, a tuple, a dict): the process_row of the cursor wrapper the query
    makes, set up for the cursor's columns. `_get_cursor_wrapper` is the one private name of peewee's used
    here: peewee has no public way to read a cursor of a query's SQL as that query's rows."""
    wrapper = query._get_cursor_wrapper(cursor)
    wrapper.initialize()  # from the cursor's description: which column goes to which model and field
    return wrapper.process_row


class _Shape:
    def __init__(self, query, sql, sources):
        self.query, self.sql, self.sources = query, sql, sources
        self.database = query.model._meta.database  # a proxy: its .obj is the database in use
        self._read_row = None

    def row_reader(self, cursor):
        """The row reader of the shape's rows, set up once, from its first execution's cursor: which column
        goes where depends on the SQL alone, and setting it up costs more than reading a row."""
        if self._read_row is None:
            self._read_row = row_reader(self.query, cursor)
        return self._read_row

    @classmethod
    def compile(cls, build, params, kinds, options):
        """The shape's SQL and where each of its parameters comes from (both None when the SQL is not
        reusable: such calls build their query). Built twice, with different stand-ins: a compiled
        parameter that is a stand-in is that parameter; one equal in both builds is a constant of the
        query (LIMIT 1, an IN list); any other was made from a parameter (contains' wildcards)."""
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
            return cls(query, None, None)
        sources = []
        for value, other in zip(compiled, other_compiled, strict=True):
            if id(value) in position and position[id(value)] == other_position.get(id(other)):
                sources.append((position[id(value)], None))
            elif id(value) not in position and id(other) not in other_position and type(value) is type(other) \
                    and value == other:
                sources.append((None, value))
            else:
                return cls(query, None, None)
        return cls(query, sql, tuple(sources))

    def execute(self, params):
        """The cursor of the shape's SQL run with `params`. The caller closes it: an unfinished SQLite
        statement would otherwise hold its read snapshot until the cursor is collected."""
        return self.database.obj.execute_sql(self.sql, self.arguments(params))

    def arguments(self, params):
        return [constant if index is None else params[index] for index, constant in self.sources]
