"""flask-smorest wired to the spec's error body and 400 for invalid input."""
import flask_smorest
import marshmallow as ma
from flask_smorest.arguments import ArgumentsMixin
from webargs import core
from webargs.flaskparser import is_json_request

from app.core import strictjson
from app.core.errors import ErrorSchema, bad_request, handle_http_exception


class ArgumentsParser(ArgumentsMixin.ARGUMENTS_PARSER.__class__):
    DEFAULT_VALIDATION_STATUS = 400

    def _raw_load_json(self, req):
        if not is_json_request(req):
            return core.missing
        body = req.get_data(cache=True)
        if not body:
            return core.missing
        try:
            return strictjson.loads(body)
        except strictjson.InvalidJson as error:
            raise bad_request(f"The request body {error}.") from None


class Blueprint(flask_smorest.Blueprint):
    ARGUMENTS_PARSER = ArgumentsParser()


class Api(flask_smorest.Api):
    ERROR_SCHEMA = ErrorSchema

    def init_app(self, app, *args, **kwargs):
        super().init_app(app, *args, **kwargs)
        self.ma_plugin.converter.add_attribute_function(nullable_ref)

    def handle_http_exception(self, error):
        return handle_http_exception(error)


def nullable_ref(self, field, ret):
    """OpenAPI 3.0: a nullable nested schema is {nullable, allOf: [$ref]}; apispec's
    anyOf [{type: object, nullable}, $ref] would let any object through."""
    refs = [part for part in ret.get("anyOf", []) if "$ref" in part]
    if field.allow_none and isinstance(field, ma.fields.Nested) and refs:
        del ret["anyOf"]
        return {"nullable": True, "allOf": refs}
    return {}
