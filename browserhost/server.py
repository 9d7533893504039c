"""The browser host: a program of its own (`python -m browserhost`) that owns Chromium processes.

It holds no database access and imports nothing of the app: it registers (address, capacity) and
heart-beats through the app's internal API with its own credential (heartbeat.py), and sends what its browsers
report there (uplink.py; lantern_wire/hosts.py and reports.py have the contract). Workers place sessions on it and
call its control API (control.py), authorised by the key derived from that credential.

This module wires the host's rooms together and runs it: the registry of running browsers and their ends
(registry.py), their starts (starts.py), changes to a running one and the computer API (running.py), recordings
(recordings.py), the heartbeat (heartbeat.py) and the extension archives (extension_cache.py).

Plain threads (ControlServer, a ThreadingHTTPServer): a host is not a gunicorn worker; what one session's calls
to its agent can hold of them is bounded (browserhost/agent_forward.py). Each browser lives
in its own folder, <BROWSER_HOST_DIR>/<host name>/sessions/<id>/, which is also the
registry: after a crash (`kill -9`), the next start kills the process groups recorded
there and removes the folders, and its registration ends the sessions the app still gives it.
A host holds its credential and then its folder (host_folder.py) while it runs: a second host with the
same credential exits (status 5) before registering, one for the same folder before sweeping anything.

Each browser also has a capture (capture/): the host's own CDP connection turns what the
browser does into telemetry events, and a tail of Chromium's output into log lines
(`source=supervisor`, `supervisor_process=chromium`); both are reported to the app, which
archives them as its ingest endpoints do (workers' streams catch up from the archive), in
batches, and neither counts as activity.
"""
import logging
import os
import signal
import threading
import time
from http.server import ThreadingHTTPServer

from browserhost import agents, host_folder, launch, sandbox_policy
from browserhost.control import ControlHandler
from browserhost.extension_cache import ExtensionCache
from browserhost.heartbeat import Heartbeats, RegistrationRefused
from browserhost.recordings import Recordings
from browserhost.registry import Registry, remove
from browserhost.running import RunningChanges
from browserhost.starts import Starts
from browserhost.uplink import AppUnreachable, Refused, Reports
from lantern_wire.hosts import ENDED_BY_HOST_STOP, STOPPED, control_key

logger = logging.getLogger(__name__)
# The host's exit status when the app refuses its credential (revoked): starting it again would not help.
CREDENTIAL_REFUSED = 4
# ... when another host runs on its folder (<BROWSER_HOST_DIR>/<name>) or with its credential: it would only
# refuse again.
FOLDER_IN_USE = 5
# How long a stopping host waits for the app to take what its browsers reported last.
FINAL_REPORTS_SECONDS = 10
# How long past a start's deadline a stopping host waits for it to tear down what it made.
START_TEARDOWN_SECONDS = 15


class ControlServer(ThreadingHTTPServer):
    """The control API's server: a thread per connection, none keeping the host from exiting."""

    daemon_threads = True
    # Connections queued before a thread takes each (socketserver's default is 5): a burst of calls (workers
    # starting sessions, a tenant's fire-and-forget calls) would otherwise have the rest's SYNs dropped and resent.
    request_queue_size = 128


class BrowserHostServer:
    def __init__(self, settings, client, *, bind, advertise, capacity):
        """`settings`: browserhost.settings.load(); `client`: an uplink.AppClient with this host's credential,
        from which the key the app calls this host with is derived too."""
        self.settings, self.client, self.bind, self.advertise = settings, client, bind, advertise
        self.control_key = control_key(client.credential)
        self.reports = Reports(client, limit=settings.browser_host_report_queue, on_refused=self.refused)
        # Its own folder in BROWSER_HOST_DIR is named at registration.
        self.registry = Registry(settings.browser_host_dir, self.reports, capacity)
        self.starts = Starts(settings, self.registry)
        self.running = RunningChanges(self.registry, self.starts)
        self.recordings = Recordings(self.registry, client)
        # What the control API's threads may spend waiting on sessions' agents, over all sessions (agents.py).
        self.forwards = agents.Slots(capacity * agents.CALLS_PER_SESSION)
        self.heartbeats = Heartbeats(settings, client, self.registry, self.starts, advertise=advertise,
                                     on_refused=self.refused)
        self.stopped = threading.Event()
        self.exit_status = 0
        self.httpd = None
        # The descriptors holding this host's credential and folder (host_folder.py), open while it runs.
        self.credential_lock = self.folder_lock = None

    def run(self):
        """Serve until SIGTERM or SIGINT (or the app refuses this host's credential); then stop every browser
        and end their sessions; the exit status. The port is taken first: a host whose port is in use
        (OSError) touches nothing of the one that holds it."""
        self.httpd = ControlServer(self.bind, self.handler_class())
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: threading.Thread(target=self.shutdown, daemon=True).start())
        try:
            return self._serve()
        finally:
            self.httpd.server_close()
            for descriptor in (self.folder_lock, self.credential_lock):
                if descriptor is not None:
                    os.close(descriptor)
            self.credential_lock = self.folder_lock = None

    def _serve(self):
        starts, registry = self.starts, self.registry
        if starts.policy is None:
            logger.warning("BROWSER_SANDBOX is off: every browser runs as this host's user (%s), on its files and "
                           "network, and any user of a session can reach them (docs/browsers.md, Isolation)",
                           os.geteuid())
        else:
            starts.cannot_sandbox = sandbox_policy.probe(starts.policy)
            for missing in starts.cannot_sandbox:
                logger.error("cannot sandbox browsers: %s", missing)
        try:
            # Before registering: the app ends the sessions of a host that registers, which would be those of
            # another host running with this credential.
            self.credential_lock = host_folder.hold_credential(registry.root, self.client.credential)
        except host_folder.FolderInUse as error:
            return self.refuse_credential(error)
        try:
            if not self.heartbeats.register():
                return self.exit_status
        except RegistrationRefused:
            self.exit_status = CREDENTIAL_REFUSED
            return self.exit_status
        registry.root = registry.root / registry.name
        try:
            self.folder_lock = host_folder.hold(registry.root)  # before anything of the folder is swept
        except host_folder.FolderInUse as error:
            return self.refuse_folder(error)
        (registry.root / "sessions").mkdir(parents=True, exist_ok=True)
        starts.extensions = ExtensionCache(registry.root / "extensions", self.client,
                                           self.settings.browser_extension_cache_mb << 20)
        self.clean_up_after_crash()
        (registry.root / "replays").mkdir(exist_ok=True)
        self.reports.start()
        self.heartbeats.start(self.stopped)
        logger.info("browser host %s serving on %s (capacity %s, chromium %s, headful %s)", registry.name,
                    self.advertise, registry.capacity, starts.binary or "MISSING", starts.headful)
        self.httpd.serve_forever(poll_interval=0.2)
        self.stopped.wait()
        return self.exit_status

    def clean_up_after_crash(self):
        """Kill the process groups a previous run left (recorded in each session folder) and remove the folders,
        and the recordings it had not handed on (their sessions ended host_restarted, their replays failed)."""
        policy = self.starts.policy
        for record, what in launch.kill_leftovers(self.registry.root / "sessions", policy and policy.root):
            logger.warning("removed %s left by a previous run (%s)", record, what)
        remove(self.registry.root / "replays")

    def shutdown(self):
        # Once, whatever the number of signals (Ctrl-C reaches the host, then make run's trap sends
        # SIGTERM): a second pass would let run() return while the first still stops browsers.
        registry = self.registry
        with registry.lock:
            if registry.shutting_down:
                return
            registry.shutting_down = True
        try:
            for session_id in list(registry.hosted):
                registry.stop_browser(session_id, save=False, reason=ENDED_BY_HOST_STOP)
            self.wait_for_starts()
            if registry.name is not None and not self.exit_status:
                self.reports.stop(FINAL_REPORTS_SECONDS)
                self.client.post(STOPPED, {})
        except (AppUnreachable, Refused) as error:
            logger.warning("could not tell the app this host stopped (%s): it finds out when heartbeats stop", error)
        finally:
            self.httpd.shutdown()
            self.stopped.set()

    def wait_for_starts(self):
        """Starts and restarts under way (only marked by the stop) end what they made once their step returns, within
        their start deadline: the host exits after that, or their sandboxes (namespace, cgroup, mounts) would stay."""
        registry = self.registry
        with registry.lock:
            deadlines = [hosted.start_deadline for hosted in registry.hosted.values()]
        until = max([time.monotonic(), *deadlines]) + START_TEARDOWN_SECONDS
        while registry.hosted:  # each leaves it at the end of its teardown
            if time.monotonic() > until:
                logger.warning("stopping with %s session(s) still being torn down: the host's next start removes "
                               "what they leave", len(registry.hosted))
                return
            time.sleep(0.05)

    def refuse_folder(self, in_use):
        """Another host runs on this host's folder: this one stops at once, touching nothing of it; its app is told
        (it registered), so that it places nothing here."""
        logger.error("another browser host (pid %s) runs on %s: stop it, or give this host a folder of its own "
                     "(LANTERN_BROWSER_HOST_DIR) or another name (flask browsers hosts add NAME)",
                     in_use.pid or "unknown", in_use.folder)
        self.exit_status = FOLDER_IN_USE
        try:
            self.client.post(STOPPED, {})
        except (AppUnreachable, Refused) as error:
            logger.warning("could not tell the app this host stopped (%s)", error)
        return self.exit_status

    def refuse_credential(self, in_use):
        """Another host runs with this host's credential: this one stops before registering, telling the app
        nothing (the other is the live one)."""
        logger.error("another browser host (pid %s) runs with this host's credential (it holds %s): stop it, or give "
                     "this host a credential of its own (flask browsers hosts add NAME)", in_use.pid or "unknown",
                     in_use.lock)
        self.exit_status = FOLDER_IN_USE
        return self.exit_status

    def refused(self, status):
        """The app refuses this host's credential (revoked): nothing it runs can be reported; it stops."""
        logger.error("the app refuses this host's credential (HTTP %s: revoked?); stopping every browser. Add the "
                     "host again (flask browsers hosts add NAME --address URL --replace) and start it with the new "
                     "credential.",
                     status)
        self.exit_status = CREDENTIAL_REFUSED
        threading.Thread(target=self.shutdown, daemon=True).start()

    def handler_class(self):
        server = self

        class Handler(ControlHandler):
            host = server

        return Handler
