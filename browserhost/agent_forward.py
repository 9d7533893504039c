"""The forwarding of a session's files and processes calls (control.py's ANY /sessions/{id}/agent/{fs|process}/...)
to its agent (started by browserhost/agents.py). A module apart from agents.py (the agent's start and readiness)
because this is one call's HTTP: its head, its body copied on, the agent's answer parsed and re-framed for the app.

Each call is forwarded as it came, its body and its answer streamed (never held), with the session's room
(lantern_wire.control.ROOM_HEADER), one call per connection. The agent is the tenant's to control (its processes run
as its user): its answer is parsed here and the app gets this host's own head and the answer's body up to its
framing, nothing more.

A tenant can stop its own agent (same uid) or have it never answer, so what one session's calls hold of this host
is bounded: at most agents.CALLS_PER_SESSION forwards at once per session and capacity x that for the host (past
either, 503 agent_busy with Retry-After: nothing was sent, so a retry is safe), its answer's head within
HEAD_SECONDS of the call being sent, and a forward ends as soon as the app's side of it closes.
"""
import http.client
import io
import logging
import select
import socket
import time

from browserhost.agents import CALLS_PER_SESSION, SILENCE_SECONDS, AgentUnavailable
from lantern_wire import control

logger = logging.getLogger(__name__)

# It sends an answer's head at once once it has the body (streams and exec's trickle too): a stuck or stopped agent.
HEAD_SECONDS = 60.0
BUSY_RETRY_SECONDS = 2
# The app's side is gone: its FIN (or reset). The control API's only caller, the app, never half-closes.
CALLER_GONE = select.POLLRDHUP | select.POLLHUP | select.POLLERR
# What a forward copies at a time: at 256 KiB, read_file ran at 0.42 of cat inside the sandbox, at 1 MiB 0.57
# (docs/benchmarks.md). The agent's answer is read through a smaller buffer, which each forward holds while open.
CHUNK = 1024 * 1024
ANSWER_BUFFER = 64 * 1024
FORWARDED_HEADERS = ("Content-Type", "Accept", "Last-Event-ID")
# What of the agent's answer head the app gets (the rest of the head is this host's own): what its answers need.
ANSWERED_HEADERS = ("Content-Type", "Cache-Control")
SERVED = ("fs/", "process/")
DRAIN_SECONDS = 30.0  # how long what the app still sends of a refused body is read and dropped
DRAIN_IDLE_SECONDS = 5.0


class CallerLeft(ConnectionError):
    """The app's side of a forward closed: nobody reads its answer."""


class AnsweredEarly(ConnectionError):
    """The agent answered before taking the whole body (a refusal): the rest is not sent."""


def forward(handler, hosted, rest, query):
    """Forward the call `handler` (control.ControlHandler) reads to `hosted`'s agent as `/<rest>?<query>` (both as
    they came, still escaped), its body streamed there and the agent's answer streamed back under a head of this
    host's own; the connection with the app ends with it. At most CALLS_PER_SESSION at once for the session and
    handler.host.forwards' size for the host: past either, 503 agent_busy."""
    refusal = refused(handler, hosted, rest, query)
    if refusal:
        handler.answer(*refusal)
        return
    host_slots, session_slots = handler.host.forwards, hosted.agent.calls
    if not host_slots.take():
        answer_busy(handler, "This browser host")
        return
    try:
        if not session_slots.take():
            answer_busy(handler, "The session")
            return
        try:
            forward_in_slot(handler, hosted, rest, query)
        finally:
            session_slots.give()
    finally:
        host_slots.give()


def answer_busy(handler, who):
    handler.close_connection = True  # a thread less while the host is busy: the app opens another for its next call
    handler.answer(503, {"code": "agent_busy", "message": f"{who} has too many files and processes calls under way "
                         f"(at most {CALLS_PER_SESSION} a session, open event streams included); nothing of this one "
                         "was done: retry, or end some of them."},
                   headers={"Retry-After": str(BUSY_RETRY_SECONDS)})


def forward_in_slot(handler, hosted, rest, query):
    try:
        upstream = hosted.agent.connect(hosted.box)
    except AgentUnavailable as error:
        handler.answer(error.status, {"code": error.code, "message": str(error), **error.extra})
        return
    handler.close_connection = True  # the agent's answer is relayed as it comes, and ends with its connection
    with upstream:
        side = AgentSide(upstream, handler.connection)
        head = request_head(handler.command, rest, query, handler.headers, handler.unread, room_of(hosted.box))
        try:
            side.sendall(head)
            if not copy_body(handler, side):
                return  # the app left part-way: the agent sees the body cut short and writes nothing of it
        except CallerLeft:
            return
        except OSError as error:  # it stopped reading: it answered before the whole body (a refusal), or is stuck
            logger.debug("a session's agent took no more of a call's body: %r", error)
        try:
            answered = relay_answer(side, handler)
        except CallerLeft:
            logger.debug("the app left before a session's agent answered")
            return
    if not answered:  # the agent died (its session ends), was silent too long, or answered no HTTP
        handler.answer(502, {"code": "agent_no_answer", "message": "The session's agent ended without answering; "
                             "what the call asked may have been done."})
    drain_body(handler)


class AgentSide(io.RawIOBase):
    """The agent's connection of one forward, used only once it is ready and while the app's side (`caller`) is
    there: CallerLeft as soon as the app's side closes, TimeoutError when the agent's answer head is not whole
    within HEAD_SECONDS of the call being sent, or it is then silent SILENCE_SECONDS. http.client reads the answer
    through makefile()."""

    def __init__(self, upstream, caller):
        super().__init__()
        self.upstream, self.caller = upstream, caller
        self.head_deadline = None  # set once the call is sent; None again once its head is read
        self.poller = select.poll()
        self.poller.register(caller, CALLER_GONE)
        self.poller.register(upstream, select.POLLIN)

    def makefile(self, mode):
        return io.BufferedReader(self, ANSWER_BUFFER)

    def readable(self):
        return True

    def readinto(self, buffer):
        self.wait(select.POLLIN)
        return self.upstream.recv_into(buffer)

    def sendall(self, data):
        """Send all of `data`; AnsweredEarly when the agent answers while it takes no more."""
        view = memoryview(data)
        while view:
            if self.wait(select.POLLOUT | select.POLLIN) & select.POLLOUT:
                view = view[self.upstream.send(view):]
            else:
                raise AnsweredEarly("the agent answered before the whole body")

    def sent(self):
        self.head_deadline = time.monotonic() + HEAD_SECONDS

    def head_read(self):
        self.head_deadline = None

    def wait(self, events):
        """The agent's ready events among `events` (or its hang-up or error)."""
        self.poller.modify(self.upstream, events)
        deadline = self.head_deadline or time.monotonic() + SILENCE_SECONDS
        while (left := deadline - time.monotonic()) > 0:
            ready = dict(self.poller.poll(left * 1000))
            if ready.get(self.caller.fileno(), 0) & CALLER_GONE:
                raise CallerLeft("the app's side of the call closed")
            if ready.get(self.upstream.fileno()):
                return ready[self.upstream.fileno()]
        raise TimeoutError("the session's agent did not answer in time")


def refused(handler, hosted, rest, query):
    """(status, refusal) for a call that is not forwarded, else None (control.py refused one to a session stopping)."""
    if not rest.startswith(SERVED):
        return 404, {"code": "not_found", "message": f"No such route: /{rest}"}
    if not all(0x21 <= ord(character) <= 0x7E for character in rest + query):
        return 400, {"code": "bad_request", "message": "The path holds characters that must be escaped."}
    if hosted.starting or hosted.box is None:
        return 409, {"code": "browser_restarting", "message": "The browser is starting; retry once it runs."}
    if not hosted.box.sandboxed:
        return 501, {"code": "files_not_served", "message": "Files and processes of a session need its sandbox: "
                     "this browser host runs without one (BROWSER_SANDBOX=off)."}
    if handler.unread is None:
        return 411, {"code": "length_required", "message": "The body needs a Content-Length (no chunked bodies)."}
    if any("\r" in value or "\n" in value for value in handler.headers.values()):
        return 400, {"code": "bad_request", "message": "A header value holds a line break."}
    return None


def room_of(box):
    """The session's room, or 0 when its cgroup cannot be read (it is being removed)."""
    try:
        return box.room()
    except (OSError, ValueError) as error:
        logger.warning("the room of sandbox %s could not be read: %s", box.name, error)
        return 0


def request_head(method, rest, query, headers, length, room):
    """The request line and headers the agent gets: the ones that matter of the app's, the body's length (when it
    has one), the room, and Connection: close."""
    lines = [f"{method} /{rest}{'?' + query if query else ''} HTTP/1.1", "Host: agent"]
    lines += [f"{name}: {headers[name]}" for name in FORWARDED_HEADERS if headers.get(name) is not None]
    if "Content-Length" in headers:
        lines.append(f"Content-Length: {length}")
    lines += [f"{control.ROOM_HEADER}: {room}", "Connection: close"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")  # as http.server decoded them


def copy_body(handler, side):
    """The request's body (handler.unread bytes) sent on (to an AgentSide), a chunk at a time; False when the app left
    part-way."""
    while handler.unread:
        try:
            chunk = handler.rfile.read(min(CHUNK, handler.unread))
        except OSError:  # the app stopped sending (its connection's idle timeout)
            chunk = b""
        if not chunk:
            return False
        handler.unread -= len(chunk)
        side.sendall(chunk)
    return True


def relay_answer(side, handler):
    """The agent's answer (on `side`, an AgentSide) to the app: its status and the headers of ANSWERED_HEADERS under
    a head of this host's own (with Connection: close), then its body up to its own end (its Content-Length, or its
    last chunk) and not a byte past it: what the agent, a tenant's to control, writes beyond its answer never reaches
    the app. False when it gave no answer's head (within HEAD_SECONDS); CallerLeft when the app left first."""
    answer = http.client.HTTPResponse(side, method=handler.command)
    side.sent()
    try:
        answer.begin()  # at most 100 header lines of 64 KiB each (http.client's bounds)
    except CallerLeft:
        raise
    except (http.client.HTTPException, OSError) as error:
        logger.info("a session's agent gave no answer: %r", error)
        return False
    side.head_read()
    with answer:
        chunked = answer.length is None  # a chunked answer, or one to the agent's close: chunked to the app
        try:
            handler.send_response(answer.status)
            for name in ANSWERED_HEADERS:
                if answer.getheader(name) is not None:
                    handler.send_header(name, answer.getheader(name))
            handler.send_header("Transfer-Encoding" if chunked else "Content-Length",
                                "chunked" if chunked else str(answer.length))
            handler.send_header("Connection", "close")
            handler.end_headers()
            relay_body(answer, handler.wfile, chunked)
        except TimeoutError:
            logger.warning("a session's agent was silent for %s s: its call is cut", SILENCE_SECONDS)
        except (http.client.HTTPException, OSError) as error:  # the app left, or the agent was killed or lied
            logger.debug("forwarding a session agent's answer ended: %r", error)
    return True


def relay_body(answer, out, chunked):
    """The answer's body as it comes (read1: an SSE frame or exec's space is passed on at once), then the last
    chunk; a body cut short is left cut, so the app sees it was."""
    while data := answer.read1(CHUNK):
        out.write(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
    if chunked:
        out.write(b"0\r\n\r\n")


def drain_body(handler):
    """Read and drop what the app still sends of a body the agent refused early (a bounded while): closing a
    connection with unread bytes resets it, and the app could lose the answer (a 413) to the reset."""
    if not handler.unread:
        return
    deadline = time.monotonic() + DRAIN_SECONDS
    try:
        handler.connection.shutdown(socket.SHUT_WR)
        handler.connection.settimeout(DRAIN_IDLE_SECONDS)
        while handler.unread and time.monotonic() < deadline:
            chunk = handler.rfile.read1(min(CHUNK, handler.unread))
            if not chunk:
                return
            handler.unread -= len(chunk)
    except OSError:
        pass
