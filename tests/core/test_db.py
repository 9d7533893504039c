"""core.db helpers."""
import datetime as dt

import pytest
from peewee import JOIN

from app.core.db import BaseModel, CompiledQuery, db
from app.orgs.models import Organization


def test_compiled_query_reuses_sql_with_new_parameters(app, make_org):
    a, b = make_org("A", "a@a.test"), make_org("B", "b@b.test")
    by_name = CompiledQuery(lambda name: Organization.select().where(Organization.name == name))
    with app.app_context(), db.connection_context():
        assert by_name.first("A").id == a.org_id
        assert by_name.first("B").id == b.org_id
        assert by_name.first("C") is None


def test_compiled_query_keeps_the_constants_of_its_query(app, make_org):
    a = make_org("A", "a@a.test")
    with_constant = CompiledQuery(lambda name: Organization.select().where(
        (Organization.name == name) & (Organization.name != "never")).limit(1))
    with app.app_context(), db.connection_context():
        assert with_constant.first("A").id == a.org_id
        assert with_constant.first("B") is None
        assert with_constant._shape(("A",), {}).arguments(("X",)) == ["X", "never", 1]


def test_compiled_query_values_made_from_a_parameter_are_built_each_time(app, make_org):
    a = make_org("Alpha", "a@a.test")
    make_org("Beta", "b@b.test")
    prefixed = CompiledQuery(lambda name: Organization.select().where(Organization.name == name[:1] + "lpha"))
    with app.app_context(), db.connection_context():
        assert [o.id for o in prefixed.all("A")] == [a.org_id]
        assert prefixed.all("B") == []
        assert prefixed._shape(("A",), {}) is None


def test_compiled_query_shapes_follow_none_and_options(app, make_org):
    a, b = make_org("A", "a@a.test"), make_org("B", "b@b.test")

    def build(name, limit, offset, *, newest_first):
        rows = Organization.select()
        if name is not None:
            rows = rows.where(Organization.name == name)
        order = Organization.created_at.desc() if newest_first else Organization.created_at
        return rows.order_by(order, Organization.id).limit(limit).offset(offset)

    orgs = CompiledQuery(build)
    with app.app_context(), db.connection_context():
        assert [o.id for o in orgs.all(None, 10, 0, newest_first=False)] == [a.org_id, b.org_id]
        assert [o.id for o in orgs.all(None, 10, 0, newest_first=True)] == [b.org_id, a.org_id]
        assert [o.id for o in orgs.all(None, 1, 1, newest_first=True)] == [a.org_id]
        assert [o.id for o in orgs.all("B", 10, 0, newest_first=False)] == [b.org_id]
        assert orgs.all("C", 10, 0, newest_first=False) == []
        assert len(orgs._shapes[db.obj]) == 3


def test_compiled_query_transformed_parameters_are_built_each_time(app, make_org):
    a = make_org("Alpha", "a@a.test")
    make_org("Beta", "b@b.test")
    containing = CompiledQuery(lambda text: Organization.select().where(Organization.name.contains(text)))
    with app.app_context(), db.connection_context():
        assert [o.id for o in containing.all("lph")] == [a.org_id]
        assert containing.all("zz") == []


def test_compiled_query_parameters_cannot_steer_the_shape(app):
    steered = CompiledQuery(lambda status: Organization.select().where(
        Organization.name == ("x" if status == "active" else "y")))
    with app.app_context(), db.connection_context(), pytest.raises(TypeError):
        steered.first("active")


def test_compiled_query_refuses_parameters_written_into_the_sql(app):
    from peewee import SQL

    inlined = CompiledQuery(lambda name: Organization.select().where(
        (Organization.id == name) | SQL(f"name = '{name}'")))
    with app.app_context(), db.connection_context(), pytest.raises(ValueError):
        inlined.first("A")


def _graph(value):
    """Everything a row builder put on an instance, joined instances followed."""
    if isinstance(value, BaseModel):
        return {name: _graph(item) for name, item in vars(value).items()}
    if isinstance(value, dict):
        return {name: _graph(item) for name, item in value.items()}
    return value


def test_rows_are_built_as_peewee_builds_them(app, make_org):
    """Select's row builders fill instances directly; the model graph must be peewee's own:
    the same data, relations, dirty sets and join attributes, outer joins that matched nothing
    included (a key without a project), on one model and on joins."""
    from peewee import ModelSelect

    from app.core.auth import _key_with_home_project
    from app.orgs.models import ApiKey, _build_listing, hash_key
    from app.projects.models import Project

    owner = make_org()
    make_org("Other", "o@other.test")
    with app.app_context(), db.connection_context():
        project = Project.create_in(owner.org_id, "scoped")
        ApiKey.update(project=project.id).where(ApiKey.org == make_org("Third", "t@third.test").org_id).execute()
        queries = [
            Project.select().order_by(Project.id),
            ApiKey.select().order_by(ApiKey.id),
            _build_listing(owner.org_id, None, None, None, 10, 0, status="all", sort_by="created_at",
                           sort_direction="desc"),
            ApiKey.select(ApiKey, Project).join(Project, JOIN.LEFT_OUTER).order_by(ApiKey.id),
            _key_with_home_project(hash_key(owner.plaintext)),
        ]
        for query in queries:
            sql, params = query.sql()
            ours = list(query._get_model_cursor_wrapper(db.obj.execute_sql(sql, params)))
            theirs = list(ModelSelect._get_model_cursor_wrapper(query, db.obj.execute_sql(sql, params)))
            assert ours and [_graph(row) for row in ours] == [_graph(row) for row in theirs], sql


def test_a_compiled_query_that_first_found_nothing_builds_later_rows_as_peewee_does(app, make_org):
    """The row builder is set up by the shape's first execution even when it read no row."""
    from peewee import ModelSelect

    from app.core.auth import _key_with_home_project, key_with_home_project
    from app.orgs.models import hash_key

    compiled = CompiledQuery(_key_with_home_project)
    with app.app_context(), db.connection_context():
        assert compiled.first(hash_key("sk_nobody")) is None
        assert compiled._shape(("x",), {}).read_row is not None
        owner = make_org()
        ours = compiled.first(hash_key(owner.plaintext))
        query = _key_with_home_project(hash_key(owner.plaintext))
        theirs = list(ModelSelect._get_model_cursor_wrapper(query, db.obj.execute_sql(*query.sql())))
        assert _graph(ours) == _graph(theirs[0]) and ours.home_project.id is not None
        assert _graph(key_with_home_project.first(hash_key(owner.plaintext))) == _graph(ours)


def test_row_building_functions_are_written_once_per_shape(app, make_org):
    """Queries built per call (not compiled) reuse the functions written for their shape of rows."""
    from app.orgs.models import ApiKey
    from app.projects.models import Project

    make_org()
    with app.app_context(), db.connection_context():
        for build in (lambda: Project.select(), lambda: ApiKey.select(ApiKey, Project).join(Project, JOIN.LEFT_OUTER)):
            wrappers = [build()._get_model_cursor_wrapper(db.obj.execute_sql(*build().sql())) for _ in range(2)]
            assert all(list(wrapper) for wrapper in wrappers)
            assert wrappers[0].process_row is wrappers[1].process_row


def test_get_by_id_is_compiled_and_answers_as_peewees(app, make_org):
    """Every model's get_by_id reads through one compiled lookup: the same row graph as peewee's own
    get_by_id, and DoesNotExist (a 404 in views) for a key that is not there."""
    from peewee import Model

    from app.core.db import matching
    from app.projects.models import Project

    make_org()
    with app.app_context(), db.connection_context():
        project_id = Project.select(Project.id).scalar()
        theirs = Model.get_by_id.__func__(Project, project_id)
        assert _graph(Project.get_by_id(project_id)) == _graph(theirs)
        assert matching(Project, "id")._shape((project_id,), {}).read_row is not None
        with pytest.raises(Project.DoesNotExist):
            Project.get_by_id("nope")


def _page_dumps(page, schema_class):
    """(marshmallow's own dump of the page's instances, Lantern's dump of the page) and whether
    Lantern's wrote its items straight from the rows."""
    import marshmallow as ma

    from app.core import dumping

    fast = schema_class(many=True)
    dumping.speed_up(fast)
    from_rows = fast.dump(page)
    return ma.Schema.dump(schema_class(many=True), list(page)), from_rows, bool(page.layout.item_dumps[fast.dump])


def test_a_page_dumps_from_its_rows_as_its_instances_dump(app, make_org):
    """A list page of a compiled query is dumped from the driver's rows (no instances), and must give
    what marshmallow's dump of the instances gives: converted columns and NULLs, a selected
    expression, nested joined rows (an outer join that matched nothing is None), foreign ids and
    RelatedColumn values where the join linked a row other than the key's own, and where it did not."""
    import marshmallow as ma
    from peewee import fn

    from app.core.db import Page
    from app.core.fields import UtcDateTime
    from app.orgs.models import ApiKey, User
    from app.orgs.schemas import CreatedBySchema
    from app.projects.models import Project

    class ProjectItem(ma.Schema):
        id = ma.fields.String()
        name = ma.fields.String()
        created_at = UtcDateTime()

    class KeyItem(ma.Schema):
        id = ma.fields.String()
        masked = ma.fields.String(attribute="masked_key", data_key="maskedKey")
        created_at = UtcDateTime()
        expires_at = UtcDateTime(allow_none=True)
        lifetime_seconds = ma.fields.Integer(as_string=True, allow_none=True)
        name_length = ma.fields.Integer()
        org_id = ma.fields.String()
        created_by = ma.fields.Nested(CreatedBySchema)
        project = ma.fields.Nested(ProjectItem, allow_none=True)
        project_id = ma.fields.String(allow_none=True)
        project_name = ma.fields.String(allow_none=True)

    owner = make_org()
    other = make_org("Other", "o@other.test")
    with app.app_context(), db.connection_context():
        scoped, elsewhere = Project.create_in(owner.org_id, "scoped"), Project.create_in(other.org_id, "elsewhere")
        ApiKey.update(expires_at=dt.datetime(2027, 1, 2, 3, 4, 5, 6), lifetime_seconds=60).where(
            ApiKey.id == owner.id).execute()
        ApiKey.update(project=elsewhere.id, created_at=dt.datetime(2026, 11, 25, 12, 0)).where(
            ApiKey.id == other.id).execute()

        def by_key(join_on):
            def build(limit, offset):
                return (ApiKey.select(ApiKey.id, ApiKey.masked_key, ApiKey.created_at, ApiKey.expires_at,
                                      ApiKey.lifetime_seconds, ApiKey.org, ApiKey.created_by, ApiKey.project,
                                      fn.LENGTH(ApiKey.name).alias("name_length"), User.id, User.email, User.name,
                                      Project.id, Project.name, Project.created_at)
                        .join(User, on=(ApiKey.created_by == User.id))
                        .switch(ApiKey).join(Project, JOIN.LEFT_OUTER, on=join_on, attr="project")
                        .order_by(ApiKey.id).limit(limit).offset(offset))
            return CompiledQuery(build).pages()

        # The key's own project (the owner's key has none); then a join that links keys to their
        # organization's project named "scoped" whatever their own (the owner's org has one).
        outcomes = []
        for pages in (by_key(ApiKey.project == Project.id),
                      by_key((Project.org == ApiKey.org) & (Project.name == "scoped"))):
            for _ in range(2):  # the shape's first execution, and a later one
                page = pages(10, 0)
                assert isinstance(page, Page) and len(page) == 2
                expected, from_rows, written = _page_dumps(page, KeyItem)
                assert from_rows == expected and written
            outcomes.append({item["id"]: (item["project_id"], item["project_name"], item["project"] and
                                          item["project"]["name"]) for item in expected})
        assert outcomes == [{owner.id: (None, None, None), other.id: (elsewhere.id, "elsewhere", "elsewhere")},
                            {owner.id: (scoped.id, "scoped", "scoped"), other.id: (elsewhere.id, None, None)}]
        item = next(item for item in expected if item["id"] == other.id)
        assert item["created_at"] == "2026-11-25T12:00:00.000000Z" and item["expires_at"] is None
        item = next(item for item in expected if item["id"] == owner.id)
        assert item["expires_at"] == "2027-01-02T03:04:05.000006Z" and item["lifetime_seconds"] == "60"
        assert item["maskedKey"] == owner.masked_key and item["name_length"] == len(owner.name)


def test_a_page_the_rows_cannot_dump_is_dumped_from_its_instances(app, make_org):
    """A field reading a property, or a joined row the query read nothing of (its instance would load
    it), makes the page dump its instances, to the same result."""
    import marshmallow as ma

    from app.orgs.models import ApiKey, User

    class WithProperty(ma.Schema):
        id = ma.fields.String()
        is_expired = ma.fields.Boolean()

    class Creator(ma.Schema):
        id = ma.fields.String()
        email = ma.fields.String()

    class WithCreator(ma.Schema):
        id = ma.fields.String()
        created_by = ma.fields.Nested(Creator)

    make_org()
    with app.app_context(), db.connection_context():
        User.update(name=None).execute()
        pages = CompiledQuery(lambda limit, offset: ApiKey.select(ApiKey.id, ApiKey.expires_at, ApiKey.created_by,
                                                                  User.name)
                              .join(User, on=(ApiKey.created_by == User.id)).limit(limit).offset(offset)).pages()
        pages(10, 0)
        expected, from_rows, written = _page_dumps(pages(10, 0), WithProperty)
        assert from_rows == expected and not written and expected[0]["is_expired"] is False
        expected, from_rows, written = _page_dumps(pages(10, 0), WithCreator)
        assert from_rows == expected and written and "@" in expected[0]["created_by"]["email"]


@pytest.mark.parametrize("value", [
    "2026-11-26 09:21:30.884580", "2026-11-26 09:21:30", "0999-01-02 03:04:05.000001", "2026-11-26T09:21:30.884580",
    "2026-11-26 09:21:30,884580", "2026-11-26 09:21:30+01:00:00",
    "2026-11-26 09:21:30.884580+01:00", dt.datetime(2026, 11, 26, 9, 21, 30, 884580), dt.datetime(2026, 1, 1),
])
def test_a_timestamp_read_from_the_database_is_written_as_its_datetime_is(value):
    from app.core import clock
    from app.core.db import UtcDateTimeField

    field = UtcDateTimeField()
    assert field.isoformat_of_read(value) == clock.isoformat(field.python_value(value))
