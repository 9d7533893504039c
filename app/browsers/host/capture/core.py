"""Telemetry captured from a real Chromium over CDP, and a tail of Chromium's log file.

    capture = Capture(browser.ws_url, categories=lambda: session_categories(), sink=ingest)
    capture.start()
    ... capture.client_connected("c1"); capture.browser_exited(-9, pid=browser.pid) ...
    capture.stop()

`Capture` holds its own browser-level CDP connection. It auto-attaches (flattened sessions) to page,
iframe, worker, service_worker and shared_worker targets, those already open included, and detaches
from everything else (`browser_ui` targets, chrome:// and devtools:// pages), which would flood it.
CDP events become the SDK's telemetry events (app/browsers/telemetry_types.py: nothing else is made),
each a dict `validate_event` accepts: type, category, ts (Unix microseconds, when the event was
read), source `{kind: "cdp", event: <CDP method>, metadata: {session_id, target_id}}`, data,
and `truncated: true` when a string, a header list or a body was cut.

Threads. The CDP reader turns events into dicts and appends them to a bounded deque; it never waits
on the sink. Past `max_pending` queued events, new ones are dropped and counted (`dropped`). One
flusher thread hands the queue to `sink(events)` in batches of at most `max_batch`, every
`flush_seconds` or as soon as a batch is full (`captured` counts what the sink took; a sink that
raises loses its batch, counted as dropped). Before each pass it calls `categories()` again: a
change of the session's settings applies within `flush_seconds` (polling, so the host has nothing
to call). A third thread makes the calls a handler may not make: it fetches response bodies (so a
response event waits for its body and may reach the sink after events read later; its ts is still
the loadingFinished one) and reads the document of each new page (Page.getFrameTree).

New targets. No page ever waits for the capture (waitForDebuggerOnStart false), so a tab opened on
a URL (Target.createTarget, window.open) may commit its first navigation before its session's
Page.enable is through: those first events are lost, though the page's URL is known
(waitForDebuggerOnStart true was tried: under load the navigation still committed first). A caller
that opens a page itself and must lose none of it waits for `wait_for_target(target_id)` first.
Runtime.enable replays the console messages a page stored: for pages open before start() the ones
older than start() are left out.

Mapping (only for enabled categories; the check comes first):

    console      Runtime.consoleAPICalled        console_log (console_error when type is "error")
                 Runtime.exceptionThrown         console_error (text "Uncaught Error: boom", line, column,
                                                 source_url, stack_trace)
    network      Network.requestWillBeSent       network_request (a redirect reuses the requestId: the hop's
                                                 3xx becomes a network_response, then is_redirect/redirect_url)
                 Network.responseReceived        kept until the load ends
                 Network.loadingFinished         network_response (status, status_text, headers, mime_type,
                                                 method, resource_type; body for text types, first 8 KB)
                 Network.loadingFailed           network_loading_failed
    page         Target.attachedToTarget (page)  page_tab_opened (tabs opened after start)
                 Page.frameNavigated             page_navigation (a top-level one starts a new nav_seq)
                 Page.domContentEventFired       page_dom_content_loaded
                 Page.loadEventFired             page_load
                 Inspector.targetCrashed         page_crashed
    interaction  Runtime.bindingCalled           interaction_click, interaction_key, interaction_scroll_settled
                                                 (a script in an isolated world, invisible to the page, reports
                                                 them; at most 20/s per page, checked there and here; no key
                                                 value is reported from a password field)
    monitor      the CDP connection lost         monitor_disconnected (flows while a CDP category is on)
    system       browser_exited(returncode)      service_crashed {phase, service_name "chromium", pid}; the exit
                                                 code or signal is on source.metadata (exit_code / signal)
    connection   client_connected(id)            cdp_connect       (source kind "kernel_api": Lantern's relay)
                 client_disconnected(...)        cdp_disconnect

Not filled here: `control` (cdp_command: the relay sees the client's commands, not this connection;
api_call), `platform`, `captcha` (Lantern solves none), `screenshot` (monitor_screenshot), the system
event system_oom_kill, and the computed events network_idle, page_layout_settled,
page_navigation_settled, page_layout_shift and page_lcp. There is no timing field in the SDK's
network_response: a request's timing is the ts of its network_request and network_response. Dropped
events are only counted: no SDK type carries such a count (monitor_* and system types describe other
things), so `dropped` is the figure to report: the flusher hands each new total to `on_drops(total)`
(at most once per DROP_REPORT_SECONDS; by default a log line).
"""
import collections
import json
import logging
import math
import queue
import threading
import time

from app.browsers.host.capture.process import exit_metadata
from app.browsers.host.capture.text import MAX_SHORT, MAX_URL, Cut
from app.browsers.host.cdp import CdpClient, CdpError
from app.browsers.telemetry import CDP_CATEGORIES

log = logging.getLogger(__package__)  # the name its lines had before capture.py became a package

ATTACHED_TYPES = ("page", "iframe", "worker", "service_worker", "shared_worker")
PAGE_TYPES = ("page", "iframe")
IGNORED_SCHEMES = ("chrome://", "devtools://", "chrome-untrusted://", "chrome-search://")
# Categories whose events come over this CDP connection: `monitor` events flow while one is on.
AUTO_ATTACH = {"autoAttach": True, "waitForDebuggerOnStart": False, "flatten": True,
               "filter": [*({"type": kind} for kind in ATTACHED_TYPES), {"exclude": True}]}
DISCONNECT_REASONS = ("client_close", "upstream_changed", "upstream_error", "context_cancelled")

MAX_TEXT = 4096           # console text, error text
MAX_ARGS = 20
MAX_ARG = 1024
MAX_POST_DATA = 8192
MAX_BODY = 8192
MAX_BODY_FETCH = 256 * 1024  # bodies larger than this on the wire are not fetched at all
MAX_FRAMES = 50
MAX_STACK_PARENTS = 4
MAX_PENDING_REQUESTS = 2000  # per target: requests whose load has not ended
MAX_CALLS = 256          # queued for the calling thread; past it, bodies are not fetched
CALL_TIMEOUT = 2.0
INTERACTIONS_PER_SECOND = 20
DROP_REPORT_SECONDS = 10  # at most one log line about drops per this many seconds
TEXT_MIME_TYPES = ("application/json", "application/javascript", "application/xml", "application/x-www-form-urlencoded")

BINDING = "__lanternCapture"
WORLD = "__lantern_capture"
INTERACTION_SCRIPT = """(() => {
  const send = globalThis.%(binding)s;
  if (typeof send !== "function" || globalThis.__lanternCaptureOn) return;
  globalThis.__lanternCaptureOn = true;
  let second = 0, count = 0;
  const emit = (event) => {
    const now = Date.now();
    if (now - second >= 1000) { second = now; count = 0; }
    if (++count > %(rate)d) return;
    try { send(JSON.stringify(event)); } catch (error) {}
  };
  const selector = (element) => {
    const parts = [];
    for (let node = element; node && node.nodeType === 1 && parts.length < 5; node = node.parentElement) {
      if (node.id) { parts.unshift("#" + CSS.escape(node.id)); break; }
      let part = node.tagName.toLowerCase();
      const parent = node.parentElement;
      if (parent) {
        const same = Array.from(parent.children).filter((child) => child.tagName === node.tagName);
        if (same.length > 1) part += ":nth-of-type(" + (same.indexOf(node) + 1) + ")";
      }
      parts.unshift(part);
    }
    return parts.join(" > ");
  };
  const describe = (element) => element instanceof Element
    ? {tag: element.tagName, selector: selector(element)} : {};
  addEventListener("click", (event) => {
    const element = event.target instanceof Element ? event.target : null;
    emit({t: "click", x: Math.round(event.clientX), y: Math.round(event.clientY), ...describe(element),
          text: element ? (element.innerText || element.textContent || "").trim().slice(0, 200) : undefined});
  }, true);
  addEventListener("keydown", (event) => {
    const element = document.activeElement;
    const secret = element && element.tagName === "INPUT" && element.type === "password";
    emit({t: "key", key: secret ? undefined : event.key, ...describe(element)});
  }, true);
  const scrolls = new Map();
  const position = (target) => target instanceof Element
    ? [Math.round(target.scrollLeft), Math.round(target.scrollTop)] : [Math.round(scrollX), Math.round(scrollY)];
  const settled = new Map([[document, position(document)]]);
  addEventListener("scroll", (event) => {
    const target = event.target;
    let state = scrolls.get(target);
    if (!state) {
      state = {from: settled.get(target) || position(target)};
      scrolls.set(target, state);
    }
    clearTimeout(state.timer);
    state.timer = setTimeout(() => {
      scrolls.delete(target);
      const to = position(target);
      settled.set(target, to);
      emit({t: "scroll", from_x: state.from[0], from_y: state.from[1], to_x: to[0], to_y: to[1],
            target_selector: target instanceof Element ? selector(target) : "document"});
    }, 150);
  }, {capture: true, passive: true});
})();""" % {"binding": BINDING, "rate": INTERACTIONS_PER_SECOND}


IGNORED = object()  # a request of an ignored scheme, in _Target.requests


class _Request:
    __slots__ = ("frame_id", "loader_id", "method", "resource_type", "response", "url")

    def __init__(self, url, method, resource_type, frame_id, loader_id):
        self.url, self.method, self.resource_type = url, method, resource_type
        self.frame_id, self.loader_id = frame_id, loader_id
        self.response = None


class _Target:
    """One attached session and what its events need: ids, the current document, pending requests."""

    def __init__(self, session_id, parent_session_id, info, news_from_ms=0.0):
        self.session_id = session_id
        self.parent_session_id = parent_session_id
        self.target_id = info.get("targetId", "")
        self.target_type = info.get("type") if info.get("type") in ATTACHED_TYPES else "other"
        self.url = info.get("url", "")
        self.loader_id = None
        self.nav_seq = 0
        self.frames = {}      # execution context id -> frame id
        self.requests = {}    # CDP requestId -> _Request, oldest first
        self.tokens = float(INTERACTIONS_PER_SECOND)
        self.refilled = time.monotonic()
        # Runtime.enable replays the console messages and exceptions the page stored (up to 1000). For a
        # target attached after start() they are news (logged before Runtime.enable was through); for one
        # open before, those older than start() (CDP stamps them in Unix milliseconds) are not.
        self.news_from_ms = news_from_ms
        self.document_lock = threading.Lock()  # url, loader_id and nav_seq: the reader and the calling thread
        self.ready = threading.Event()         # its setup commands are answered

    def context(self, cut, *, frame_id=None, url=None):
        """The SDK's BrowserEventContext fields."""
        data = {"session_id": self.session_id, "target_id": self.target_id, "target_type": self.target_type,
                "nav_seq": self.nav_seq, "url": cut(self.url if url is None else url, MAX_URL)}
        if self.target_type in PAGE_TYPES:  # a worker has no frame
            frame_id = frame_id or self.target_id  # a page's main frame has its target's id
            if frame_id == self.target_id and self.loader_id:
                data["loader_id"] = self.loader_id
        if frame_id:
            data["frame_id"] = frame_id
        return data

    def source(self, method):
        return {"kind": "cdp", "event": method,
                "metadata": {"session_id": self.session_id, "target_id": self.target_id}}

    def take_token(self):
        now = time.monotonic()
        self.tokens = min(INTERACTIONS_PER_SECOND, self.tokens + (now - self.refilled) * INTERACTIONS_PER_SECOND)
        self.refilled = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True


class Capture:
    """Telemetry of one browser: `start()`, then events flow to `sink` until `stop()`."""

    def __init__(self, ws_url, *, categories, sink, flush_seconds=0.1, max_batch=500, max_pending=10000,
                 clock=time.time, on_drops=None):
        self.ws_url = ws_url
        self.flush_seconds = flush_seconds
        self.max_batch = max_batch
        self.max_pending = max_pending
        self.dropped = 0
        self.captured = 0
        self._categories = categories
        self._sink = sink
        self._on_drops = on_drops or self._log_drops
        self._clock = clock
        self._enabled = frozenset()
        self._categories_failing = False
        self._refresh_categories()  # host events (browser_exited, client_*) count before start() too
        self._pending = collections.deque()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._stopped = False
        self._cdp = None
        self._targets = {}           # session id -> _Target
        self._attached = set()       # target ids with a session of ours
        self._attaching = threading.Condition()
        self._started = False        # tabs attached after start() are "opened"
        self._started_ms = 0.0
        self._connection_lost = False
        self._reported_drops = 0
        self._reported_at = -math.inf
        self._calls = queue.Queue(MAX_CALLS)
        self._threads = []

    # -- lifecycle

    def start(self):
        """Connect, attach to every target of interest and start the flusher. CdpError if the
        browser cannot be reached (nothing is left running then)."""
        self._refresh_categories()
        self._started_ms = time.time() * 1000
        self._cdp = CdpClient(self.ws_url)
        for method, handler in self._handlers().items():
            self._cdp.on(method, handler)
        self._threads = [threading.Thread(target=self._flush_loop, name="capture-flusher", daemon=True),
                         threading.Thread(target=self._call_loop, name="capture-calls", daemon=True)]
        for thread in self._threads:
            thread.start()
        try:
            # Attaches to the targets already open too (their attachedToTarget events come before the answer).
            self._cdp.call("Target.setAutoAttach", AUTO_ATTACH)
            for info in self._cdp.call("Target.getTargets")["targetInfos"]:
                if self._wanted(info) and info["targetId"] not in self._attached:
                    self._attach(info["targetId"])
        except CdpError:
            self.stop()
            raise
        self._started = True
        return self

    def stop(self):
        """Close the CDP connection, hand what is pending to the sink, join the threads. Idempotent."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        if self._cdp is not None:
            self._cdp.close()
        self._stopping.set()
        if self._threads:
            self._calls.put(None)  # after the calls already queued: they fail fast on the closed socket
        self._wake.set()
        for thread in self._threads:
            thread.join(timeout=10)
        self._drain()  # what was emitted since, or everything when start() never ran

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def wait_for_target(self, target_id, timeout=5.0):
        """True once `target_id` is attached and, for a page, its session set up (domains enabled,
        interaction script added): what it does from then on is captured. False after `timeout`
        seconds (a target not captured, or a browser too slow). For a caller that opens a page and
        must not lose its first events."""
        deadline = time.monotonic() + timeout
        with self._attaching:
            target = self._attaching.wait_for(lambda: self._target(target_id), timeout)
        return bool(target) and target.ready.wait(max(0.0, deadline - time.monotonic()))

    def _target(self, target_id):
        return next((target for target in list(self._targets.values()) if target.target_id == target_id), None)

    # -- events the host reports

    def browser_exited(self, returncode, *, pid=None, phase="running"):
        """Chromium's process ended unexpectedly with `returncode` (negative: the signal's number).
        The SDK's service_crashed is for unexpected exits only: the host does not call this when it
        stopped the browser itself."""
        if "system" not in self._enabled:
            return
        data = {"phase": phase, "service_name": "chromium"}
        if pid is not None:
            data["pid"] = pid
        self._emit("service_crashed", "system",
                   {"kind": "local_process", "event": "exit", "metadata": exit_metadata(returncode)}, data)

    def out_of_memory(self, report):
        """The kernel killed a process of the session's sandbox past its memory cap: the SDK's system_oom_kill
        (`report`: its data, from sandbox.oom_report)."""
        if "system" in self._enabled:
            self._emit("system_oom_kill", "system", {"kind": "local_process", "event": "oom_kill"}, report)

    def client_connected(self, connection_id):
        """A CDP client connected to Lantern's CDP endpoint for this browser."""
        if "connection" in self._enabled:
            self._emit("cdp_connect", "connection", {"kind": "kernel_api", "event": "cdp_connect"},
                       {"connection_id": str(connection_id)})

    def client_disconnected(self, connection_id, duration_ms, message_count=None, reason="client_close"):
        """That client left after `duration_ms`, having relayed `message_count` messages (the SDK requires
        a count: 0 when the relay does not count)."""
        if reason not in DISCONNECT_REASONS:
            raise ValueError(f"reason must be one of {DISCONNECT_REASONS}, not {reason!r}")
        if "connection" in self._enabled:
            self._emit("cdp_disconnect", "connection", {"kind": "kernel_api", "event": "cdp_disconnect"},
                       {"connection_id": str(connection_id), "duration_ms": float(duration_ms),
                        "message_count": int(message_count or 0), "reason": reason})

    # -- the queue and the flusher

    def _emit(self, event_type, category, source, data, truncated=False, *, read_at=None):
        read_at = self._clock() if read_at is None else read_at
        event = {"type": event_type, "category": category, "ts": int(read_at * 1_000_000),
                 "source": source, "data": data}
        if truncated:
            event["truncated"] = True
        pending = self._pending
        if len(pending) >= self.max_pending:
            with self._lock:
                self.dropped += 1
            return
        pending.append(event)
        if len(pending) >= self.max_batch and not self._wake.is_set():
            self._wake.set()

    def _flush_loop(self):
        while not self._stopping.is_set():
            self._wake.wait(self.flush_seconds)
            self._wake.clear()  # before draining: an event queued from now on sets it again
            self._refresh_categories()
            self._note_connection()
            self._drain()
        self._drain()

    def _drain(self):
        """Hand the events queued now to the sink (not those added meanwhile: under a flood the
        flusher still re-reads the categories between passes)."""
        pending = self._pending
        left = len(pending)
        while left:
            batch = [pending.popleft() for _ in range(min(left, self.max_batch))]
            left -= len(batch)
            try:
                self._sink(batch)
            except Exception:
                log.exception("telemetry sink failed: %s events lost", len(batch))
                with self._lock:
                    self.dropped += len(batch)
            else:
                with self._lock:
                    self.captured += len(batch)
        now = time.monotonic()
        if self.dropped != self._reported_drops and now - self._reported_at >= DROP_REPORT_SECONDS:
            try:
                self._on_drops(self.dropped)
            except Exception:
                log.exception("reporting %s dropped telemetry events failed", self.dropped)
            self._reported_drops, self._reported_at = self.dropped, now

    def _log_drops(self, total):
        log.warning("telemetry capture of %s: %s events dropped so far", self.ws_url, total)

    def _refresh_categories(self):
        try:
            self._enabled = frozenset(self._categories())
        except Exception:
            if not self._categories_failing:  # once, not every flush
                log.exception("reading the telemetry categories failed; keeping %s", sorted(self._enabled))
            self._categories_failing = True
        else:
            self._categories_failing = False

    def _monitor_on(self):
        return "monitor" in self._enabled or not self._enabled.isdisjoint(CDP_CATEGORIES)

    def _note_connection(self):
        cdp = self._cdp
        if cdp is None or not cdp.closed or self._connection_lost or self._stopping.is_set():
            return
        self._connection_lost = True
        log.warning("telemetry capture of %s lost its CDP connection", self.ws_url)
        if self._monitor_on():
            self._emit("monitor_disconnected", "monitor", {"kind": "cdp"}, {})

    # -- targets

    def _handlers(self):
        return {
            "Target.attachedToTarget": self._on_attached,
            "Target.detachedFromTarget": self._on_detached,
            "Runtime.executionContextCreated": self._on_context_created,
            "Runtime.executionContextDestroyed": self._on_context_destroyed,
            "Runtime.executionContextsCleared": self._on_contexts_cleared,
            "Runtime.consoleAPICalled": self._on_console,
            "Runtime.exceptionThrown": self._on_exception,
            "Runtime.bindingCalled": self._on_binding,
            "Network.requestWillBeSent": self._on_request,
            "Network.responseReceived": self._on_response,
            "Network.loadingFinished": self._on_loading_finished,
            "Network.loadingFailed": self._on_loading_failed,
            "Page.frameNavigated": self._on_frame_navigated,
            "Page.domContentEventFired": self._on_dom_content,
            "Page.loadEventFired": self._on_load,
            "Inspector.targetCrashed": self._on_crashed,
        }

    @staticmethod
    def _wanted(info):
        return info.get("type") in ATTACHED_TYPES and not info.get("url", "").startswith(IGNORED_SCHEMES)

    def _attach(self, target_id):
        try:
            self._cdp.call("Target.attachToTarget", {"targetId": target_id, "flatten": True})
        except CdpError as error:  # closed meanwhile
            log.debug("attaching to %s failed: %s", target_id, error)

    def _on_attached(self, params, parent_session_id):
        info, session_id = params.get("targetInfo", {}), params.get("sessionId")
        if not self._wanted(info) or info.get("targetId") in self._attached:
            self._cdp.send("Target.detachFromTarget", {"sessionId": session_id}, session_id=parent_session_id)
            return
        target = _Target(session_id, parent_session_id, info, 0.0 if self._started else self._started_ms)
        self._targets[session_id] = target
        self._attached.add(target.target_id)
        self._set_up(target)
        with self._attaching:
            self._attaching.notify_all()
        if self._started and parent_session_id is None and target.target_type == "page" and "page" in self._enabled:
            cut = Cut()
            data = {"target_id": target.target_id, "target_type": "page", "url": cut(info.get("url", ""), MAX_URL),
                    "title": cut(info.get("title", ""), MAX_SHORT)}
            if info.get("openerId"):
                data["opener_id"] = info["openerId"]
            self._emit("page_tab_opened", "page", target.source("Target.attachedToTarget"), data, cut.cut)

    def _set_up(self, target):
        """Enable what the capture reads on a new session (sent from the reader: nothing waits)."""
        send, session_id = self._cdp.send, target.session_id
        if target.target_type in PAGE_TYPES:
            send("Page.enable", session_id=session_id)
            send("Inspector.enable", session_id=session_id)
            # The binding exists only in the isolated world the script runs in: the page can neither see
            # it nor forge interaction events through it.
            send("Runtime.addBinding", {"name": BINDING, "executionContextName": WORLD}, session_id=session_id)
            send("Page.addScriptToEvaluateOnNewDocument",
                 {"source": INTERACTION_SCRIPT, "worldName": WORLD, "runImmediately": True}, session_id=session_id)
        send("Runtime.enable", session_id=session_id)
        send("Network.enable", {"maxPostDataSize": MAX_POST_DATA * 2}, session_id=session_id)
        if target.target_type in PAGE_TYPES:
            send("Target.setAutoAttach", AUTO_ATTACH, session_id=session_id)  # its iframes and workers
        # A page open before start() is as its targetInfo says (and may be crashed, which a call would
        # wait on); a new one may have navigated before Page.enable.
        if not (self._started and target.target_type in PAGE_TYPES and self._queue_call(self._read_document, target)):
            target.ready.set()

    def _read_document(self, target):
        """The URL and loader of a page whose navigation came before its Page.enable; then `ready`."""
        try:
            frame = self._cdp.call("Page.getFrameTree", session_id=target.session_id,
                                   timeout=CALL_TIMEOUT)["frameTree"]["frame"]
        except (CdpError, KeyError) as error:  # closed, crashed, or the connection gone
            log.debug("no frame tree for %s: %s", target.target_id, error)
            frame = {}
        with target.document_lock:
            if target.nav_seq == 0 and frame.get("id") == target.target_id:  # else a frameNavigated is newer
                target.url, target.loader_id = frame.get("url", target.url), frame.get("loaderId")
        target.ready.set()

    def _queue_call(self, function, *args):
        """Run `function(*args)` on the calling thread; False when its queue is full."""
        try:
            self._calls.put_nowait((function, args))
        except queue.Full:
            return False
        return True

    def _call_loop(self):
        while True:
            item = self._calls.get()
            if item is None:
                return
            function, args = item
            try:
                function(*args)
            except Exception:
                log.exception("telemetry capture: %s failed", function.__name__)

    def _on_detached(self, params, _session_id):
        target = self._targets.pop(params.get("sessionId"), None)
        if target is not None:
            self._attached.discard(target.target_id)

    def _on_context_created(self, params, session_id):
        target = self._targets.get(session_id)
        context = params.get("context", {})
        frame_id = (context.get("auxData") or {}).get("frameId")
        if target is not None and frame_id:
            target.frames[context.get("id")] = frame_id

    def _on_context_destroyed(self, params, session_id):
        target = self._targets.get(session_id)
        if target is not None:
            target.frames.pop(params.get("executionContextId"), None)

    def _on_contexts_cleared(self, _params, session_id):
        target = self._targets.get(session_id)
        if target is not None:
            target.frames.clear()

    # -- console

    def _on_console(self, params, session_id):
        if "console" not in self._enabled:
            return
        target = self._targets.get(session_id)
        if target is None or params.get("timestamp", math.inf) < target.news_from_ms:
            return
        cut = Cut()
        args = [cut(_remote_text(arg), MAX_ARG) for arg in params.get("args", ())[:MAX_ARGS]]
        if len(params.get("args", ())) > MAX_ARGS:
            cut.cut = True
        level = params.get("type", "log")
        data = target.context(cut, frame_id=target.frames.get(params.get("executionContextId")))
        data.update(level=level, args=args, text=cut(args[0] if args else "", MAX_TEXT))
        if params.get("stackTrace"):
            data["stack_trace"] = _stack_trace(params["stackTrace"], cut)
        event_type = "console_error" if level == "error" else "console_log"
        self._emit(event_type, "console", target.source("Runtime.consoleAPICalled"), data, cut.cut)

    def _on_exception(self, params, session_id):
        if "console" not in self._enabled:
            return
        target = self._targets.get(session_id)
        if target is None or params.get("timestamp", math.inf) < target.news_from_ms:
            return
        details = params.get("exceptionDetails", {})
        cut = Cut()
        data = target.context(cut, frame_id=target.frames.get(details.get("executionContextId")))
        data["text"] = cut(_exception_text(details), MAX_TEXT)
        for key, name in (("lineNumber", "line"), ("columnNumber", "column")):
            if isinstance(details.get(key), int):
                data[name] = details[key]
        if details.get("url"):
            data["source_url"] = cut(details["url"], MAX_URL)
        if details.get("stackTrace"):
            data["stack_trace"] = _stack_trace(details["stackTrace"], cut)
        self._emit("console_error", "console", target.source("Runtime.exceptionThrown"), data, cut.cut)

    # -- network

    def _on_request(self, params, session_id):
        if "network" not in self._enabled:
            return
        target = self._targets.get(session_id)
        if target is None:
            return
        request = params.get("request", {})
        url, request_id = request.get("url", ""), params.get("requestId", "")
        previous = target.requests.pop(request_id, None)
        if len(target.requests) >= MAX_PENDING_REQUESTS:  # loads that never ended: forget the oldest
            del target.requests[next(iter(target.requests))]
        if url.startswith(IGNORED_SCHEMES):
            target.requests[request_id] = IGNORED  # so that its end is not reported either
            return
        redirect = params.get("redirectResponse")
        if redirect is not None and isinstance(previous, _Request):
            previous.response = redirect
            self._emit_response(target, request_id, previous, "Network.requestWillBeSent")
        entry = _Request(url, request.get("method"), params.get("type"), params.get("frameId"), params.get("loaderId"))
        target.requests[request_id] = entry
        cut = Cut()
        data = target.context(cut, frame_id=entry.frame_id, url=url)
        data.update(request_id=request_id, method=entry.method or "", headers=cut.headers(request.get("headers")))
        if entry.loader_id:
            data["loader_id"] = entry.loader_id
        for key, name in (("type", "resource_type"), ("documentURL", "document_url")):
            if params.get(key):
                data[name] = cut(params[key], MAX_URL)
        if (params.get("initiator") or {}).get("type"):
            data["initiator_type"] = params["initiator"]["type"]
        if request.get("postData"):
            data["post_data"] = cut(request["postData"], MAX_POST_DATA)
        if redirect is not None:
            data.update(is_redirect=True, redirect_url=cut(redirect.get("url", ""), MAX_URL))
        self._emit("network_request", "network", target.source("Network.requestWillBeSent"), data, cut.cut)

    def _on_response(self, params, session_id):
        target = self._targets.get(session_id)
        if target is None or "network" not in self._enabled:
            return
        entry = target.requests.get(params.get("requestId"))
        if isinstance(entry, _Request):
            entry.response = params.get("response", {})
            entry.resource_type = params.get("type") or entry.resource_type

    def _on_loading_finished(self, params, session_id):
        target = self._targets.get(session_id)
        if target is None:
            return
        request_id = params.get("requestId")
        entry = target.requests.pop(request_id, None)
        if not isinstance(entry, _Request) or "network" not in self._enabled:
            return
        response = entry.response or {}
        if (_has_text_body(response) and 0 < params.get("encodedDataLength", 0) <= MAX_BODY_FETCH
                and self._queue_call(self._fetch_body, target, request_id, entry, self._clock())):
            return
        self._emit_response(target, request_id, entry, "Network.loadingFinished")  # without its body

    def _emit_response(self, target, request_id, entry, method, *, body=None, read_at=None):
        response = entry.response or {}
        cut = Cut()
        data = target.context(cut, frame_id=entry.frame_id, url=entry.url)
        data.update(request_id=request_id, method=entry.method or "", headers=cut.headers(response.get("headers")))
        if entry.loader_id:
            data["loader_id"] = entry.loader_id
        if isinstance(response.get("status"), int):
            data["status"] = response["status"]
        for key, name in (("statusText", "status_text"), ("mimeType", "mime_type")):
            if response.get(key):
                data[name] = cut(response[key], MAX_SHORT)
        if entry.resource_type:
            data["resource_type"] = entry.resource_type
        if body is not None:
            data["body"] = cut(body, MAX_BODY)
        self._emit("network_response", "network", target.source(method), data, cut.cut, read_at=read_at)

    def _fetch_body(self, target, request_id, entry, read_at):
        body = None
        try:
            result = self._cdp.call("Network.getResponseBody", {"requestId": request_id},
                                    session_id=target.session_id, timeout=CALL_TIMEOUT)
            if not result.get("base64Encoded"):
                body = result.get("body")
        except CdpError as error:  # gone after a navigation, evicted, or the connection closed
            log.debug("no body for %s: %s", request_id, error)
        self._emit_response(target, request_id, entry, "Network.loadingFinished", body=body, read_at=read_at)

    def _on_loading_failed(self, params, session_id):
        target = self._targets.get(session_id)
        if target is None:
            return
        request_id = params.get("requestId", "")
        entry = target.requests.pop(request_id, None)
        if entry is IGNORED or "network" not in self._enabled:
            return
        cut = Cut()
        data = target.context(cut, frame_id=entry.frame_id if entry else None, url=entry.url if entry else "")
        if entry is None:  # in flight before capture began: the SDK leaves these out
            for key in ("url", "frame_id", "loader_id"):
                data.pop(key, None)
        elif entry.loader_id:
            data["loader_id"] = entry.loader_id
        data.update(request_id=request_id, error_text=cut(params.get("errorText", ""), MAX_SHORT),
                    canceled=bool(params.get("canceled")))
        if params.get("type"):
            data["resource_type"] = params["type"]
        self._emit("network_loading_failed", "network", target.source("Network.loadingFailed"), data, cut.cut)

    # -- page

    def _on_frame_navigated(self, params, session_id):
        target = self._targets.get(session_id)
        if target is None:
            return
        frame = params.get("frame", {})
        if frame.get("id") == target.target_id:  # the target's own document (a tab's, or an OOPIF's root)
            with target.document_lock:
                target.url, target.loader_id = frame.get("url", ""), frame.get("loaderId")
                target.nav_seq += 1
        if "page" not in self._enabled:
            return
        cut = Cut()
        data = {"session_id": session_id, "target_id": target.target_id, "target_type": target.target_type,
                "frame_id": frame.get("id", ""), "url": cut(frame.get("url", ""), MAX_URL)}
        if frame.get("loaderId"):
            data["loader_id"] = frame["loaderId"]
        if frame.get("parentId"):
            data["parent_frame_id"] = frame["parentId"]
        self._emit("page_navigation", "page", target.source("Page.frameNavigated"), data, cut.cut)

    def _on_dom_content(self, params, session_id):
        self._page_timing("page_dom_content_loaded", "Page.domContentEventFired", params, session_id)

    def _on_load(self, params, session_id):
        self._page_timing("page_load", "Page.loadEventFired", params, session_id)

    def _page_timing(self, event_type, method, params, session_id):
        target = self._targets.get(session_id)
        if target is None or "page" not in self._enabled:
            return
        cut = Cut()
        data = target.context(cut)
        if isinstance(params.get("timestamp"), (int, float)):
            data["cdp_timestamp"] = float(params["timestamp"])
        self._emit(event_type, "page", target.source(method), data, cut.cut)

    def _on_crashed(self, _params, session_id):
        target = self._targets.get(session_id)
        if target is None or "page" not in self._enabled:
            return
        cut = Cut()
        data = {"target_id": target.target_id, "target_type": target.target_type, "url": cut(target.url, MAX_URL)}
        self._emit("page_crashed", "page", target.source("Inspector.targetCrashed"), data, cut.cut)

    # -- interaction

    def _on_binding(self, params, session_id):
        if "interaction" not in self._enabled or params.get("name") != BINDING:
            return
        target = self._targets.get(session_id)
        payload = params.get("payload", "")
        if target is None or len(payload) > 4 * MAX_SHORT + 1024 or not target.take_token():
            return
        try:
            report = json.loads(payload)
        except ValueError:
            return
        if not isinstance(report, dict) or report.get("t") not in INTERACTIONS:
            return
        event_type, strings, numbers = INTERACTIONS[report["t"]]
        cut = Cut()
        data = target.context(cut, frame_id=target.frames.get(params.get("executionContextId")))
        for name in strings:
            if isinstance(report.get(name), str):
                data[name] = cut(report[name], MAX_SHORT)
        for name in numbers:
            value = report.get(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) < 2**31:
                data[name] = int(value)
        self._emit(event_type, "interaction", target.source("Runtime.bindingCalled"), data, cut.cut)


# What the page script reports: its "t" -> (event type, string fields, integer fields).
INTERACTIONS = {
    "click": ("interaction_click", ("selector", "tag", "text"), ("x", "y")),
    "key": ("interaction_key", ("key", "selector", "tag"), ()),
    "scroll": ("interaction_scroll_settled", ("target_selector",), ("from_x", "from_y", "to_x", "to_y")),
}


def _remote_text(value):
    """A console argument (a CDP RemoteObject) as the console would print it."""
    if "value" in value:
        item = value["value"]
        if isinstance(item, str):
            return item
        if isinstance(item, bool):
            return "true" if item else "false"
        if item is None:
            return "null"
        if isinstance(item, float) and item.is_integer():
            return str(int(item))
        if isinstance(item, (int, float)):
            return str(item)
        return json.dumps(item)
    if "unserializableValue" in value:  # NaN, Infinity, -0, 12n
        return value["unserializableValue"]
    if value.get("type") == "undefined":
        return "undefined"
    return value.get("description") or value.get("className") or value.get("type", "")


def _exception_text(details):
    """"Uncaught Error: boom", as the console shows an uncaught exception."""
    prefix = details.get("text", "Uncaught")
    exception = details.get("exception")
    if not exception:
        return prefix
    if "description" in exception and exception.get("type") == "object":
        message = exception["description"].split("\n    at ", 1)[0]
    else:
        message = _remote_text(exception)
    return f"{prefix} {message}" if message else prefix


def _stack_trace(trace, cut, depth=0):
    """CDP's Runtime.StackTrace with the keys the SDK knows, bounded."""
    frames = trace.get("callFrames") or []
    if len(frames) > MAX_FRAMES:
        cut.cut = True
    stack = {"callFrames": [{
        "functionName": cut(frame.get("functionName", ""), MAX_SHORT), "scriptId": str(frame.get("scriptId", "")),
        "url": cut(frame.get("url", ""), MAX_URL), "lineNumber": _int(frame.get("lineNumber")),
        "columnNumber": _int(frame.get("columnNumber"))} for frame in frames[:MAX_FRAMES]]}
    if isinstance(trace.get("description"), str):
        stack["description"] = cut(trace["description"], MAX_SHORT)
    if isinstance(trace.get("parent"), dict):
        if depth < MAX_STACK_PARENTS:
            stack["parent"] = _stack_trace(trace["parent"], cut, depth + 1)
        else:
            cut.cut = True
    return stack


def _int(value):
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _has_text_body(response):
    mime = (response.get("mimeType") or "").lower()
    return mime.startswith("text/") or mime in TEXT_MIME_TYPES or mime.endswith(("+json", "+xml"))

