"""A stand-in for a session's agent (browserhost/agent/) in the host's forwarding tests: HTTP/1.1 on the listening
Unix socket it gets as stdin, one request per connection, with routes that show what the host forwards:

    GET  /fs/echo           200 {"line": the request line, "headers": [[name, value], ...]}
    PUT  /fs/sink           reads the body a chunk at a time: 201 {"size", "sha256"}
    GET  /fs/source?size=N  N bytes of PATTERN repeated, with their Content-Length
    PUT  /fs/refuse         413 before reading the body (which it then drops, as the agent does)
    GET  /fs/die            the process exits without answering
    GET  /fs/hang           never answers (a stuck agent), keeping the connection open
    PUT  /fs/slam           413 without reading the body, then closes at once (the host's sending fails)
    GET  /fs/forge?chunked=1
                            a keep-alive answer (Content-Length, or chunked), a header the app must not get, and a
                            forged second answer written after it on the same connection
"""
import hashlib
import json
import os
import socket
import time
from http.server import BaseHTTPRequestHandler
from socketserver import ThreadingMixIn, UnixStreamServer
from urllib.parse import parse_qs, urlsplit

PATTERN = bytes(range(256)) * 1024
FORGED_ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 16\r\n\r\n{\"forged\": true}"
CHUNK = 256 * 1024


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # noqa: A002 - the stdlib's name
        pass

    def do_GET(self):  # noqa: N802 - the stdlib's name
        url = urlsplit(self.path)
        if url.path == "/fs/echo":
            self.json(200, {"line": self.requestline, "headers": list(self.headers.items())})
        elif url.path == "/fs/source":
            self.source(int(parse_qs(url.query)["size"][0]))
        elif url.path == "/fs/die":
            os._exit(3)
        elif url.path == "/fs/hang":
            time.sleep(600)
        elif url.path == "/fs/sink" and self.command == "PUT":
            self.sink()
        elif url.path == "/fs/slam":
            self.json(413, {"code": "insufficient_room", "message": "0 bytes left", "room_bytes": 0})
            self.connection.close()
        elif url.path == "/fs/forge":
            self.forge(parse_qs(url.query).get("chunked") == ["1"])
        elif url.path == "/fs/refuse":
            self.json(413, {"code": "insufficient_room", "message": "0 bytes left", "room_bytes": 0})
            self.connection.shutdown(socket.SHUT_WR)
            while self.rfile.read1(CHUNK):
                pass
        else:
            self.json(404, {"code": "not_found", "message": url.path})

    do_PUT = do_POST = do_DELETE = do_GET  # noqa: N815

    def json(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True

    def forge(self, chunked):
        body = b'{"first": true}'
        framing = b"Transfer-Encoding: chunked\r\n" if chunked else b"Content-Length: %d\r\n" % len(body)
        framed = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body) if chunked else body
        forged = FORGED_ANSWER
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: keep-alive\r\n"
                         b"Set-Cookie: session=stolen\r\n" + framing + b"\r\n" + framed + forged)
        self.close_connection = True

    def sink(self):
        left, digest, size = int(self.headers["Content-Length"]), hashlib.sha256(), 0
        while left:
            chunk = self.rfile.read(min(CHUNK, left))
            if not chunk:
                break
            digest.update(chunk)
            size += len(chunk)
            left -= len(chunk)
        self.json(201, {"size": size, "sha256": digest.hexdigest()})

    def source(self, size):
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(size))
        self.send_header("Connection", "close")
        self.end_headers()
        while size:
            chunk = PATTERN[:min(size, len(PATTERN))]
            self.wfile.write(chunk)
            size -= len(chunk)
        self.close_connection = True


class Server(ThreadingMixIn, UnixStreamServer):
    daemon_threads = True

    def __init__(self, listener):
        super().__init__(listener.getsockname(), Handler, bind_and_activate=False)
        self.socket.close()
        self.socket = listener


if __name__ == "__main__":
    Server(socket.socket(fileno=0)).serve_forever()
