"""flask-smorest wired to the spec's error body and 400 for invalid input."""
import functools
import inspect

import flask_smorest
import marshmallow as ma
from flask import current_app, request
from flask_smorest.arguments import ArgumentsMixin
from flask_smorest.utils import resolve_schema_instance, set_status_and_headers_in_response, unpack_tuple_response
from webargs import core
from webargs.flaskparser import is_json_request
from webargs.multidictproxy import MultiDictProxy
from werkzeug import Response

from app.core import dumping, strictjson
from app.core.errors import ApiError, ErrorSchema, bad_request, handle_http_exception


class ArgumentsParser(ArgumentsMixin.ARGUMENTS_PARSER.__class__):
    DEFAULT_VALIDATION_STATUS = 400

    def parse(self, argmap, req=None, *, location=None, validate=None, **kwargs):
        if location in BODY_TYPES:
            refuse_unreadable_body(location)
        if (location == "query" and validate is None and self.unknown is UNKNOWN_DEFAULT
                and kwargs.get("unknown", UNKNOWN_DEFAULT) is UNKNOWN_DEFAULT):
            defaults = query_defaults(argmap)
            if defaults is not None:
                # Most reads carry no query string: what a schema loads from nothing is known.
                if not request.query_string:
                    return dict(defaults)
                loaded = self._load_present(argmap, defaults)
                if loaded is not None:
                    return loaded
        return super().parse(argmap, req, location=location, validate=validate, **kwargs)

    def _load_present(self, schema, defaults):
        """What `schema` loads from the query (webargs leaves out unknown keys) when it loads without
        an error: the defaults, and each field given deserialized as marshmallow's load does it; a
        schema with hooks has no defaults here, so nothing else would run. `?limit=20` on the API
        key list: 6 us, 20 through webargs and Schema.load here. An invalid value gives None:
        webargs parses again to report it."""
        by_key = query_fields(schema)
        if by_key is None:
            return None
        data = self.load_querystring(request, schema)
        loaded = dict(defaults)
        for key, raw in data.items():
            if key in by_key:
                attribute, field = by_key[key]
                try:
                    value = field.deserialize(raw, key, data)
                except ma.ValidationError:
                    return None
                if value is not ma.missing:
                    loaded[attribute] = value
        return loaded

    def load_querystring(self, req, schema):
        """The query's arguments as webargs' proxy gives them (a field taking several values gets
        the list, any other the first), in a dict: marshmallow asks the proxy for every field of the
        schema, and each one absent from the query made werkzeug build and catch a KeyError
        exception (seven on a list page)."""
        args = req.args
        multiple = multiple_keys(schema, tuple(self.KNOWN_MULTI_FIELDS))
        return {key: args.getlist(key) if key in multiple else args[key] for key in args}

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


@functools.cache
def multiple_keys(schema, known_multi_fields):
    """The query keys of `schema`'s fields that take several values (webargs' MultiDictProxy's rule)."""
    return frozenset(MultiDictProxy({}, schema, known_multi_fields).multiple_keys)


@functools.cache
def query_fields(schema):
    """Of each field `schema` loads, by the key it reads: (the key it loads into, the field); None
    when a field loads into a dotted path (marshmallow nests those)."""
    by_key = {}
    for name, field in schema.load_fields.items():
        attribute = field.attribute or name
        if "." in attribute:
            return None
        by_key[field.data_key if field.data_key is not None else name] = (attribute, field)
    return by_key


@functools.cache
def query_defaults(schema):
    """What `schema` loads from an empty query string, when that is the same on every request
    (no hooks, no load_default computed per load, nothing required); else None."""
    if (not isinstance(schema, ma.Schema) or any(schema._hooks.values())
            or any(callable(field.load_default) for field in schema.load_fields.values())):
        return None
    try:
        return schema.load({})
    except ma.ValidationError:
        return None


UNKNOWN_DEFAULT = core._UNKNOWN_DEFAULT_PARAM  # no `unknown` given: webargs leaves out a query's unknown keys
# webargs use_args options that Blueprint.arguments leaves to webargs' own wrapper.
USE_ARGS_OPTIONS = {"unknown", "as_kwargs", "arg_name", "validate", "error_status_code", "error_headers"}


class Blueprint(flask_smorest.Blueprint):
    ARGUMENTS_PARSER = ArgumentsParser()

    def arguments(self, schema, **kwargs):
        # Given a class, webargs builds a schema per request; one instance serves every request.
        schema = resolve_schema_instance(schema)
        document = super().arguments(schema, **kwargs)
        location = kwargs.get("location", "json")  # flask-smorest's default

        def decorator(func):
            documented = document(func)
            if location in BODY_TYPES:  # refuse_unreadable_body's answer
                documented = self.alt_response(415, response="UNSUPPORTED_MEDIA_TYPE")(documented)
            if set(kwargs) & USE_ARGS_OPTIONS or inspect.iscoroutinefunction(func):
                return documented

            @functools.wraps(documented)
            def parse_then_call(*args, **view_args):
                # webargs' and flask-smorest's wrappers in one, for the options all Lantern views use:
                # the parsed arguments follow the view's positional arguments.
                return func(*args, self.ARGUMENTS_PARSER.parse(schema, location=location), **view_args)
            return parse_then_call
        return decorator

    def response(self, status_code, schema=None, **kwargs):
        schema = resolve_schema_instance(schema)
        if isinstance(schema, ma.Schema):
            dumping.speed_up(schema)
        document = super().response(status_code, schema, **kwargs)

        def decorator(func):
            documented = document(func)
            if inspect.iscoroutinefunction(func):
                return documented

            @functools.wraps(documented)
            def respond(*args, **view_args):
                # flask-smorest's wrapper less what no Lantern view uses: a coroutine view, and the
                # dump it keeps in the request's globals for ETags; a few lookups of the request's
                # context fewer on every request.
                result, status, headers = unpack_tuple_response(func(*args, **view_args))
                if not isinstance(result, Response):
                    result = current_app.json.response(result if schema is None else schema.dump(result))
                    status = status_code if status is None else status
                set_status_and_headers_in_response(result, status, headers)
                return result
            return respond
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
