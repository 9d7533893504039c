"""Every CDP client of the host holds at most cdp.MAX_MESSAGE bytes of one message (browserhost/cdp.py): while a
session's Chromium restarts, a process of the session could listen on its DevTools port and answer the host with a
message of any size. Against a fake DevTools endpoint, no Chromium needed."""
import base64
import hashlib
import itertools
import json
import socket
import struct
import threading
import tracemalloc

import pytest

from browserhost import cdp
from browserhost.cdp import CdpClient, CdpError

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"  # RFC 6455's


def read_frame(connection):
    """A client's frame (masked): its payload."""
    head = connection.recv(2, socket.MSG_WAITALL)
    length = head[1] & 0x7F
    if length == 126:
        length = struct.unpack("!H", connection.recv(2, socket.MSG_WAITALL))[0]
    elif length == 127:
        length = struct.unpack("!Q", connection.recv(8, socket.MSG_WAITALL))[0]
    mask = connection.recv(4, socket.MSG_WAITALL)
    payload = connection.recv(length, socket.MSG_WAITALL) if length else b""
    return bytes(byte ^ mask[index % 4] for index, byte in enumerate(payload))


def send_text(connection, size, parts):
    """A text frame of `size` bytes, its payload sent as it is made from `parts` (never whole here either)."""
    connection.sendall(bytes([0x81, 127]) + struct.pack("!Q", size))
    for part in parts:
        connection.sendall(part)


class HostileEndpoint:
    """Answers a WebSocket handshake, then the first command with a message of `size` bytes, the second as a browser
    would."""

    def __init__(self, size):
        self.size = size
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"ws://127.0.0.1:{self.listener.getsockname()[1]}/devtools/browser/x"

    def serve(self):
        connection, _ = self.listener.accept()
        with connection:
            try:
                self.exchange(connection)
            except (OSError, ValueError):  # the client closed first (a close frame, or its end)
                pass

    def exchange(self, connection):
        request = b""
        while b"\r\n\r\n" not in request:
            request += connection.recv(4096)
        key = next(line.split(b":", 1)[1].strip() for line in request.split(b"\r\n")
                   if line.lower().startswith(b"sec-websocket-key:"))
        accept = base64.b64encode(hashlib.sha1(key + GUID).digest())
        connection.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                           b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n")
        first = json.loads(read_frame(connection))
        prefix = b'{"id":%d,"result":{"value":"' % first["id"]
        filler = self.size - len(prefix) - 3
        filling = (b"a" * min(1 << 20, filler - sent) for sent in range(0, filler, 1 << 20))
        send_text(connection, self.size, itertools.chain([prefix], filling, [b'"}}']))
        second = json.loads(read_frame(connection))
        answer = json.dumps({"id": second["id"], "result": {"product": "Chrome/1"}}).encode()
        send_text(connection, len(answer), [answer])
        connection.recv(1)

    def close(self):
        self.listener.close()


@pytest.fixture
def endpoint():
    hostile = HostileEndpoint(cdp.MAX_MESSAGE + 1)
    yield hostile
    hostile.close()


def test_a_message_past_the_hosts_bound_fails_its_call_unheld_and_the_client_goes_on(endpoint):
    assert cdp.MAX_MESSAGE == 64 * 1024 * 1024
    tracemalloc.start()
    try:
        with CdpClient(endpoint.url, timeout=60) as client:  # no bound given: the host's own
            with pytest.raises(CdpError, match=f"past this connection's bound of {cdp.MAX_MESSAGE} bytes"):
                client.call("Runtime.evaluate", {"expression": "1"})
            assert client.call("Browser.getVersion")["product"] == "Chrome/1"
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 1024 * 1024, peak


def test_no_client_can_be_given_a_larger_bound_or_none():
    assert CdpClient.__init__.__kwdefaults__["max_message"] == cdp.MAX_MESSAGE
    endpoint = HostileEndpoint(10)
    try:
        client = CdpClient(endpoint.url, max_message=None)
        with client:
            assert client.max_message == cdp.MAX_MESSAGE
    finally:
        endpoint.close()
