"""One log line per request, tagged with a request id that is echoed back; log formats.

Paths, headers and exception texts come from clients, so a record can never span
lines of its own making: the text format escapes control characters in the message
and marks every further line of a record (a traceback) with "| "; the JSON format
(`LOG_FORMAT = "json"`, for log shippers behind a proxy) writes one object per line.
"""
import json
import logging
import random
import time
from datetime import datetime, timezone

from flask import g, request

from app.core import clock
from app.core.settings import settings
from app.core.text import CONTROLS

logger = logging.getLogger("app.requests")
TEXT_FORMAT = "%(asctime)s %(levelname)s [%(process)d] %(name)s: %(message)s"


def escape_controls(text):
    if text.isprintable():  # no control character (nor any other unprintable one): nothing to escape
        return text
    return CONTROLS.sub(lambda match: match.group().encode("unicode_escape").decode("ascii"), text)


class TextFormatter(logging.Formatter):
    def __init__(self):
        super().__init__(TEXT_FORMAT)
        self._second = (None, None)

    def usesTime(self):
        return True  # TEXT_FORMAT has the time; logging would search the format for it on every record

    def formatTime(self, record, datefmt=None):
        # logging's own text, with the date and time written once per second rather than per record.
        second, text = self._second
        if second != int(record.created):
            second = int(record.created)
            text = time.strftime(self.default_time_format, self.converter(second))
            self._second = (second, text)
        return self.default_msec_format % (text, record.msecs)

    def formatMessage(self, record):
        return escape_controls(super().formatMessage(record))

    def formatException(self, exc_info):
        return "\n".join("| " + escape_controls(line) for line in super().formatException(exc_info).splitlines())

    def formatStack(self, stack_info):
        return "\n".join("| " + escape_controls(line) for line in stack_info.splitlines())


class JsonFormatter(logging.Formatter):
    def format(self, record):
        entry = {"time": clock.isoformat(datetime.fromtimestamp(record.created, timezone.utc)),
                 "level": record.levelname, "process": record.process, "logger": record.name,
                 "message": record.getMessage()}
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)  # ASCII: escapes control characters and any unpaired surrogate


FORMATTERS = {"text": TextFormatter, "json": JsonFormatter}


def new_request_id():
    """24 hex digits. A request id names a log line and is no secret (a client may send its own),
    so it needs no system randomness, which costs a system call per request."""
    return f"{random.getrandbits(96):024x}"


def skip_unused_record_fields():
    """No record gathers what neither format writes: the calling file and line (a walk up the
    stack), thread and multiprocessing names. The switches are logging's own ("Optimization" in
    its HOWTO); they cost a tenth of a read's time in the access log line. Only for the logging
    Lantern sets up itself, whose formats are the ones above."""
    logging._srcfile = None
    logging.logThreads = False
    logging.logMultiprocessing = False


def init_app(app):
    if not logging.getLogger().handlers and not app.testing:
        handler = logging.StreamHandler()
        handler.setFormatter(FORMATTERS[settings(app).log_format]())
        logging.basicConfig(level=settings(app).log_level, handlers=[handler])
        skip_unused_record_fields()

    @app.before_request
    def start_timer():
        context = g._get_current_object()  # one lookup of the request's globals for both
        context.request_id = request.headers.get("X-Request-Id", "")[:64] or new_request_id()
        context.request_started = time.perf_counter()

    @app.after_request
    def log_request(response):
        context = g._get_current_object()
        request_id = context.get("request_id", "")
        elapsed_ms = (time.perf_counter() - context.get("request_started", time.perf_counter())) * 1000
        response.headers["X-Request-Id"] = request_id
        current = request._get_current_object()
        # A view that is called all the time by machines (g.log_quietly) is logged at DEBUG unless it failed.
        level = logging.DEBUG if context.get("log_quietly") and response.status_code < 400 else logging.INFO
        logger.log(level, "%s %s %s %.1fms request_id=%s", current.method, current.path,
                   response.status_code, elapsed_ms, request_id)
        return response
