"""What a browser host tells the app over its internal API (lantern_wire/hosts.py has the paths, the limits and
how the credential authorises it), as both sides speak it: the host builds these shapes, the app checks a body
with them, and a refusal names the field.

    POST REGISTER    Registration -> Registered
    POST HEARTBEAT   Heartbeat -> HeartbeatAnswer
    POST REPORTS     {"reports": [report, ...]} -> ReportResults; each report (TelemetryReport, LogsReport,
                     ActivityReport, EndedReport) is checked alone: a malformed one is refused alone, the others
                     are applied (a host must not lose a session's telemetry for one bad line)
    PUT  REPLAYS/{replay_id}?ReplayUpload   the recording's MP4 as the body, or none with `error`
    GET  EXTENSIONS/{sha256}                an extension's zip archive, by its content hash

Lone UTF-16 surrogates (JSON carries "\\ud800"; a page's JavaScript makes them) become U+FFFD in the bounded
texts before they are checked, as the app would store them; free texts (a log line, an event) pass as they are.
"""
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints, TypeAdapter, ValidationError

from lantern_wire.control import Categories
from lantern_wire.hosts import API_PREFIX, HOST_END_REASONS, MAX_REPORT_ITEMS, MAX_REPORT_LINES, MAX_UNAVAILABLE_REASON

# An extension's zip archive, by the SHA-256 of its content (GET EXTENSIONS/<hex digest>).
EXTENSIONS = f"{API_PREFIX}/extensions"
MAX_INT64 = 2**63 - 1
MAX_UNIX_SECONDS = 253402300799  # 9999-12-31T23:59:59Z, the last second a datetime holds
# Of a recording's error, what a host sends (the app keeps 500 characters).
MAX_UPLOAD_ERROR = 500
LOG_SOURCES = ("path", "supervisor")


def _without_surrogates(value):
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return value


def _text(**constraints):
    return Annotated[str, BeforeValidator(_without_surrogates), StringConstraints(strict=True, **constraints)]


SessionId = _text(pattern=r"^[a-z0-9]{1,64}$")  # app.core.ids.new_id's, and room to spare
Batch = Annotated[int, Field(strict=True, gt=0, le=MAX_INT64)]
UnixSeconds = Annotated[float, Field(ge=0, le=MAX_UNIX_SECONDS, allow_inf_nan=False)]


class Wire(BaseModel):
    def to_dict(self):
        """The JSON-ready dict, without what is None (no count of lost events: none were lost)."""
        return self.model_dump(exclude_none=True)


class Shape(Wire):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Answer(Wire):
    """What the app answers: a host ignores fields it does not know, so an app newer than it still serves it."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class Registration(Shape):
    address: Annotated[str, StringConstraints(strict=True, max_length=255)]  # the app checks it is plain http
    capacity: Annotated[int, Field(strict=True, ge=0, lt=2**31)]
    headful: Annotated[bool, Field(strict=True)]
    unavailable_reason: _text(max_length=MAX_UNAVAILABLE_REASON) | None = None  # None: it can start browsers


class Registered(Answer):
    name: str
    heartbeat_seconds: float = Field(gt=0)


SessionIds = Annotated[list[SessionId], Field(max_length=MAX_REPORT_ITEMS)]


class Heartbeat(Shape):
    sessions: SessionIds  # running
    active: SessionIds  # with CDP clients


class HeartbeatAnswer(Answer):
    stop: list[str] = []  # sessions that ended without this host being told
    categories: dict[str, Categories] = {}  # each running session's telemetry categories, at their revision


class TelemetryReport(Shape):
    kind: Literal["telemetry"] = "telemetry"
    session_id: SessionId
    batch: Batch
    # Each checked by the app against lantern_wire.telemetry's catalogue: one it refuses is counted, not fatal.
    events: Annotated[list[dict[str, Any]], Field(max_length=MAX_REPORT_LINES)]
    lost: Annotated[int, Field(strict=True, ge=0, lt=2**31)] | None = None  # events dropped since its last report


class LogLine(Shape):
    message: Annotated[str, Field(strict=True)]


class LogsReport(Shape):
    kind: Literal["logs"] = "logs"
    session_id: SessionId
    batch: Batch
    source: Literal[LOG_SOURCES]
    log_name: _text(min_length=1, max_length=255)
    lines: Annotated[list[LogLine], Field(max_length=MAX_REPORT_LINES)]


class ActivityReport(Shape):
    kind: Literal["activity"] = "activity"
    session_id: SessionId


class EndedReport(Shape):
    kind: Literal["ended"] = "ended"
    session_id: SessionId
    reason: Literal[HOST_END_REASONS]


Report = Annotated[TelemetryReport | LogsReport | ActivityReport | EndedReport, Field(discriminator="kind")]
_REPORT = TypeAdapter(Report)


class ReportsRequest(Shape):
    """The envelope: its reports are checked one by one (parse_report), after the request's size (items)."""

    reports: Annotated[list[Any], Field(strict=True)]

    def items(self):
        """Reports plus their events and lines (each costs the app work): at most MAX_REPORT_ITEMS a request."""
        return len(self.reports) + sum(len(report[key]) for report in self.reports if isinstance(report, dict)
                                       for key in ("events", "lines") if isinstance(report.get(key), list))


class ReportResult(Answer):
    """{"status": "ok", ...counts}, "ended" (nothing more of the session is kept) or "refused" (and why)."""

    status: Literal["ok", "ended", "refused"]
    message: str | None = None
    accepted: int | None = None
    dropped: int | None = None
    last_seq: int | None = None


class ReportResults(Answer):
    results: list[ReportResult]


class ReplayUpload(Shape):
    """A recording's query: when it started and ended (Unix seconds), and why there is no video, if there is none."""

    started_at: UnixSeconds
    finished_at: UnixSeconds
    error: Annotated[str, StringConstraints(max_length=2000)] | None = None

    def query(self):
        times = {"started_at": f"{self.started_at:.6f}", "finished_at": f"{self.finished_at:.6f}"}
        return times if self.error is None else {**times, "error": self.error}


class InvalidShape(ValueError):
    """A body that is not the shape: `field` names the first wrong field (a dotted path, "" for the whole body)."""

    def __init__(self, error: ValidationError, skip=0):
        first = error.errors(include_url=False)[0]
        self.field = ".".join(str(part) for part in first["loc"][skip:])
        self.problems = [(".".join(str(part) for part in problem["loc"][skip:]), problem["msg"])
                         for problem in error.errors(include_url=False)]
        super().__init__("; ".join(f"{field}: {message}" if field else message for field, message in self.problems))


def parse(shape, data):
    """`data` (parsed JSON) as `shape`; InvalidShape naming the field."""
    try:
        return shape.model_validate(data)
    except ValidationError as error:
        raise InvalidShape(error) from None


def parse_report(data):
    """One report of the envelope; InvalidShape naming its field (not the kind's tag pydantic puts first)."""
    try:
        return _REPORT.validate_python(data)
    except ValidationError as error:
        tagged = isinstance(data, dict) and error.errors()[0]["loc"][:1] == (data.get("kind"),)
        raise InvalidShape(error, skip=1 if tagged else 0) from None
