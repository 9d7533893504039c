"""core.db helpers."""
import pytest

from app.core.db import CompiledQuery, db
from app.orgs.models import Organization


def test_compiled_query_reuses_sql_with_new_parameters(app, make_org):
    a, b = make_org("A", "a@a.test"), make_org("B", "b@b.test")
    by_name = CompiledQuery(lambda name: Organization.select().where(Organization.name == name))
    with app.app_context(), db.connection_context():
        assert by_name.first("A").id == a.org_id
        assert by_name.first("B").id == b.org_id
        assert by_name.first("C") is None


def test_compiled_query_refuses_queries_with_hidden_parameters(app):
    hidden = CompiledQuery(lambda name: Organization.select().where(
        (Organization.name == name) & (Organization.max_concurrent_sessions == 3)))
    with app.app_context(), db.connection_context(), pytest.raises(ValueError):
        hidden.first("A")
