"""A DNS server on 127.0.0.1 that answers A queries from a table (and NXDOMAIN for the rest), and keeps
the names it was asked: the upstream of a session's resolver in tests."""
import ipaddress
import socket
import struct
import threading


class FakeDns:
    def __init__(self, answers):
        self.answers = {name.lower().rstrip("."): ipaddress.ip_address(address) for name, address in answers.items()}
        self.asked = []
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self.sock.close()
        self._thread.join(timeout=5)

    def _serve(self):
        while True:
            try:
                query, client = self.sock.recvfrom(4096)
            except OSError:
                return
            try:
                self.sock.sendto(self._answer(query), client)
            except (OSError, ValueError, struct.error):
                continue

    def _answer(self, query):
        ident, _flags, questions = struct.unpack("!HHH", query[:6])
        labels, at = [], 12
        while query[at]:
            labels.append(query[at + 1:at + 1 + query[at]].decode().lower())
            at += 1 + query[at]
        question = query[12:at + 5]
        kind = struct.unpack("!H", query[at + 1:at + 3])[0]
        name = ".".join(labels)
        self.asked.append(name)
        address = self.answers.get(name)
        if address is None:
            return struct.pack("!HHHHHH", ident, 0x8183, 1, 0, 0, 0) + question  # NXDOMAIN
        if kind != 1 or address.version != 4:
            return struct.pack("!HHHHHH", ident, 0x8180, 1, 0, 0, 0) + question  # no A record asked: empty
        record = struct.pack("!HHHIH", 0xC00C, 1, 1, 60, 4) + address.packed
        return struct.pack("!HHHHHH", ident, 0x8180, 1, 1, 0, 0) + question + record
