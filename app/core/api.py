"""flask-smorest wired to the spec's error body and 400 for invalid input."""
import flask_smorest
import marshmallow as ma
from flask import current_app, request
from flask_smorest.arguments import ArgumentsMixin
from webargs import core
from webargs.flaskparser import is_json_request

from app.core import strictjson
from app.core.errors import ApiError, ErrorSchema, bad_request, handle_http_exception


class ArgumentsParser(ArgumentsMixin.ARGUMENTS_PARSER.__class__):
    """flask-smorest's parser (its documented ARGUMENTS_PARSER) with the spec's 400 for invalid input, a 415 for a
    body sent in a type the endpoint cannot read, and JSON read strictly (app/core/strictjson.py)."""

    DEFAULT_VALIDATION_STATUS = 400

    def parse(self, argmap, req=None, *, location=None, **kwargs):
        if location in BODY_TYPES:
            refuse_unreadable_body(location)
        return super().parse(argmap, req, location=location, **kwargs)

    def _raw_load_json(self, req):
        # webargs' hook for reading a JSON body (its load_json calls it; webargs' docs name it for this): the
        # one name of webargs' with an underscore that Lantern overrides. tests/core/test_hostile_json.py
        # holds what it must refuse.
        if not is_json_request(req):
            return core.missing
        body = req.get_data(cache=True)
        if not body:
            return core.missing
        try:
            return strictjson.loads(body)
        except strictjson.InvalidJson as error:
            raise bad_request(f"The request body {error}.") from None


# What a body read from each location must be sent as; a body of any other type is never ignored.
BODY_TYPES = {"json": ("application/json",), "form": ("multipart/form-data", "application/x-www-form-urlencoded"),
              "files": ("multipart/form-data",)}


def refuse_unreadable_body(location):
    """415 unsupported_media_type for a body the endpoint cannot read as it was sent (a JSON body sent
    without its Content-Type would otherwise be taken for no body at all, and the defaults applied)."""
    expected = BODY_TYPES[location]
    if request.mimetype in expected or location == "json" and is_json_request(request):
        return
    if not (request.content_length or "chunked" in request.headers.get("Transfer-Encoding", "").lower()):
        return  # no body: nothing is ignored
    sent = request.mimetype or "no Content-Type"
    raise ApiError(415, "unsupported_media_type", f"This endpoint reads a body sent as {' or '.join(expected)}, "
                   f"not {sent}: send it with Content-Type: {expected[0]}.")


def as_dumped(value):
    """The answer of a view that wrote its response schema's dump itself, with a record function tested equal to
    it (the hot reads: docs/api.md, "Records"): sent as it is, not dumped again. The schema stays what the
    OpenAPI document shows."""
    return current_app.json.response(value)


class Blueprint(flask_smorest.Blueprint):
    ARGUMENTS_PARSER = ArgumentsParser()

    def arguments(self, schema, **kwargs):
        document = super().arguments(schema, **kwargs)
        if kwargs.get("location", "json") not in BODY_TYPES:  # flask-smorest's default location is json
            return document

        def decorator(func):  # refuse_unreadable_body's answer, in the OpenAPI document too
            return self.alt_response(415, response="UNSUPPORTED_MEDIA_TYPE")(document(func))
        return decorator


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
