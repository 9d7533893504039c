"""A session's agent (browserhost/agent/): the program inside its sandbox that does what the SDK's browsers.fs and
browsers.process ask, started by this host on the session's first such call, and again on a call after it died; the
calls are forwarded to it by browserhost/agent_forward.py (control.py's ANY /sessions/{id}/agent/{fs|process}/...).

The agent runs on the system's Python (`/usr/bin/python3 -I -S`: the host's virtualenv is not inside), a copy of its
package bound read-only at /opt/lantern/agent, as the sandbox's user in the session's machine, in the session's
tenant cgroup (browserhost/cgroups.py), where a browser's restart leaves it running. Its listening socket is bound by
this host in the sandbox's devtools/ folder (root's, seen by nothing inside) and handed to it as its stdin; this host
keeps no end of it, so a dead agent refuses connections and the next call starts another.

A tenant can stop its own agent (same uid) or have it never answer, so what one session's calls hold of this host
is bounded: at most CALLS_PER_SESSION forwards at once per session and capacity x that for the host (Slots; past
either, agent_forward.py answers 503 agent_busy).
"""
import os
import socket
import subprocess
import threading
import time
from pathlib import Path

from browserhost.network import SandboxError
from browserhost.sandbox import AGENT_SOCKET

AGENT_PACKAGE = Path(__file__).with_name("agent")
INSIDE_AGENT = "/opt/lantern/agent"
PYTHON = "/usr/bin/python3"
ARGV = (PYTHON, "-I", "-S", "-c",
        "import sys; sys.path.insert(0, '/opt/lantern'); from agent.__main__ import main; main()")
# What the agent's Python needs to start and serve: with less left in the tenant's memory it would be killed at
# once, and every start again (a retry cannot help).
AGENT_START_BYTES = 24 * 1024 * 1024
READY_SECONDS = 10.0  # a start's bwrap and Python take some 0.1 s; a machine busy enough to pass this is refused
# The agent writes within 15 s while a call runs (an SSE keep-alive, exec's spaces): longer silence is a stuck agent.
SILENCE_SECONDS = 300
CONNECT_SECONDS = 5.0
# Forwards at once per session (each holds a thread of this host): SSE streams count while they are open.
CALLS_PER_SESSION = 64


class AgentUnavailable(Exception):
    """The session's agent could not be started or reached; nothing of the call ran, so it may be sent again."""

    def __init__(self, message, status=503, code="agent_unavailable", **extra):
        super().__init__(message)
        self.status, self.code, self.extra = status, code, extra


class Slots:
    """At most `size` taken at once: take() is False past it."""

    def __init__(self, size):
        self.size, self.taken = size, 0
        self.lock = threading.Lock()

    def take(self):
        with self.lock:
            if self.taken >= self.size:
                return False
            self.taken += 1
            return True

    def give(self):
        with self.lock:
            self.taken -= 1


class SessionAgent:
    """One session's agent: started on its first call, and again on a call after it died."""

    def __init__(self):
        self.lock = threading.Lock()  # one start at a time; the others wait for it
        self.process = None
        self.socket_path = None
        self.calls = Slots(CALLS_PER_SESSION)

    def connect(self, box):
        """A connection to the agent of `box` (the session's sandbox), started first when it does not run;
        AgentUnavailable otherwise."""
        with self.lock:
            if self.process is None or self.process.poll() is not None:
                self._start(box)
            path = self.socket_path
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.settimeout(CONNECT_SECONDS)  # a full backlog (a stopped agent) refuses at once on Linux
            upstream.connect(path)
            upstream.settimeout(SILENCE_SECONDS)  # a bound behind AgentSide's waits, which come first
        except OSError as error:  # it died since: the next call starts another
            upstream.close()
            raise AgentUnavailable(f"The session's agent does not answer ({error}); retry.") from None
        return upstream

    def _start(self, box):
        if not os.access(PYTHON, os.X_OK):
            raise AgentUnavailable(f"This browser host has no {PYTHON}, which files and processes of a session need.",
                                   status=501, code="agent_not_installed")
        check_memory(box)
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
            check_memory(box)  # killed for memory as it started: say so rather than "retry"
            raise
        self.process, self.socket_path = process, path


def check_memory(box):
    """A 413 session_memory_full when the tenant's memory is too full for the agent to start (what the session's
    processes hold, and its files: memory that is never given back); nothing to refuse when it cannot be read."""
    try:
        left = box.memory_left()
    except (OSError, ValueError):
        return
    if left < AGENT_START_BYTES:
        raise AgentUnavailable(f"The session's memory for files and processes is full ({max(left, 0)} bytes left, "
                               f"its agent needs {AGENT_START_BYTES}): what its processes hold and the files they "
                               "wrote fill it, and a retry cannot help; ending the session frees it.",
                               status=413, code="session_memory_full", room_bytes=0)


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
