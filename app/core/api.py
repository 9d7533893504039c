"""flask-smorest wired to the spec's error body and 400 for invalid input."""
import flask_smorest
from flask_smorest.arguments import ArgumentsMixin

from app.core.errors import ApiError, ErrorSchema, handle_http_exception


class ArgumentsParser(ArgumentsMixin.ARGUMENTS_PARSER.__class__):
    DEFAULT_VALIDATION_STATUS = 400

    def _handle_invalid_json_error(self, error, req, *args, **kwargs):
        raise ApiError(400, "bad_request", "The request body is not valid JSON.")


class Blueprint(flask_smorest.Blueprint):
    ARGUMENTS_PARSER = ArgumentsParser()


class Api(flask_smorest.Api):
    ERROR_SCHEMA = ErrorSchema

    def handle_http_exception(self, error):
        return handle_http_exception(error)
