"""The one error body of spec part 7, for every non-2xx answer."""
import logging

import marshmallow as ma
from flask import jsonify, request
from peewee import DataError, DoesNotExist, IntegrityError
from werkzeug.exceptions import HTTPException

logger = logging.getLogger(__name__)

CODES_BY_STATUS = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    410: "gone",
    413: "payload_too_large",
    415: "unsupported_media_type",
    429: "rate_limited",
    500: "internal_error",
}
DEFAULT_MESSAGES = {
    404: "No route matches {request.method} {request.path}.",
    405: "{request.method} is not allowed on {request.path}.",
}
# Business-rule answers that a retry cannot change; the SDK retries 409s otherwise.
NO_RETRY = {"x-should-retry": "false"}


class DetailSchema(ma.Schema):
    code = ma.fields.String()
    message = ma.fields.String()
    field = ma.fields.String(metadata={"description": "Lantern: the request field at fault"})


class InnerErrorSchema(ma.Schema):
    code = ma.fields.String()
    message = ma.fields.String()


class ErrorSchema(ma.Schema):
    """Documents the error body; responses are built by `error_response`."""

    code = ma.fields.String(required=True, metadata={"description": "Stable snake_case code"})
    message = ma.fields.String(required=True)
    details = ma.fields.List(ma.fields.Nested(DetailSchema))
    inner_error = ma.fields.Nested(InnerErrorSchema)


class ApiError(Exception):
    """Raised anywhere below a view to answer with the error body."""

    def __init__(self, status, code, message, *, details=None, headers=None, inner_error=None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.headers = headers or {}
        self.inner_error = inner_error


def not_found(message, code="not_found"):
    return ApiError(404, code, message)


def project_not_found(ref=None):
    """Unknown, archived or deleted project (named by a header, a path or a key)."""
    what = f"Project {ref!r}" if ref else "Project"
    return ApiError(404, "project_not_found", f"{what} not found or inactive.")


def bad_request(message, field=None):
    details = [{"code": "invalid", "field": field, "message": message}] if field else None
    return ApiError(400, "bad_request", message, details=details)


def conflict(code, message, *, details=None, retry_after=None):
    """Every 409: the request conflicts with the state of what it names. Not worth repeating as it is (the SDKs'
    retry is off), unless `retry_after` seconds will change that state (then said in Retry-After)."""
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else NO_RETRY
    return ApiError(409, code, message, details=details, headers=headers)


def forbidden(message):
    return ApiError(403, "forbidden", message)


def error_response(status, code, message, *, details=None, headers=None, inner_error=None):
    body = {"code": code, "message": message, "details": details or []}
    if inner_error:
        body["inner_error"] = inner_error
    response = jsonify(body)
    response.status_code = status
    response.headers.update(headers or {})
    return response


def validation_details(messages, path=()):
    """Flatten webargs/marshmallow messages into one detail per field."""
    if isinstance(messages, dict):
        details = []
        for key, value in messages.items():
            # The first level is the request location (json, query, ...): not a field.
            inner = path if not path and key in ("json", "query", "form", "files", "headers") else path + (str(key),)
            details.extend(validation_details(value, inner))
        return details
    field = ".".join(p for p in path if p != "_schema")
    text = " ".join(str(m) for m in messages) if isinstance(messages, list) else str(messages)
    if text.startswith("Missing data"):
        code = "required"
    elif text.startswith("Unknown field"):
        code = "unknown_field"
    else:
        code = "invalid"
    detail = {"code": code, "message": text}
    if field:
        detail["field"] = field
    return [detail]


def handle_http_exception(error):
    data = getattr(error, "data", None) or {}
    headers = dict(error.get_headers()) if error.code == 405 else {}
    headers.pop("Content-Type", None)
    if "messages" in data:
        details = validation_details(data["messages"])
        summary = "; ".join(f"{d['field']}: {d['message']}" if "field" in d else d["message"] for d in details)
        return error_response(400, "bad_request", f"Invalid request: {summary}", details=details)
    code = CODES_BY_STATUS.get(error.code, "error")
    message = data.get("message")
    if not message:
        template = DEFAULT_MESSAGES.get(error.code)
        message = template.format(request=request) if template else error.description
    return error_response(error.code, code, message, headers=headers)


def register_error_handlers(app):
    @app.errorhandler(ApiError)
    def handle_api_error(error):
        return error_response(
            error.status, error.code, error.message,
            details=error.details, headers=error.headers, inner_error=error.inner_error,
        )

    @app.errorhandler(DoesNotExist)
    def handle_missing_row(error):
        return error_response(404, "not_found", "The requested resource does not exist.")

    @app.before_request
    def refuse_nul_characters():
        # Postgres text cannot hold NUL; refuse it up front, the same on every database (JSON
        # bodies: app/core/strictjson.py). The raw query string: "%00" is the only way to
        # write NUL in it, and checking the text spares parsing it on every request.
        current = request._get_current_object()  # one lookup of the request for both reads
        query = current.environ.get("QUERY_STRING", "")
        if "\x00" in current.path or "%00" in query or "\x00" in query:
            return error_response(400, "bad_request", "NUL characters are not allowed.")

    @app.errorhandler(DataError)
    def handle_data_error(error):
        # A value the database cannot store (out of range, NUL in text): the caller's input.
        logger.info("data error turned into 400: %s", error)
        return error_response(400, "bad_request", "A value is out of range or holds characters the database "
                                                  "cannot store.")

    @app.errorhandler(IntegrityError)
    def handle_integrity_error(error):
        logger.info("integrity error turned into 409: %s", error)
        return error_response(409, "conflict", "The request conflicts with existing data.", headers=NO_RETRY)

    @app.errorhandler(Exception)
    def handle_unexpected(error):
        if isinstance(error, HTTPException):
            return handle_http_exception(error)
        logger.exception("unhandled error")
        return error_response(500, "internal_error", "The server hit an unexpected error.")
