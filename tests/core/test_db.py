"""core.db helpers."""

import pytest

from app.core.compiled import CompiledQuery
from app.core.db import BaseModel, db
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


def test_a_compiled_query_that_first_found_nothing_builds_later_rows_as_peewee_does(app, make_org):
    """A shape first run without a row reads later ones as peewee does: the same row graph, joins included."""
    from peewee import ModelSelect

    from app.orgs.auth import _key_with_home_project, key_with_home_project
    from app.orgs.models import hash_key

    compiled = CompiledQuery(_key_with_home_project)
    with app.app_context(), db.connection_context():
        assert compiled.first(hash_key("sk_nobody")) is None
        assert compiled._shape(("x",), {}) is not None  # compiled, not built per call
        owner = make_org()
        ours = compiled.first(hash_key(owner.plaintext))
        query = _key_with_home_project(hash_key(owner.plaintext))
        theirs = list(ModelSelect._get_model_cursor_wrapper(query, db.obj.execute_sql(*query.sql())))
        assert _graph(ours) == _graph(theirs[0]) and ours.home_project.id is not None
        assert _graph(key_with_home_project.first(hash_key(owner.plaintext))) == _graph(ours)


def test_get_by_id_is_compiled_and_answers_as_peewees(app, make_org):
    """Every model's get_by_id reads through one compiled lookup: the same row graph as peewee's own
    get_by_id, and DoesNotExist (a 404 in views) for a key that is not there."""
    from peewee import Model

    from app.core.db import matching
    from app.orgs.models import Project

    make_org()
    with app.app_context(), db.connection_context():
        project_id = Project.select(Project.id).scalar()
        theirs = Model.get_by_id.__func__(Project, project_id)
        assert _graph(Project.get_by_id(project_id)) == _graph(theirs)
        assert matching(Project, "id")._shape((project_id,), {}) is not None
        with pytest.raises(Project.DoesNotExist):
            Project.get_by_id("nope")
