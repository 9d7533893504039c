"""Copy bytes both ways between two connected sockets until either side ends (a relay).

Plain threads: under gunicorn's gevent worker they are greenlets, in the browser host
real threads. The data is not looked at, so a WebSocket relayed this way costs two
recv/send pairs per message and no parsing.
"""
import os
import socket
import stat
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


def connect_unix(path, timeout, *, owner=None):
    """A stream socket connected to the Unix socket at `path`, which must be a socket (of user `owner`
    when given) and no link: a sandbox that can write the socket's folder could otherwise point whoever
    connects, as root, at any socket of the host. It is opened without following a link and reached
    through its descriptor (which also lifts the 107 bytes a socket's path may hold)."""
    node = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        found = os.fstat(node)
        if not stat.S_ISSOCK(found.st_mode) or (owner is not None and found.st_uid != owner):
            raise ConnectionRefusedError(f"{path} is not a socket of user {owner}")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(f"/proc/self/fd/{node}")
        except OSError:
            sock.close()
            raise
        return sock
    finally:
        os.close(node)


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
