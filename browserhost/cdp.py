"""A small Chrome DevTools Protocol client: one WebSocket, one reader thread.

    cdp = CdpClient(browser.devtools)     # or a ws:// URL
    cdp.on("Target.targetCreated", lambda params, session_id: ...)
    targets = cdp.call("Target.getTargets")["targetInfos"]
    session = cdp.call("Target.attachToTarget", {"targetId": tid, "flatten": True})["sessionId"]
    cdp.call("Runtime.evaluate", {"expression": "1 + 1"}, session_id=session)
    cdp.close()

`call` may be used from any thread: it sends the command and waits for the answer with the
same id, which the reader thread hands over. Events go to the handlers registered with `on`,
called on the reader thread in the order they arrive, so a handler must be quick and must not
`call` (its answer could only be read by the thread it blocks): it may `send`, which does not
wait, or pass the work to another thread. Flattened sessions (attachToTarget / setAutoAttach
with flatten=True) are one `sessionId` field on the same socket: `call(..., session_id=...)`
addresses one, and handlers receive the event's session id (None for browser-level events).

`max_message` bounds what the client holds of one message (cdp_frames.py; MAX_MESSAGE unless a smaller bound is
given: what a session's browser sends is the session's to make large, and while Chromium restarts, a process of the
session could listen on its DevTools port and answer the host): a longer one is skipped by length while it is
read; an answer's call fails with CdpError, an event goes to `on_oversized(method, size)` (the method as its first
bytes name it). websocket-client makes the connection and sends; the reader thread reads the frames itself.

Plain threads and blocking sockets: the browser host is a thread-based program.
"""
import itertools
import json
import logging
import re
import socket
import threading

import websocket

from browserhost.cdp_frames import FrameReader, Oversized
from lantern_wire import control
from lantern_wire.devtools import DevTools

log = logging.getLogger(__name__)

# Chromium writes an answer's "id" and an event's "method" first: a skipped message is named by its first bytes.
ANSWER_ID = re.compile(rb'^\{"id":(\d+)')
EVENT_METHOD = re.compile(rb'^\{"method":"([A-Za-z0-9_.]{1,100})"')
MAX_MESSAGE = control.MAX_JSON_BYTES  # the most of one message any client of the host holds


class CdpError(RuntimeError):
    """A command answered with an error (`code` is the protocol's), no answer in time, or the socket gone."""

    def __init__(self, message, code=None):
        super().__init__(message)
        self.code = code


class _Waiter:
    __slots__ = ("done", "message")

    def __init__(self):
        self.done = threading.Event()
        self.message = None


class CdpClient:
    """One DevTools WebSocket (browser- or page-level). `timeout` bounds the connect and,
    unless a call gives its own, each call; `max_message` (bytes, at most MAX_MESSAGE) each message read."""

    def __init__(self, endpoint, timeout=10.0, *, max_message=MAX_MESSAGE, on_oversized=None):
        """`endpoint`: a ws:// URL, or a browser's DevTools (its browser-level socket)."""
        ws_url = endpoint.ws_url() if isinstance(endpoint, DevTools) else endpoint
        self.ws_url = ws_url
        self.timeout = timeout
        try:
            sock = endpoint.connect(timeout) if isinstance(endpoint, DevTools) else None
            # No Origin header: Chromium refuses a WebSocket whose Origin it was not told to allow.
            self._ws = websocket.create_connection(ws_url, timeout=timeout, suppress_origin=True, socket=sock,
                                                   enable_multithread=True, skip_utf8_validation=True)
        except (OSError, websocket.WebSocketException) as error:
            raise CdpError(f"cannot connect to {ws_url}: {error}") from None
        self._ws.settimeout(None)  # the reader waits as long as the browser is quiet
        self.max_message = min(max_message or MAX_MESSAGE, MAX_MESSAGE)
        self._on_oversized = on_oversized
        self._frames = FrameReader(self._ws.sock, max_message=self.max_message, on_ping=self._ws.pong)
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._waiters = {}
        self._handlers = {}
        self._closed = False
        self._close_reason = None
        self._reader = threading.Thread(target=self._read, name=f"cdp-reader {ws_url}", daemon=True)
        self._reader.start()

    @property
    def closed(self):
        return self._closed

    def on(self, method, handler):
        """Call `handler(params, session_id)` on the reader thread for each `method` event."""
        with self._lock:
            self._handlers.setdefault(method, []).append(handler)

    def off(self, method, handler):
        with self._lock:
            handlers = self._handlers.get(method, [])
            if handler in handlers:
                handlers.remove(handler)

    def call(self, method, params=None, *, session_id=None, timeout=None):
        """Run one command and return its result; CdpError on its error, on no answer within
        `timeout` (default: the client's), or when the connection is or gets closed."""
        if threading.current_thread() is self._reader:
            raise CdpError(f"{method}: call() from an event handler would wait forever; use send()")
        waiter = _Waiter()
        command_id = self._send(method, params, session_id, waiter)
        if not waiter.done.wait(self.timeout if timeout is None else timeout):
            with self._lock:
                self._waiters.pop(command_id, None)
            raise CdpError(f"{method}: no answer in {self.timeout if timeout is None else timeout} s")
        message = waiter.message
        if message is None:
            raise CdpError(f"{method}: {self._close_reason}")
        if "error" in message:
            error = message["error"]
            detail = f" ({error['data']})" if error.get("data") else ""
            raise CdpError(f"{method}: {error.get('message')}{detail}", code=error.get("code"))
        return message.get("result", {})

    def send(self, method, params=None, *, session_id=None):
        """Send a command without waiting for its answer (usable from handlers); its id.
        An error answer is only logged."""
        return self._send(method, params, session_id, None)

    def close(self):
        """Close the socket; calls still waiting fail with CdpError. Idempotent."""
        self._shut("closed by the client")
        if threading.current_thread() is not self._reader:
            self._reader.join(timeout=5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- inside

    def _send(self, method, params, session_id, waiter):
        message = {"id": None, "method": method, "params": params or {}}
        if session_id:
            message["sessionId"] = session_id
        with self._lock:
            if self._closed:
                raise CdpError(f"{method}: {self._close_reason}")
            message["id"] = command_id = next(self._ids)
            if waiter is not None:
                self._waiters[command_id] = waiter
        try:
            self._ws.send(json.dumps(message))
        except (OSError, websocket.WebSocketException) as error:
            self._shut(f"connection lost: {error}")
            raise CdpError(f"{method}: {self._close_reason}") from None  # the first reason: close() may have come first
        return command_id

    def _read(self):
        reason = "connection closed by the browser"
        try:
            while (data := self._frames.read()) is not None:  # None: a close frame, or the socket ended
                if isinstance(data, Oversized):
                    self._skipped(data)
                else:
                    self._dispatch(json.loads(data))
        except (OSError, websocket.WebSocketException, ValueError) as error:
            reason = f"connection lost: {error}"
        finally:
            self._shut(reason)
            self._frames.close()
            self._ws.shutdown()

    def _skipped(self, message):
        answer = ANSWER_ID.match(message.prefix)
        if answer:
            bound = f"its answer of {message.size} bytes is past this connection's bound of {self.max_message} bytes"
            self._dispatch({"id": int(answer.group(1)), "error": {"message": bound}})
            return
        method = EVENT_METHOD.match(message.prefix)
        method = method.group(1).decode() if method else "?"
        if self._on_oversized is None:
            log.warning("CDP message of %s bytes (%s) past %s bytes: skipped", message.size, method, self.max_message)
            return
        try:
            self._on_oversized(method, message.size)
        except Exception:
            log.exception("CDP on_oversized handler failed")

    def _dispatch(self, message):
        if "id" in message:
            with self._lock:
                waiter = self._waiters.pop(message["id"], None)
            if waiter is not None:
                waiter.message = message
                waiter.done.set()
            elif "error" in message:
                log.debug("CDP command %s failed: %s", message["id"], message["error"])
            return
        with self._lock:
            handlers = list(self._handlers.get(message.get("method"), ()))
        for handler in handlers:
            try:
                handler(message.get("params", {}), message.get("sessionId"))
            except Exception:  # a faulty handler must not stop the reader: every later answer would be lost
                log.exception("CDP handler for %s failed", message.get("method"))

    def _shut(self, reason):
        with self._lock:
            if self._closed:
                return
            self._closed, self._close_reason = True, reason
            waiters, self._waiters = self._waiters, {}
        for waiter in waiters.values():
            waiter.done.set()  # message None: the call raises with the close reason
        sock = self._ws.sock
        try:
            if sock is not None:
                sock.settimeout(1)  # a close frame Chromium does not read must not hold close() forever
            if self._ws.connected:
                self._ws.send_close()
        except (OSError, websocket.WebSocketException):
            pass  # the socket is gone already (the browser died and the reader closed it)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes the reader blocked in recv
            except OSError:
                pass
