"""Drivers provide the browser behind a session record.

A driver starts the browser for a new session and answers where clients reach it
(CDP and WebDriver BiDi WebSocket URLs, a live view), and stops it when the session
ends. Telemetry and log lines reach Lantern through app.browsers.telemetry.ingest and
app.browsers.logs.ingest: an in-process driver calls them directly, the external
driver's browser posts to the ingest endpoints.
"""
from dataclasses import dataclass
from typing import Protocol

from flask import current_app


@dataclass
class Endpoints:
    cdp_ws_url: str
    webdriver_ws_url: str
    live_view_url: str | None = None


class Driver(Protocol):
    name: str

    def start(self, session, settings: dict) -> Endpoints:
        """Provide the browser for `session` (configured by the create request's settings)."""

    def stop(self, session) -> None:
        """Release the browser of an ended session; must tolerate being called twice."""


class ExternalDriver:
    """The browser runs elsewhere: its endpoints come from the create request's `driver`
    settings or from configuration templates, and it reports through the ingest endpoints.
    It reads its configuration (viewport, location, network, ...) from GET /browsers/{id}."""

    name = "external"

    def start(self, session, settings):
        given = settings.get("driver") or {}
        config = current_app.config

        def endpoint(key, template):
            if given.get(key):
                return given[key]
            return template.format(session_id=session.id) if template else None

        return Endpoints(
            cdp_ws_url=endpoint("cdp_ws_url", config["BROWSER_EXTERNAL_CDP_WS_URL"]),
            webdriver_ws_url=endpoint("webdriver_ws_url", config["BROWSER_EXTERNAL_WEBDRIVER_WS_URL"]),
            live_view_url=endpoint("live_view_url", config["BROWSER_EXTERNAL_LIVE_VIEW_URL"]),
        )

    def stop(self, session):
        # Nothing runs here; the external browser learns of the end from its next ingest (409).
        pass


DRIVERS = {driver.name: driver for driver in (ExternalDriver(),)}


def driver_named(name):
    return DRIVERS[name]
