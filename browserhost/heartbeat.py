"""This host's standing with the app: it registers (address, capacity, what it cannot do), then beats every few
seconds, saying which sessions run and which have CDP clients (they are active); the app answers which browsers to
stop (their session ended without this host being told) and each session's telemetry categories. Each beat also ends
the sessions that ran out of memory and forgets the CDP clients of workers that died.
"""
import logging
import threading
import time

from browserhost.uplink import AppUnreachable, Refused
from lantern_wire.hosts import HEARTBEAT, MAX_UNAVAILABLE_REASON, REGISTER
from lantern_wire.reports import Heartbeat, HeartbeatAnswer, InvalidShape, Registered, Registration, parse

logger = logging.getLogger(__name__)


class RegistrationRefused(Exception):
    """The app refuses this host's registration (its credential, or its answer is not one)."""


class Heartbeats:
    def __init__(self, settings, client, registry, starts, *, advertise, on_refused):
        """`client`: an uplink.AppClient; `registry`, `starts`: the host's; `on_refused(status)`: the app refuses this
        host's credential while it runs (revoked)."""
        self.settings, self.client, self.registry, self.starts = settings, client, registry, starts
        self.advertise, self.on_refused = advertise, on_refused
        self.seconds = 2.0  # between beats: the app says at registration

    def register(self):
        """Tell the app where this host is and what it takes, trying until the app answers (it may start after
        the host); the app ends what it still gives this host (its previous run's) and names it. False: the host
        stopped meanwhile; RegistrationRefused."""
        reason = self.starts.unavailable_reason()
        registration = Registration(address=self.advertise, capacity=0 if reason else self.registry.capacity,
                                    headful=self.starts.headful,
                                    unavailable_reason=reason and reason[:MAX_UNAVAILABLE_REASON])
        started, warned = time.monotonic(), False
        while not self.registry.shutting_down:  # each call waits and tries again itself (uplink.RETRY) for a while
            try:
                answer = parse(Registered, self.client.post(REGISTER, registration.to_dict()))
            except AppUnreachable as error:
                if not warned and time.monotonic() - started > 10:
                    logger.warning("the app at %s has not answered for 10 s (%s); still trying (LANTERN_APP_URL)",
                                   self.settings.app_url, error)
                    warned = True
                elif not warned:  # the app may be starting beside it (make run)
                    logger.info("waiting for the app at %s (%s)", self.settings.app_url, error)
                continue
            except (Refused, InvalidShape) as error:
                logger.error("the app refused this host's registration (%s): is LANTERN_BROWSER_HOST_CREDENTIAL the "
                             "one `flask browsers hosts add NAME` printed, and LANTERN_APP_URL the app's?", error)
                raise RegistrationRefused(str(error)) from None
            self.registry.name, self.seconds = answer.name, answer.heartbeat_seconds
            return True
        return False

    def start(self, stopped):
        """Beat in a thread of its own until `stopped` (a threading.Event) is set."""
        threading.Thread(target=self._loop, args=(stopped,), daemon=True, name="heartbeat").start()

    def _loop(self, stopped):
        away_since = None
        while not stopped.wait(self.seconds):
            try:
                self.registry.forget_dead_workers()
                self.registry.end_out_of_memory()
                self.beat()
                if away_since is not None:
                    logger.info("the app answers again (after %.0f s)", time.monotonic() - away_since)
                away_since = None
            except AppUnreachable as error:
                if away_since is None:  # once per outage, not every beat
                    logger.warning("heartbeat: the app does not answer (%s); trying on", error)
                    away_since = time.monotonic()
            except Refused as error:
                if error.status == 401:
                    self.on_refused(error.status)
                    return
                logger.error("heartbeat refused: %s", error)
            except Exception:  # noqa: BLE001 - nothing may end the heartbeat
                logger.exception("heartbeat failed")

    def beat(self):
        """One heartbeat and what its answer says: browsers to stop, each running session's categories (kept when
        newer than what the host has: registry.Registry.set_categories)."""
        running = self.registry.running()
        beat = Heartbeat(sessions=[h.session_id for h in running],
                         active=[h.session_id for h in running if h.connections])
        answer = parse(HeartbeatAnswer, self.client.post(HEARTBEAT, beat.to_dict()))
        for hosted in running:
            if hosted.session_id in answer.categories:
                self.registry.set_categories(hosted, answer.categories[hosted.session_id])
        for session_id in answer.stop:
            logger.warning("stopping the browser of session %s, which ended without this host being told", session_id)
            self.registry.stop_in_background(session_id)
