"""One log line per request, tagged with a request id that is echoed back."""
import logging
import time

from flask import g, request

from app.core.ids import new_id

logger = logging.getLogger("app.requests")


def init_app(app):
    if not logging.getLogger().handlers and not app.testing:
        logging.basicConfig(level=app.config["LOG_LEVEL"],
                            format="%(asctime)s %(levelname)s [%(process)d] %(name)s: %(message)s")

    @app.before_request
    def start_timer():
        g.request_id = request.headers.get("X-Request-Id", "")[:64] or new_id()
        g.request_started = time.perf_counter()

    @app.after_request
    def log_request(response):
        elapsed_ms = (time.perf_counter() - g.get("request_started", time.perf_counter())) * 1000
        response.headers["X-Request-Id"] = g.get("request_id", "")
        logger.info("%s %s %s %.1fms request_id=%s", request.method, request.path,
                    response.status_code, elapsed_ms, g.get("request_id"))
        return response
