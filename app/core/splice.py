"""Copy bytes both ways between two connected sockets until either side ends (a relay).

Plain threads: under gunicorn's gevent worker they are greenlets, in the browser host
real threads. The data is not looked at, so a WebSocket relayed this way costs two
recv/send pairs per message and no parsing.
"""
import os
import socket
import threading

CHUNK = 256 * 1024
# A client's WebSocket handshake headers the server on the other side needs; Origin, cookies and
# the caller's credentials are not passed on (Chromium refuses unknown origins with 403).
PASSED_HEADERS = ("Sec-WebSocket-Key", "Sec-WebSocket-Version", "Sec-WebSocket-Extensions", "Sec-WebSocket-Protocol")


def upgrade_request(path, headers, incoming):
    """The WebSocket upgrade request for `path`, with `headers` and the handshake headers of `incoming`."""
    lines = [f"GET {path} HTTP/1.1", *headers, "Upgrade: websocket", "Connection: Upgrade"]
    lines += [f"{name}: {incoming[name]}" for name in PASSED_HEADERS if incoming.get(name)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def connect_unix(path, timeout):
    """A stream socket connected to the Unix socket at `path`. A socket's path holds 107 bytes at most, and
    a browser host's folders can be deeper: a longer one is reached through its folder's descriptor."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        if len(os.fsencode(path)) < 100:
            sock.connect(path)
        else:
            folder = os.open(os.path.dirname(path), os.O_PATH)
            try:
                sock.connect(f"/proc/self/fd/{folder}/{os.path.basename(path)}")
            finally:
                os.close(folder)
    except OSError:
        sock.close()
        raise
    return sock


def splice(client, upstream):
    """Return once both directions have ended; each side is shut down when the other ends."""
    other = threading.Thread(target=_copy, args=(upstream, client), daemon=True)
    other.start()
    _copy(client, upstream)
    other.join()


def _copy(source, sink):
    try:
        while data := source.recv(CHUNK):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (sink, source):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
