"""Reading the messages of a DevTools WebSocket (RFC 6455 frames, as Chromium sends them) with a bound on
what is held of one message.

    frames = FrameReader(sock, max_message=16 * 1024 * 1024, on_ping=ws.pong)
    while (message := frames.read()) is not None:   # None: the connection closed
        if isinstance(message, Oversized): ...      # skipped: its length, its first bytes
        else: json.loads(message)

websocket-client reads a message whole before handing it over, so one console.log of a 200 MB string
was 200 MB (and more while parsed) in the host, which no session's cgroup counts. This reader reads a
frame's header first: a message past `max_message` is read through in chunks and dropped, keeping only
its first PREFIX bytes (where Chromium writes "id" or "method"), so the connection goes on with the
next message. The server's frames are unmasked and uncompressed (the client offers no extension); a frame
RFC 6455 forbids (a reserved opcode, a control frame fragmented or past 125 bytes) is a ValueError, so a
control frame's length is never read on trust.
"""
import struct

CHUNK = 1024 * 1024     # bytes read at a time while skipping a message
PREFIX = 256            # bytes kept of a skipped message
BUFFER = 64 * 1024      # the socket's read buffer: headers and small messages need few system calls

CONTROL_MAX = 125       # RFC 6455: a control frame's payload at most

CONTINUATION, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
OPCODES = (CONTINUATION, TEXT, BINARY, CLOSE, PING, PONG)  # the others are reserved


class Oversized:
    """A message past the limit, skipped: its `size` in bytes and its first bytes (`prefix`)."""

    __slots__ = ("prefix", "size")

    def __init__(self, prefix, size):
        self.prefix, self.size = prefix, size


class FrameReader:
    """`read()` returns the next message (bytes), an `Oversized` for one past `max_message` (None: no
    bound), or None once the peer closed; ConnectionError when the socket ends inside a frame,
    ValueError for a frame no WebSocket server sends. Pings are answered through `on_ping(payload)`."""

    def __init__(self, sock, *, max_message=None, on_ping=None):
        self.max_message = max_message
        self._file = sock.makefile("rb", buffering=BUFFER)
        self._on_ping = on_ping
        self._skip = None  # the buffer a skipped message is read into, made at the first one

    def close(self):
        self._file.close()  # the socket stays open: its owner closes it

    def read(self):
        parts, size, prefix = [], 0, None  # prefix: the message is being skipped
        while True:
            header = self._file.read(2)
            if len(header) < 2:
                return None  # the socket ended between frames
            fin, opcode = header[0] & 0x80, header[0] & 0x0F
            if opcode not in OPCODES:
                raise ValueError(f"reserved WebSocket opcode {opcode}")
            if opcode >= CLOSE:  # control frames, possibly between a message's frames
                if not fin or header[1] & 0x7F > CONTROL_MAX:
                    raise ValueError(f"a WebSocket control frame (opcode {opcode}) fragmented or past "
                                     f"{CONTROL_MAX} bytes")
                payload = self._exactly(self._length(header[1]))
                if opcode == CLOSE:
                    return None
                if opcode == PING and self._on_ping is not None:
                    self._on_ping(payload)
                continue
            if (opcode == CONTINUATION) != bool(parts or size):
                raise ValueError(f"unexpected WebSocket opcode {opcode}")
            length = self._length(header[1])
            size += length
            if prefix is None and self.max_message is not None and size > self.max_message:
                prefix = _first_bytes(parts, PREFIX)  # not joined: they may be max_message bytes
                parts = []
            if prefix is None:
                parts.append(self._exactly(length))
            else:
                prefix += self._discard(length, PREFIX - len(prefix))
            if fin:
                if prefix is not None:
                    return Oversized(prefix, size)
                return parts[0] if len(parts) == 1 else b"".join(parts)

    def _length(self, second_byte):
        if second_byte & 0x80:
            raise ValueError("a WebSocket server's frame is never masked")
        length = second_byte & 0x7F
        if length == 126:
            return struct.unpack("!H", self._exactly(2))[0]
        if length == 127:
            return struct.unpack("!Q", self._exactly(8))[0]
        return length

    def _exactly(self, size):
        data = self._file.read(size)
        if len(data) < size:
            raise ConnectionError(f"the connection ended inside a frame ({len(data)} of {size} bytes)")
        return data

    def _discard(self, size, keep):
        """Read `size` bytes, holding at most CHUNK of them at once; the first `keep` returned."""
        if self._skip is None:  # most readers never skip a message (the computer API opens a client per call)
            self._skip = bytearray(CHUNK)
        kept, view = b"", memoryview(self._skip)
        while size:
            count = self._file.readinto(view[:min(size, CHUNK)])
            if not count:
                raise ConnectionError("the connection ended inside a frame")
            if len(kept) < keep:
                kept += bytes(view[:min(count, keep - len(kept))])
            size -= count
        return kept


def _first_bytes(parts, count):
    """The first `count` bytes of the joined `parts`."""
    kept = b""
    for part in parts:
        if len(kept) >= count:
            break
        kept += part[:count - len(kept)]
    return kept
