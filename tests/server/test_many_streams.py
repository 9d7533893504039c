"""#26.5: a worker keeps every stream it admitted, past a thousand open connections, against the real
gunicorn + gevent worker. (A stream's check for a client that left used select(), which refuses
descriptors past 1023: every stream on one got closed as if its client had gone, without a word.)"""
import errno
import socket
import time
from contextlib import ExitStack

import httpx
import pytest

from tests.live_server import serve_with_organization

STREAMS = 1100  # enough for the worker's descriptors to pass 1023
WORKER_CONNECTIONS = 1400


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    settings = {"LANTERN_STREAMS_PER_ORG": str(WORKER_CONNECTIONS), "LANTERN_STREAM_POLL_SECONDS": "0.2"}
    with serve_with_organization(tmp_path_factory.mktemp("many_streams"), "many",
                                 worker_connections=WORKER_CONNECTIONS, env_updates=settings) as served:
        yield served.base_url, served.api_key


def still_open(sock):
    """The server has not closed `sock`: what it sent so far read, no end of stream after it."""
    sock.setblocking(False)  # (a socket with a timeout would wait for more instead)
    try:
        while sock.recv(65536):
            pass
        return False  # the end of the stream
    except BlockingIOError:
        return True
    except OSError as error:
        return error.errno not in (errno.ECONNRESET, errno.EPIPE)


def test_a_thousand_streams_and_more_stay_open_on_one_worker(server):
    base_url, key = server
    session = httpx.post(f"{base_url}/browsers", json={}, headers={"Authorization": f"Bearer {key}"}).json()
    port = int(base_url.rsplit(":", 1)[1])
    request = (f"GET /browsers/{session['session_id']}/telemetry/stream HTTP/1.1\r\nHost: x\r\n"
               f"Authorization: Bearer {key}\r\n\r\n").encode()
    with ExitStack() as streams:
        opened = []
        for _ in range(STREAMS):
            sock = streams.enter_context(socket.create_connection(("127.0.0.1", port), timeout=10))
            sock.sendall(request)
            head = sock.recv(4096)
            assert head.startswith(b"HTTP/1.1 200"), head[:200]
            opened.append(sock)
        time.sleep(2)  # several rounds of every stream's look for a client that left (every 0.2 s)
        closed = [number for number, sock in enumerate(opened) if not still_open(sock)]
        assert closed == [], f"{len(closed)} of {STREAMS} streams were closed by the server, the first #{closed[0]}"
