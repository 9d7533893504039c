"""Query arguments: an empty query string loads a schema's defaults without parsing, when they cannot differ."""
import marshmallow as ma

from app.core.api import query_defaults


class Plain(ma.Schema):
    limit = ma.fields.Integer(load_default=20)
    status = ma.fields.String(load_default="active")
    name = ma.fields.String()


def test_a_plain_schema_loads_its_defaults_once():
    schema = Plain()
    assert query_defaults(schema) == schema.load({}) == {"limit": 20, "status": "active"}


def test_schemas_whose_empty_load_may_differ_are_parsed_each_time():
    class Computed(ma.Schema):
        tags = ma.fields.List(ma.fields.String(), load_default=list)

    class Hooked(Plain):
        @ma.post_load
        def stamp(self, data, **kwargs):
            return {**data, "stamped": True}

    class Required(ma.Schema):
        name = ma.fields.String(required=True)

    for schema in (Computed(), Hooked(), Required()):
        assert query_defaults(schema) is None


def test_each_request_gets_its_own_copy_of_the_defaults(app):
    from app.core.api import ArgumentsParser

    schema, parser = Plain(), ArgumentsParser()
    with app.test_request_context("/anything"):
        first = parser.parse(schema, location="query")
        first.pop("status")  # views change their arguments (the key list pops include_deleted)
        assert parser.parse(schema, location="query") == {"limit": 20, "status": "active"}
    with app.test_request_context("/anything?limit=5"):
        assert parser.parse(schema, location="query") == {"limit": 5, "status": "active"}
