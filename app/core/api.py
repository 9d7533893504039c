"""flask-smorest wired to the spec's error body and 400 for invalid input."""
import json

import flask_smorest
from flask_smorest.arguments import ArgumentsMixin
from webargs import core
from webargs.flaskparser import is_json_request

from app.core.errors import ApiError, ErrorSchema, handle_http_exception


def _refuse_constant(name):
    raise json.JSONDecodeError(f"{name} is not a JSON number", name, 0)


class ArgumentsParser(ArgumentsMixin.ARGUMENTS_PARSER.__class__):
    DEFAULT_VALIDATION_STATUS = 400

    def _raw_load_json(self, req):
        # Python's parser takes NaN and Infinity, which no JSON client could read back.
        if not is_json_request(req):
            return core.missing
        return json.loads(req.get_data(cache=True), parse_constant=_refuse_constant)

    def _handle_invalid_json_error(self, error, req, *args, **kwargs):
        raise ApiError(400, "bad_request", "The request body is not valid JSON.")


class Blueprint(flask_smorest.Blueprint):
    ARGUMENTS_PARSER = ArgumentsParser()


class Api(flask_smorest.Api):
    ERROR_SCHEMA = ErrorSchema

    def handle_http_exception(self, error):
        return handle_http_exception(error)
