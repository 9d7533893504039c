"""Request and response shapes of invocations (contract 6.6)."""
import marshmallow as ma
from marshmallow import validate

from app.core import clock, strictjson
from app.core.fields import Choice, JsonBoolean, JsonInteger, UtcDateTime
from app.core.paging import PageArgsSchema
from app.core.timewindow import TimePoint
from app.invocations.models import FAILED, QUEUED, RUNNING, SUCCEEDED

STATUSES = [QUEUED, RUNNING, SUCCEEDED, FAILED]


def json_text(value):
    try:
        strictjson.loads(value)
    except strictjson.InvalidJson as error:
        raise ma.ValidationError(f"Must be a JSON document encoded as a string; this one {error}.") from None


class InvocationSchema(ma.Schema):
    id = ma.fields.String()
    app_name = ma.fields.String()
    action_name = ma.fields.String()
    version = ma.fields.String()
    status = ma.fields.String(metadata={"enum": STATUSES})
    status_reason = ma.fields.String(allow_none=True)
    payload = ma.fields.String(allow_none=True)
    output = ma.fields.String(allow_none=True)
    started_at = UtcDateTime(metadata={"description": "when the invocation was requested"})
    finished_at = UtcDateTime(allow_none=True)


def invocation_record(invocation_id, app_name, action_name, version, status, status_reason, payload, output,
                      started_at, finished_at):
    """InvocationSchema's dump of an invocation, from its values (a row of the invocation list's query, or an
    invocation): the hot reads skip marshmallow (tests/core/test_records.py holds them equal)."""
    return {"id": invocation_id, "app_name": app_name, "action_name": action_name, "version": version,
            "status": status, "status_reason": status_reason, "payload": payload, "output": output,
            "started_at": clock.isoformat(started_at),
            "finished_at": None if finished_at is None else clock.isoformat(finished_at)}


def invocation_record_of(invocation):
    return invocation_record(invocation.id, invocation.app_name, invocation.action_name, invocation.version,
                             invocation.status, invocation.status_reason, invocation.payload, invocation.output,
                             invocation.started_at, invocation.finished_at)


class InvocationCreateSchema(ma.Schema):
    app_name = ma.fields.String(required=True, validate=validate.Length(1, 255))
    action_name = ma.fields.String(required=True, validate=validate.Length(1, 255))
    version = ma.fields.String(required=True, validate=validate.Length(1, 255))
    payload = ma.fields.String(validate=[validate.Length(max=4_500_000), json_text],
                               metadata={"description": "a JSON document as a string (at most 4.5 MB)"})
    # `async` is a Python keyword; the attribute is `async` in the loaded dict all the same.
    is_async = JsonBoolean(data_key="async", attribute="async", load_default=False)
    async_timeout_seconds = JsonInteger(validate=validate.Range(10, 3600),
                                        metadata={"description": "async only; default 900"})

    @ma.validates_schema
    def timeout_needs_async(self, data, **kwargs):
        if data.get("async_timeout_seconds") is not None and not data["async"]:
            raise ma.ValidationError("async_timeout_seconds applies to async invocations only.",
                                     "async_timeout_seconds")


class InvocationUpdateSchema(ma.Schema):
    status = Choice([RUNNING, SUCCEEDED, FAILED], metadata={"description": "failed cancels; running is for the worker"})
    output = ma.fields.String(validate=json_text, metadata={"description": "a JSON document as a string"})
    status_reason = ma.fields.String(validate=validate.Length(1, 2000),
                                     metadata={"description": "Lantern: why it failed (default: cancelled)"})

    @ma.validates_schema
    def something_to_change(self, data, **kwargs):
        if "status" not in data and "output" not in data:
            raise ma.ValidationError("Give status and/or output.", "status")
        if "status_reason" in data and data.get("status") != FAILED:
            raise ma.ValidationError("status_reason goes with status failed.", "status_reason")


class InvocationListArgsSchema(PageArgsSchema):
    app_name = ma.fields.String()
    action_name = ma.fields.String()
    version = ma.fields.String()
    deployment_id = ma.fields.String(metadata={"description": "Lantern runs no deployments: matches nothing"})
    status = Choice(STATUSES)
    query = ma.fields.String(metadata={"description": "substring of app or action name; exact id"})
    since = TimePoint(metadata={"description": "RFC 3339 or a duration like 5m: invocations started since"})


class LogLineSchema(ma.Schema):
    message = ma.fields.String(required=True)
    timestamp = UtcDateTime(metadata={"description": "default: when Lantern receives it"})


class LogLinesSchema(ma.Schema):
    """One line (`message`) or several (`lines`)."""

    message = ma.fields.String()
    timestamp = UtcDateTime()
    lines = ma.fields.List(ma.fields.Nested(LogLineSchema), validate=validate.Length(1, 1000))

    @ma.post_load
    def as_lines(self, data, **kwargs):
        if ("message" in data) == ("lines" in data):
            raise ma.ValidationError("Give either message or lines.", "lines")
        return data.get("lines") or [{"message": data["message"], "timestamp": data.get("timestamp")}]


class LogsAcceptedSchema(ma.Schema):
    accepted = ma.fields.Integer()


class EventsArgsSchema(ma.Schema):
    since = TimePoint(metadata={"description": "replay stored log lines since (RFC 3339 or a duration like 5m)"})

