"""Copy bytes both ways between two connected sockets until either side ends (a relay).

Plain threads: under gunicorn's gevent worker they are greenlets, in the browser host
real threads. The data is not looked at, so a WebSocket relayed this way costs two
recv/send pairs per message and no parsing.
"""
import socket
import threading

CHUNK = 256 * 1024


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
