"""Drivers provide the browser behind a session record.

A driver chooses where a new session's browser runs (inside the admission transaction),
starts it and answers where clients reach it (CDP and WebDriver BiDi WebSocket URLs, a
live view), and stops it when the session ends. Telemetry and log lines reach Lantern
through app.browsers.telemetry.ingest and app.browsers.logs.ingest: the host driver's
hosts capture them, the external driver's browser posts to the ingest endpoints.
"""
import logging
import time
from dataclasses import dataclass
from typing import Protocol

import marshmallow as ma

from app.browsers import hosts
from app.browsers.host_client import HostClient, HostError
from app.browsers.host_errors import HOST_DID_NOT_TAKE, api_error
from app.browsers.models import ENDED_BY_LAUNCH_FAILURE, BrowserSession
from app.browsers.telemetry_settings import session_categories
from app.core.db import exclusive
from app.core.errors import ApiError
from app.core.settings import settings as app_settings
from app.extensions.models import Extension
from app.profiles.models import Profile, save_profile_state
from lantern_wire import control

logger = logging.getLogger(__name__)
# How many hosts a create tries: the one placed, then others with room when one took nothing.
MAX_START_ATTEMPTS = 3
# A host gives up a start at the deadline it is given and answers why; the app waits this much longer for that.
ANSWER_SECONDS = 10
# How long a host that did not answer a start is given to hear that it should drop it.
ABANDON_SECONDS = 5
# Another host is tried only with this much of the create's BROWSER_HOST_START_SECONDS left (a start given less
# seldom succeeds on a busy machine).
MIN_START_SECONDS = 5


@dataclass
class Endpoints:
    cdp_ws_url: str
    webdriver_ws_url: str
    live_view_url: str | None = None


class Driver(Protocol):
    name: str

    def refuse_unsupported(self, args: dict, *, update: bool) -> None:
        """400 naming each create (or PATCH) field given that this driver cannot apply."""

    def place(self, session, settings: dict) -> None:
        """Reserve where the browser runs, inside the admission transaction (raise ApiError to refuse)."""

    def start(self, session, settings: dict) -> Endpoints:
        """Provide the browser for `session` (configured by the create request's settings)."""

    def cdp_ws_url(self, session) -> str:
        """The CDP URL the session's record shows."""

    def live_view_url(self, session, cdp_ws_url) -> str | None:
        """The live view URL the session's record shows (for headful sessions), if any; `cdp_ws_url` is the
        record's (cdp_ws_url(session))."""

    def stop(self, session) -> None:
        """Release the browser of an ended session; must tolerate being called twice."""

    def telemetry_changed(self, session) -> None:
        """The session's telemetry settings changed (a PATCH): its browser's capture follows."""

    def resize(self, session, viewport: dict, *, force: bool) -> None:
        """Give the running browser `viewport` ({width, height}), starting it again only when `force`; ApiError
        when it cannot (then nothing changed, or the session ended)."""

    def load_profile(self, session, profile) -> None:
        """Give the running browser `profile`'s state (cookies, localStorage); ApiError when it cannot."""


class ExternalDriver:
    """The browser runs elsewhere: its endpoints come from the create request's `driver`
    settings or from configuration templates, and it reports through the ingest endpoints.
    It reads its configuration (viewport, location, network, ...) from GET /browsers/{id}."""

    name = "external"

    def refuse_unsupported(self, args, *, update):
        pass  # the external browser reads every setting from the record and applies what it can

    def place(self, session, settings):
        pass

    def start(self, session, settings):
        given = settings.get("driver") or {}
        config = app_settings()

        def endpoint(key, template):
            if given.get(key):
                return given[key]
            return template.format(session_id=session.id) if template else None

        return Endpoints(
            cdp_ws_url=endpoint("cdp_ws_url", config.browser_external_cdp_ws_url),
            webdriver_ws_url=endpoint("webdriver_ws_url", config.browser_external_webdriver_ws_url),
            live_view_url=endpoint("live_view_url", config.browser_external_live_view_url),
        )

    def cdp_ws_url(self, session):
        return session.cdp_ws_url

    def live_view_url(self, session, cdp_ws_url):
        return session.live_view_url

    def stop(self, session):
        # Nothing runs here; the external browser learns of the end from its next ingest (409).
        pass

    def telemetry_changed(self, session):
        pass  # the ingest keeps only what the settings keep; the browser reads them from the record

    def resize(self, session, viewport, *, force):
        pass  # the browser reads its viewport from the record

    def load_profile(self, session, profile):
        pass  # the browser reads its profile from the record


class HostDriver:
    """A real Chromium on a browser host (app/browsers/hosts.py, browserhost/).

    Clients reach it only through this server's CDP relay, /browsers/{id}/cdp, with the
    session's token in the URL (or a bearer key). The host is told everything it needs
    (settings, the profile's state; extensions by their archive's hash, which it fetches from the
    internal API once), so it needs none of this server's files; the profile's state comes back
    when the session ends with save_changes.
    """

    name = "host"
    # Create options a host cannot apply (given with a value that asks for something), and what a
    # PATCH cannot change in a running browser.
    UNSUPPORTED_ON_CREATE = {"gpu": "GPUs", "video_memory": "video memory", "vaults": "credential vaults"}
    UNSUPPORTED_ON_UPDATE = {"location": "a new location", "network": "a new network allowlist",
                             "start_url": "a new start_url"}

    def refuse_unsupported(self, args, *, update):
        unsupported = self.UNSUPPORTED_ON_UPDATE if update else self.UNSUPPORTED_ON_CREATE
        given = [field for field in unsupported if args.get(field) not in (None, False, {}, [])]
        if given:
            when = " to a running browser" if update else ""
            what = ", ".join(unsupported[field] for field in given)
            raise ApiError(400, "bad_request", f"Lantern's browser hosts cannot apply {what}{when}: leave "
                           f"{', '.join(given)} out.",
                           details=[{"code": "unsupported", "field": field,
                                     "message": f"Not applied by the host driver{when}."} for field in given])

    def place(self, session, settings):
        session.host = hosts.place(headful=not session.headless)

    def start(self, session, settings):
        spec = browser_spec(session, settings)
        profile_state = Profile.get_by_id(session.profile_id).state() if session.profile_id else None
        hosts.new_cdp_token(session)  # saved with the endpoints
        # One deadline for the whole create, whatever host starts it: the SDKs give up on a create at 60 s and send
        # it again, and a first that went on would start a browser its client never hears of.
        deadline = time.monotonic() + app_settings().browser_host_start_seconds
        tried = []
        while True:
            left = deadline - time.monotonic()
            try:
                HostClient(session.host).start(control.StartRequest.of(
                    spec, session_id=session.id, profile_state=profile_state, categories=categories(session),
                    start_seconds=round(left, 2)), timeout=left + ANSWER_SECONDS)
                break
            except HostError as error:
                logger.warning("browser host %s did not start session %s: %s", session.host.name, session.id, error)
                tried.append(session.host)
                if error.status is None and error.reached:
                    self._abandon(session.host, session)
                if not (self._elsewhere(error) and len(tried) < MAX_START_ATTEMPTS
                        and deadline - time.monotonic() >= MIN_START_SECONDS and self._move(session, tried)):
                    raise api_error(error) from None
        base = f"{hosts.public_ws_base()}/browsers/{session.id}"
        return Endpoints(cdp_ws_url=f"{base}/cdp", webdriver_ws_url=f"{base}/webdriver")

    @staticmethod
    def _elsewhere(error):
        """Whether another host may start what this one did not: it took nothing (no connection was made, or it said
        so). One that had the request and did not answer may still start it, and is only told to drop it."""
        return not error.reached or error.code in HOST_DID_NOT_TAKE

    @staticmethod
    def _move(session, tried):
        """Place the session on another host with room than those `tried`; False when there is none (or the session
        ended meanwhile)."""
        try:
            with exclusive(session):
                host = hosts.place(headful=not session.headless, excluding={host.id for host in tried})
                moved = BrowserSession.update(host=host).where(
                    (BrowserSession.id == session.id) & BrowserSession.deleted_at.is_null()).execute()
        except ApiError:
            return False
        if moved:
            session.host = host
        return bool(moved)

    @staticmethod
    def _abandon(host, session):
        """A host that did not answer a start may start the browser all the same: it is told to stop it. If it does
        not hear that either, its heartbeat's answer stops it (the session is no longer its)."""
        try:
            HostClient(host).stop(session.id, save=False, timeout=ABANDON_SECONDS)
        except HostError as error:
            logger.info("browser host %s was not told to drop session %s (its heartbeat will): %s", host.name,
                        session.id, error)

    def cdp_ws_url(self, session, target_path=""):
        """The relay's URL for the browser, or for one of its targets, with the session's token."""
        token = hosts.cdp_token(session)
        return f"{session.cdp_ws_url}{target_path}" + (f"?token={token}" if token else "")

    def live_view_url(self, session, cdp_ws_url):
        """The live view page (app/browsers/live_view.py) beside the relay, with the same token (decrypted once,
        for cdp_ws_url): ws(s)://.../browsers/{id}/cdp?token= becomes http(s)://.../browsers/{id}/live?token=."""
        base, _, query = cdp_ws_url.partition("?")
        return "http" + base.removesuffix("/cdp")[2:] + "/live" + (f"?{query}" if query else "")

    def stop(self, session):
        if session.host_id is None or session.end_reason == ENDED_BY_LAUNCH_FAILURE:
            return  # its start left the host nothing to stop, or told it to drop what it may start (within the create)
        save = session.profile_save_changes and session.profile_id is not None
        try:
            answer = HostClient(session.host).stop(session.id, save=save,
                                                   timeout=app_settings().browser_host_start_seconds)
        except HostError as error:
            if error.status != 404:  # 404: the host no longer runs it (restarted, or stopped twice)
                logger.warning("browser host could not stop session %s: %s", session.id, error)
            return
        if save and answer.profile_state is not None:
            try:
                save_profile_state(session.profile_id, answer.profile_state)
            except ma.ValidationError as error:  # the profile keeps its state: the session ends all the same
                logger.warning("browser host sent a profile state of session %s that is not one: %s", session.id,
                               error.messages)

    def telemetry_changed(self, session):
        """The host's capture turns categories on and off at once (its heartbeat also carries them)."""
        if session.host_id is None:
            return
        try:
            HostClient(session.host).set_categories(session.id, categories(session))
        except HostError as error:
            logger.info("the host of session %s did not take its new categories (its heartbeat will): %s",
                        session.id, error)

    def resize(self, session, viewport, *, force):
        """The host resizes the browser's windows, or starts it again on a larger screen when `force` allows it
        (it has up to BROWSER_HOST_START_SECONDS for that start, after reading the browser's tabs and storage)."""
        start_seconds = app_settings().browser_host_start_seconds
        change = control.ViewportChange(width=viewport["width"], height=viewport["height"], restart=force,
                                        start_seconds=start_seconds)
        try:
            HostClient(session.host).change_viewport(session.id, change, timeout=start_seconds + 2 * ANSWER_SECONDS)
        except HostError as error:
            raise api_error(error) from None

    def load_profile(self, session, profile):
        try:
            HostClient(session.host).load_profile(session.id, control.ProfileLoad(profile_state=profile.state()),
                                                  timeout=ANSWER_SECONDS * 3)
        except HostError as error:
            raise api_error(error) from None


def browser_spec(session, settings):
    """What the session's browser needs (lantern_wire.control.BrowserSpec), from its record and create settings."""
    return control.BrowserSpec(
        headless=session.headless, stealth=session.stealth, memory=session.memory,
        viewport=settings.get("viewport") or control.DEFAULT_VIEWPORT, location=_location(settings.get("location")),
        start_url=settings.get("start_url"), kiosk_mode=bool(settings.get("kiosk_mode")),
        chrome_policy=settings.get("chrome_policy"), allowed_hosts=(settings.get("network") or {}).get("allowed_hosts"),
        extensions=[_archive(extension_id) for extension_id in settings.get("extensions", [])])


def categories(session):
    """The telemetry categories the host's capture of `session` produces, at the record's revision of them (a host
    keeps the newest revision it is told, by this call, the start or its heartbeat's answer)."""
    return control.Categories(revision=session.options.get("telemetry_revision", 0),
                              names=session_categories(session))


def _location(location):
    location = location or {}
    return control.Location(timezone=location.get("timezone"), locale=location.get("locale"))


def _archive(extension_id):
    """The extension by its archive's hash: the host fetches the archive once (GET EXTENSIONS/<sha256>) and keeps it."""
    extension = Extension.get_by_id(extension_id)
    return control.ExtensionRef(id=extension.id, sha256=extension.checksum)


DRIVERS = {driver.name: driver for driver in (ExternalDriver(), HostDriver())}


def driver_named(name):
    return DRIVERS[name]
