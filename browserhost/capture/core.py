"""`Capture`: the telemetry of one browser. It wires the modules of this package together, starts and
stops their threads, and makes the events the host itself reports and the one of a lost connection.

    monitor      the CDP connection lost         monitor_disconnected (flows while a CDP category is on)
    system       browser_exited(returncode)      service_crashed {phase, service_name "chromium", pid}; the exit
                                                 code or signal is on source.metadata (exit_code / signal)
                 out_of_memory(report)           system_oom_kill (the host's cgroups.oom_report)
    connection   client_connected(id)            cdp_connect       (source kind "kernel_api": Lantern's relay)
                 client_disconnected(...)        cdp_disconnect
"""
import logging
import threading
import time

from browserhost.capture.connection import Calls, Connection
from browserhost.capture.console import Console
from browserhost.capture.flusher import Categories, Flusher
from browserhost.capture.interaction import Interaction
from browserhost.capture.network import Network
from browserhost.capture.page import Page
from browserhost.capture.process import exit_metadata
from browserhost.cdp import CdpError
from lantern_wire.hosts import CDP_CATEGORIES

log = logging.getLogger(__package__)  # the name its lines had before capture.py became a package

MAX_MESSAGE = 16 * 1024 * 1024  # BROWSER_CAPTURE_MAX_MESSAGE_MB's default
DISCONNECT_REASONS = ("client_close", "upstream_changed", "upstream_error", "context_cancelled")


def _of_flusher(name, doc=None):
    return property(lambda capture: getattr(capture._flusher, name), doc=doc)


class Capture:
    """Telemetry of one browser: `start()`, then events flow to `sink` until `stop()`."""

    def __init__(self, ws_url, *, categories, sink, flush_seconds=0.05, max_batch=500, max_pending=10000,
                 clock=time.time, on_drops=None, max_message=MAX_MESSAGE):
        """`max_message`: the most bytes of one CDP message the capture holds; a longer one (a page logging a
        huge string) is skipped while it is read and counted in `dropped`."""
        self.ws_url = ws_url
        self._categories = Categories(categories)
        self._categories.refresh()  # host events (browser_exited, client_*) count before start() too
        self._flusher = Flusher(sink, flush_seconds=flush_seconds, max_batch=max_batch, max_pending=max_pending,
                                clock=clock, on_drops=on_drops or self._log_drops, before_pass=self._before_pass)
        self._emit = self._flusher.emit
        self._lock = threading.Lock()
        self._stopped = False
        self._connection_lost = False
        self._calls = Calls()
        self._connection = Connection(ws_url, self._calls, max_message=max_message, on_oversized=self._oversized)
        self._oversized_seen = False
        targets = self._connection.targets
        page = Page(targets, self._categories, self._emit)
        # In this order each new session gets their set-up commands (Runtime.enable is console's).
        self._domains = (page, Interaction(targets, self._categories, self._emit),
                         Console(targets, self._categories, self._emit),
                         Network(targets, self._categories, self._emit, call=self._connection.call,
                                 calls=self._calls, clock=clock))
        self._connection.set_ups = tuple(domain.set_up for domain in self._domains)
        self._connection.on_tab_opened = page.tab_opened
        self._threads = []

    # The flusher keeps these; they stay readable here, as they were before it had a module.
    flush_seconds = _of_flusher("flush_seconds")
    max_batch = _of_flusher("max_batch")
    max_pending = _of_flusher("max_pending")
    dropped = _of_flusher("dropped", "Events lost: past `max_pending`, in a batch the sink raised on, or in a CDP "
                                     "message past `max_message`.")
    captured = _of_flusher("captured", "Events the sink took.")

    # -- lifecycle

    def start(self):
        """Connect, attach to every target of interest and start the flusher. CdpError if the
        browser cannot be reached (nothing is left running then)."""
        self._categories.refresh()
        handlers = {}
        for domain in self._domains:
            handlers.update(domain.handlers())
        self._connection.connect(handlers)
        self._threads = [threading.Thread(target=self._flusher.run, name="capture-flusher", daemon=True),
                         threading.Thread(target=self._calls.run, name="capture-calls", daemon=True)]
        for thread in self._threads:
            thread.start()
        try:
            self._connection.attach_all()
        except CdpError:
            self.stop()
            raise
        return self

    def stop(self):
        """Close the CDP connection, hand what is pending to the sink, join the threads. Idempotent."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self._connection.close()
        self._flusher.stopping.set()
        if self._threads:
            self._calls.close()
        self._flusher.wake()
        for thread in self._threads:
            thread.join(timeout=10)
        self._flusher.drain()  # what was emitted since, or everything when start() never ran

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def wait_for_target(self, target_id, timeout=5.0):
        """True once `target_id` is attached and, for a page, its session set up (domains enabled,
        interaction script added): what it does from then on is captured. False after `timeout`
        seconds (a target not captured, or a browser too slow). For a caller that opens a page and
        must not lose its first events."""
        return self._connection.wait_for(target_id, timeout)

    def load_start_page(self, url, timeout=10.0):
        """Navigate the browser's first tab to `url` once the capture is attached to it and has set it up, so
        that the start page's events are captured from its first (Chromium is started on about:blank for
        that). False when there was no tab within `timeout` seconds or the browser did not answer."""
        return self._connection.navigate_first_tab(url, timeout)

    # -- events the host reports

    def browser_exited(self, returncode, *, pid=None, phase="running"):
        """Chromium's process ended unexpectedly with `returncode` (negative: the signal's number).
        The SDK's service_crashed is for unexpected exits only: the host does not call this when it
        stopped the browser itself."""
        if "system" not in self._categories:
            return
        data = {"phase": phase, "service_name": "chromium"}
        if pid is not None:
            data["pid"] = pid
        self._emit("service_crashed", "system",
                   {"kind": "local_process", "event": "exit", "metadata": exit_metadata(returncode)}, data)

    def out_of_memory(self, report):
        """The kernel killed a process of the session's sandbox past its memory cap: the SDK's system_oom_kill
        (`report`: its data, from cgroups.oom_report)."""
        if "system" in self._categories:
            self._emit("system_oom_kill", "system", {"kind": "local_process", "event": "oom_kill"}, report)

    def client_connected(self, connection_id):
        """A CDP client connected to Lantern's CDP endpoint for this browser."""
        if "connection" in self._categories:
            self._emit("cdp_connect", "connection", {"kind": "kernel_api", "event": "cdp_connect"},
                       {"connection_id": str(connection_id)})

    def client_disconnected(self, connection_id, duration_ms, message_count=None, reason="client_close"):
        """That client left after `duration_ms`, having relayed `message_count` messages (the SDK requires
        a count: 0 when the relay does not count)."""
        if reason not in DISCONNECT_REASONS:
            raise ValueError(f"reason must be one of {DISCONNECT_REASONS}, not {reason!r}")
        if "connection" in self._categories:
            self._emit("cdp_disconnect", "connection", {"kind": "kernel_api", "event": "cdp_disconnect"},
                       {"connection_id": str(connection_id), "duration_ms": float(duration_ms),
                        "message_count": int(message_count or 0), "reason": reason})

    # -- the flusher's passes

    def _before_pass(self):
        self._categories.refresh()
        self._note_connection()

    def _oversized(self, method, size):
        self._flusher.count_dropped()
        if not self._oversized_seen:  # once: the drop count tells the rest
            self._oversized_seen = True
            log.warning("telemetry capture of %s: a CDP message of %s bytes (%s) is past %s bytes: skipped, and "
                        "every such message from now on", self.ws_url, size, method, self._connection.max_message)

    def _log_drops(self, total):
        log.warning("telemetry capture of %s: %s events dropped so far", self.ws_url, total)

    def _monitor_on(self):
        # Categories whose events come over this CDP connection: `monitor` events flow while one is on.
        return "monitor" in self._categories or not self._categories.enabled.isdisjoint(CDP_CATEGORIES)

    def _note_connection(self):
        cdp = self._connection.cdp
        if cdp is None or not cdp.closed or self._connection_lost or self._flusher.stopping.is_set():
            return
        self._connection_lost = True
        log.warning("telemetry capture of %s lost its CDP connection", self.ws_url)
        if self._monitor_on():
            self._emit("monitor_disconnected", "monitor", {"kind": "cdp"}, {})
