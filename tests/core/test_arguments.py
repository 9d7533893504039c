"""Arguments: views get what webargs gives them, after their own, and 400 for invalid input."""
import marshmallow as ma


class Plain(ma.Schema):
    limit = ma.fields.Integer(load_default=20)
    status = ma.fields.String(load_default="active")
    name = ma.fields.String()


def test_each_request_gets_its_own_copy_of_the_defaults(app):
    from app.core.api import ArgumentsParser

    schema, parser = Plain(), ArgumentsParser()
    with app.test_request_context("/anything"):
        first = parser.parse(schema, location="query")
        first.pop("status")  # views change their arguments (the key list pops include_deleted)
        assert parser.parse(schema, location="query") == {"limit": 20, "status": "active"}
    with app.test_request_context("/anything?limit=5"):
        assert parser.parse(schema, location="query") == {"limit": 5, "status": "active"}


def test_views_get_their_arguments_after_their_own_as_webargs_gives_them(app):
    """Blueprint.arguments hands the view what webargs gives, whatever the options, and 400 for invalid input."""
    from flask import Flask
    from flask.views import MethodView

    from app.core.api import Api, Blueprint

    blp = Blueprint("things", __name__, url_prefix="/things")

    @blp.route("/<thing_id>")
    class Thing(MethodView):
        @blp.arguments(Plain, location="query")
        @blp.response(200)
        def get(self, args, thing_id):
            return {"args": args, "thing_id": thing_id}

        @blp.arguments(Plain, location="query", as_kwargs=True)
        @blp.response(200)
        def delete(self, thing_id, **args):
            return {"args": args, "thing_id": thing_id}

    standalone = Flask(__name__)
    standalone.config.update(API_TITLE="t", API_VERSION="1", OPENAPI_VERSION="3.0.3")
    Api(standalone).register_blueprint(blp)
    client = standalone.test_client()
    assert client.get("/things/a?limit=3").json == {"args": {"limit": 3, "status": "active"}, "thing_id": "a"}
    assert client.delete("/things/b?name=x").json == {
        "args": {"limit": 20, "status": "active", "name": "x"}, "thing_id": "b"}
    assert client.get("/things/c?limit=many").status_code == 400
    assert Thing.get.__name__ == "get" and "_apidoc" in vars(Thing.get)


def test_query_arguments_load_as_webargs_proxy_loads_them(app):
    """The query is loaded as webargs' own parser loads it (a list for a field taking several values, else the
    first value; defaults, renamed keys and attributes, unknown keys left out), invalid values a 400."""
    import pytest
    from webargs.flaskparser import FlaskParser
    from werkzeug.exceptions import HTTPException

    from app.core.api import ArgumentsParser

    class Mixed(Plain):
        tags = ma.fields.List(ma.fields.String())
        sort = ma.fields.String(data_key="sort-by")
        many = ma.fields.Raw(metadata={"x": 1})
        many.is_multiple = True
        renamed = ma.fields.String(attribute="other")
        bounded = ma.fields.Integer(validate=ma.validate.Range(1, 5))

    ours, webargs = ArgumentsParser(), FlaskParser()
    for query in ("limit=5", "limit=5&limit=7", "tags=a&tags=b&name=n", "tags=a", "sort-by=name&sort=ignored",
                  "many=1&many=2&unknown=3", "name=&limit=1", "renamed=r&bounded=3&status=archived"):
        with app.test_request_context(f"/anything?{query}"):
            assert ours.parse(Mixed(), location="query") == webargs.parse(Mixed(), location="query"), query
    for query in ("limit=x", "limit=2&bounded=9"):
        with app.test_request_context(f"/anything?{query}"), pytest.raises(HTTPException) as refused:
            ours.parse(Mixed(), location="query")
        assert refused.value.code == 400
