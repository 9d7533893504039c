"""The capture's own browser-level CDP connection (`Connection`): auto-attach, the targets and their
sessions; and the thread that makes the calls a handler may not make (`Calls`).

The connection auto-attaches (flattened sessions) to page, iframe, worker, service_worker and
shared_worker targets, those already open included, and detaches from everything else (`browser_ui`
targets, chrome:// and devtools:// pages), which would flood it. Each new session gets the set-up
commands of every category (`set_ups`), then its own auto-attach when it is a page.

New targets. No page ever waits for the capture (waitForDebuggerOnStart false), so a tab opened on
a URL (Target.createTarget, window.open) may commit its first navigation before its session's
Page.enable is through: those first events are lost, though the page's URL is known
(waitForDebuggerOnStart true was tried: under load the navigation still committed first). A caller
that opens a page itself and must lose none of it waits for `wait_for_target(target_id)` first; the
session's start page is loaded that way (`navigate_first_tab`): Chromium starts on about:blank, and the
capture navigates its first tab once that tab's session is set up (within the start's time left; when it
cannot, the host navigates the tab over a connection of its own, server.py).

A third thread, beside the CDP reader and the flusher, makes the calls a handler may not make (the
reader would wait on itself): it fetches response bodies (network.py) and reads the document of each
new page (Page.getFrameTree).
"""
import logging
import queue
import threading
import time

from browserhost.capture.target import ATTACHED_TYPES, PAGE_TYPES, Target
from browserhost.cdp import CdpClient, CdpError

log = logging.getLogger(__package__)  # the name these lines had before capture.py became a package

IGNORED_SCHEMES = ("chrome://", "devtools://", "chrome-untrusted://", "chrome-search://")
AUTO_ATTACH = {"autoAttach": True, "waitForDebuggerOnStart": False, "flatten": True,
               "filter": [*({"type": kind} for kind in ATTACHED_TYPES), {"exclude": True}]}
MAX_CALLS = 256          # queued for the calling thread; past it, bodies are not fetched
CALL_TIMEOUT = 2.0


class Calls:
    """`put(function, *args)` runs it on the thread running `run()`, in order, until `close()`."""

    def __init__(self):
        self._queue = queue.Queue(MAX_CALLS)

    def put(self, function, *args):
        """Run `function(*args)` on the calling thread; False when its queue is full."""
        try:
            self._queue.put_nowait((function, args))
        except queue.Full:
            return False
        return True

    def close(self):
        self._queue.put(None)  # after the calls already queued: they fail fast on the closed socket

    def run(self):
        while True:
            item = self._queue.get()
            if item is None:
                return
            function, args = item
            try:
                function(*args)
            except Exception:
                log.exception("telemetry capture: %s failed", function.__name__)


def _wanted(info):
    return info.get("type") in ATTACHED_TYPES and not info.get("url", "").startswith(IGNORED_SCHEMES)


class Connection:
    """`connect(handlers)`, then `attach_all()`; `targets` holds the sessions attached, by session id.
    The capture fills `set_ups` (each category's `set_up(send, target)`, in the order Chromium gets
    them) and `on_tab_opened(target, info)` (a tab opened after `attach_all()`) before connecting."""

    def __init__(self, ws_url, calls, *, max_message=None, on_oversized=None):
        self.ws_url = ws_url
        self.max_message, self.on_oversized = max_message, on_oversized
        self.cdp = None
        self.targets = {}            # session id -> Target
        self.started = False         # tabs attached after start() are "opened"
        self.set_ups = ()
        self.on_tab_opened = None
        self._calls = calls
        self._attached = set()       # target ids with a session of ours
        self._attaching = threading.Condition()
        self._started_ms = 0.0

    def connect(self, handlers):
        """Open the connection and have the reader call `handlers` (CDP method -> handler) besides the
        connection's own. CdpError if the browser cannot be reached."""
        self._started_ms = time.time() * 1000
        self.cdp = CdpClient(self.ws_url, max_message=self.max_message, on_oversized=self.on_oversized)
        for method, handler in {**self._handlers(), **handlers}.items():
            self.cdp.on(method, handler)

    def attach_all(self):
        """Attach to every target of interest; from then on a new tab is an opened one. CdpError if the
        browser does not answer."""
        # Attaches to the targets already open too (their attachedToTarget events come before the answer).
        self.cdp.call("Target.setAutoAttach", AUTO_ATTACH)
        for info in self.cdp.call("Target.getTargets")["targetInfos"]:
            if _wanted(info) and info["targetId"] not in self._attached:
                self._attach(info["targetId"])
        self.started = True

    def call(self, method, params=None, *, session_id=None, timeout=None):
        return self.cdp.call(method, params, session_id=session_id, timeout=timeout)

    def close(self):
        if self.cdp is not None:
            self.cdp.close()

    def wait_for(self, target_id, timeout):
        """Capture.wait_for_target."""
        deadline = time.monotonic() + timeout
        with self._attaching:
            target = self._attaching.wait_for(lambda: self._target(target_id), timeout)
        return bool(target) and target.ready.wait(max(0.0, deadline - time.monotonic()))

    def navigate_first_tab(self, url, timeout):
        """Capture.load_start_page: False when there was no tab of ours set up within `timeout` seconds (all of
        the wait), or the browser did not take the navigation."""
        deadline = time.monotonic() + timeout
        with self._attaching:
            tab = self._attaching.wait_for(self._first_tab, timeout)
        if tab is None:
            return False
        try:
            # Answered once the set-up commands sent before it on this session are through (Page.enable,
            # Runtime.enable, Network.enable, the interaction script): the page's events are then ours.
            self.cdp.call("Page.getFrameTree", session_id=tab.session_id,
                          timeout=max(0.0, deadline - time.monotonic()))
            # Not waited for: its answer comes once the start page answers, which may take long.
            self.cdp.send("Page.navigate", {"url": url}, session_id=tab.session_id)
        except CdpError as error:
            log.warning("the capture could not open the start page %s in the first tab: %s", url, error)
            return False
        return True

    def _first_tab(self):
        return next((target for target in list(self.targets.values())
                     if target.parent_session_id is None and target.target_type == "page"), None)

    def _target(self, target_id):
        return next((target for target in list(self.targets.values()) if target.target_id == target_id), None)

    def _handlers(self):
        return {
            "Target.attachedToTarget": self._on_attached,
            "Target.detachedFromTarget": self._on_detached,
            "Runtime.executionContextCreated": self._on_context_created,
            "Runtime.executionContextDestroyed": self._on_context_destroyed,
            "Runtime.executionContextsCleared": self._on_contexts_cleared,
        }

    def _attach(self, target_id):
        try:
            self.cdp.call("Target.attachToTarget", {"targetId": target_id, "flatten": True})
        except CdpError as error:  # closed meanwhile
            log.debug("attaching to %s failed: %s", target_id, error)

    def _on_attached(self, params, parent_session_id):
        info, session_id = params.get("targetInfo", {}), params.get("sessionId")
        if not _wanted(info) or info.get("targetId") in self._attached:
            self.cdp.send("Target.detachFromTarget", {"sessionId": session_id}, session_id=parent_session_id)
            return
        target = Target(session_id, parent_session_id, info, 0.0 if self.started else self._started_ms)
        self.targets[session_id] = target
        self._attached.add(target.target_id)
        self._set_up(target)
        with self._attaching:
            self._attaching.notify_all()
        if self.started and parent_session_id is None and target.target_type == "page":
            self.on_tab_opened(target, info)

    def _set_up(self, target):
        """Enable what the capture reads on a new session (sent from the reader: nothing waits)."""
        send = self.cdp.send
        for set_up in self.set_ups:
            set_up(send, target)
        if target.target_type in PAGE_TYPES:
            send("Target.setAutoAttach", AUTO_ATTACH, session_id=target.session_id)  # its iframes and workers
        # A page open before start() is as its targetInfo says (and may be crashed, which a call would
        # wait on); a new one may have navigated before Page.enable.
        if not (self.started and target.target_type in PAGE_TYPES and self._calls.put(self._read_document, target)):
            target.ready.set()

    def _read_document(self, target):
        """The URL and loader of a page whose navigation came before its Page.enable; then `ready`."""
        try:
            frame = self.cdp.call("Page.getFrameTree", session_id=target.session_id,
                                  timeout=CALL_TIMEOUT)["frameTree"]["frame"]
        except (CdpError, KeyError) as error:  # closed, crashed, or the connection gone
            log.debug("no frame tree for %s: %s", target.target_id, error)
            frame = {}
        with target.document_lock:
            if target.nav_seq == 0 and frame.get("id") == target.target_id:  # else a frameNavigated is newer
                target.url, target.loader_id = frame.get("url", target.url), frame.get("loaderId")
        target.ready.set()

    def _on_detached(self, params, _session_id):
        target = self.targets.pop(params.get("sessionId"), None)
        if target is not None:
            self._attached.discard(target.target_id)

    def _on_context_created(self, params, session_id):
        target = self.targets.get(session_id)
        context = params.get("context", {})
        frame_id = (context.get("auxData") or {}).get("frameId")
        if target is not None and frame_id:
            target.frames[context.get("id")] = frame_id

    def _on_context_destroyed(self, params, session_id):
        target = self.targets.get(session_id)
        if target is not None:
            target.frames.pop(params.get("executionContextId"), None)

    def _on_contexts_cleared(self, _params, session_id):
        target = self.targets.get(session_id)
        if target is not None:
            target.frames.clear()
