"""A session's agent (browserhost/agent/): the program inside its sandbox that does what the SDK's browsers.fs and
browsers.process ask, started by this host on the session's first such call; and the forwarding of those calls to
it (control.py's ANY /sessions/{id}/agent/{fs|process}/...).

The agent runs on the system's Python (`/usr/bin/python3 -I -S`: the host's virtualenv is not inside), a copy of its
package bound read-only at /opt/lantern/agent, as the sandbox's user in the session's machine, in the session's
tenant cgroup (browserhost/cgroups.py), where a browser's restart leaves it running. Its listening socket is bound by
this host in the sandbox's devtools/ folder (root's, seen by nothing inside) and handed to it as its stdin; this host
keeps no end of it, so a dead agent refuses connections and the next call starts another. Each call is forwarded as
it came, its body and its answer streamed (never held), with the session's room (lantern_wire.control.ROOM_HEADER),
one call per connection.
"""
import logging
import os
import socket
import subprocess
import threading
import time
from pathlib import Path

from browserhost.network import SandboxError
from browserhost.sandbox import AGENT_SOCKET
from lantern_wire import control

logger = logging.getLogger(__name__)

AGENT_PACKAGE = Path(__file__).with_name("agent")
INSIDE_AGENT = "/opt/lantern/agent"
PYTHON = "/usr/bin/python3"
ARGV = (PYTHON, "-I", "-S", "-c",
        "import sys; sys.path.insert(0, '/opt/lantern'); from agent.__main__ import main; main()")
READY_SECONDS = 10.0  # a start's bwrap and Python take some 0.1 s; a machine busy enough to pass this is refused
# The agent writes within 15 s while a call runs (an SSE keep-alive, exec's spaces): longer silence is a stuck agent.
SILENCE_SECONDS = 300
CHUNK = 256 * 1024
FORWARDED_HEADERS = ("Content-Type", "Accept", "Last-Event-ID")
SERVED = ("fs/", "process/")
NOT_RUNNING = {"code": "not_found", "message": "No such browser on this host."}


class AgentUnavailable(Exception):
    """The session's agent could not be started or reached; nothing of the call ran, so it may be sent again."""

    def __init__(self, message, status=503, code="agent_unavailable"):
        super().__init__(message)
        self.status, self.code = status, code


class SessionAgent:
    """One session's agent: started on its first call, and again on a call after it died."""

    def __init__(self):
        self.lock = threading.Lock()  # one start at a time; the others wait for it
        self.process = None
        self.socket_path = None

    def connect(self, box):
        """A connection to the agent of `box` (the session's sandbox), started first when it does not run;
        AgentUnavailable otherwise."""
        with self.lock:
            if self.process is None or self.process.poll() is not None:
                self._start(box)
            path = self.socket_path
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.settimeout(SILENCE_SECONDS)
            upstream.connect(path)
        except OSError as error:  # it died since: the next call starts another
            upstream.close()
            raise AgentUnavailable(f"The session's agent does not answer ({error}); retry.") from None
        return upstream

    def _start(self, box):
        if not os.access(PYTHON, os.X_OK):
            raise AgentUnavailable(f"This browser host has no {PYTHON}, which files and processes of a session need.",
                                   status=501, code="agent_not_installed")
        try:
            package = box.readable_copy(AGENT_PACKAGE)
            listener = box.listener(AGENT_SOCKET)
        except OSError as error:
            raise AgentUnavailable(f"The session's agent could not be started ({error}); retry.") from None
        path = listener.getsockname()
        try:
            process = box.popen(list(ARGV), binds=[(package, INSIDE_AGENT)], tenant=True, stdin=listener,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        except (OSError, subprocess.SubprocessError, SandboxError) as error:
            raise AgentUnavailable(f"The session's agent could not be started ({error}); retry.") from None
        finally:
            listener.close()  # the agent's alone from now on: its end closes it
        try:
            wait_until_accepting(path, process, READY_SECONDS)
        except AgentUnavailable:
            process.kill()  # its outer bubblewrap: the agent dies with it (--die-with-parent)
            process.wait()
            raise
        self.process, self.socket_path = process, path


def wait_until_accepting(path, process, seconds):
    """Return once the agent on `path` accepts a connection (it takes one that sends nothing and closes it);
    AgentUnavailable when its process exits first or `seconds` pass."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AgentUnavailable(f"The session's agent exited as it started (status {process.returncode}); retry.")
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                probe.settimeout(max(deadline - time.monotonic(), 0.01))
                probe.connect(path)
                probe.shutdown(socket.SHUT_WR)
                probe.recv(1)  # its end: the agent accepted it
                return
        except TimeoutError:
            break
        except OSError:  # refused or reset: it is dying, or a moment from listening
            time.sleep(0.02)
    raise AgentUnavailable(f"The session's agent did not start within {seconds:.0f} s; retry.")


# -- forwarding -------------------------------------------------------------------------------------------------

def forward(handler, hosted, rest, query):
    """Forward the call `handler` (control.ControlHandler) reads to `hosted`'s agent as `/<rest>?<query>` (both as
    they came, still escaped), its body streamed there and the agent's answer streamed back until the agent closes;
    the connection with the app ends with it."""
    refusal = refused(handler, hosted, rest, query)
    if refusal:
        handler.answer(*refusal)
        return
    try:
        upstream = hosted.agent.connect(hosted.box)
    except AgentUnavailable as error:
        handler.answer(error.status, {"code": error.code, "message": str(error)})
        return
    handler.close_connection = True  # the agent's answer is relayed as it comes, and ends with its connection
    with upstream:
        head = request_head(handler.command, rest, query, handler.headers, handler.unread, room_of(hosted.box))
        try:
            upstream.sendall(head)
            if not copy_body(handler, upstream):
                return  # the app left part-way: the agent sees the body cut short and writes nothing of it
        except (BrokenPipeError, ConnectionResetError):
            pass  # the agent answered before it read the whole body (a refusal): its answer follows
        relayed = relay_answer(upstream, handler)
    if relayed == 0:  # the agent died (its session ends), or the app left: then this answer goes nowhere
        handler.answer(502, {"code": "agent_no_answer", "message": "The session's agent ended without answering; "
                             "what the call asked may have been done."})


def refused(handler, hosted, rest, query):
    """(status, refusal) for a call that is not forwarded, else None."""
    if not rest.startswith(SERVED):
        return 404, {"code": "not_found", "message": f"No such route: /{rest}"}
    if not all(0x21 <= ord(character) <= 0x7E for character in rest + query):
        return 400, {"code": "bad_request", "message": "The path holds characters that must be escaped."}
    if hosted.stopping:
        return 404, NOT_RUNNING
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
        logger.warning("the room of sandbox %s could not be read: %s", getattr(box, "name", "?"), error)
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


def copy_body(handler, upstream):
    """The request's body (handler.unread bytes) sent on, a chunk at a time; False when the app left part-way."""
    while handler.unread:
        try:
            chunk = handler.rfile.read(min(CHUNK, handler.unread))
        except OSError:  # the app stopped sending (its connection's idle timeout)
            chunk = b""
        if not chunk:
            return False
        handler.unread -= len(chunk)
        upstream.sendall(chunk)
    return True


def relay_answer(upstream, handler):
    """The agent's answer written to the app as it comes, until the agent closes; the bytes relayed."""
    relayed = 0
    try:
        while chunk := upstream.recv(CHUNK):
            handler.wfile.write(chunk)
            relayed += len(chunk)
    except TimeoutError:
        logger.warning("a session's agent was silent for %s s: its call is cut", SILENCE_SECONDS)
    except OSError as error:  # the app left (its client gave up), or the agent was killed (the session ends)
        logger.debug("forwarding to a session's agent ended: %s", error)
    return relayed
