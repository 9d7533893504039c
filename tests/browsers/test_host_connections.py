"""The app's keep-alive connections to a host (app/browsers/host_client.py): one left idle is not used again past
IDLE_SECONDS, a GET whose connection fails is sent once more, and a start goes on a connection of its own."""
import json
import socket
import threading
import time

import pytest

from app.browsers import host_client, hosts
from app.browsers.models import BrowserHost
from app.core.db import db
from lantern_wire import control

IDLE_CLOSE = 0.5


class ClosingHost:
    """A host's stand-in over HTTP/1.1 keep-alive that closes a connection once idle for IDLE_CLOSE seconds, as the
    host does after 30 s: a request arriving on such a connection meets the close, unanswered (the race a host's idle
    close leaves: the request on its way as the host closes). `calls`: (connection number, method, path)."""


    def __init__(self):
        self.calls, self.connections = [], 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = "http://127.0.0.1:%d" % self._listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(connection, self.connections), daemon=True).start()

    def _serve(self, connection, number):
        stream = connection.makefile("rb")
        answered_at = time.monotonic()
        with connection, stream:
            while line := stream.readline():
                headers = {}
                while (header := stream.readline()) not in (b"\r\n", b""):
                    name, _, value = header.decode().partition(":")
                    headers[name.strip().lower()] = value.strip()
                stream.read(int(headers.get("content-length", 0)))
                if time.monotonic() - answered_at > IDLE_CLOSE:
                    return
                method, path, _ = line.decode().split(" ", 2)
                self.calls.append((number, method, path))
                body = json.dumps(self.answer(method, path)).encode()
                connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                                   % len(body) + body)
                answered_at = time.monotonic()

    @staticmethod
    def answer(method, path):
        if path.endswith("/computer"):
            return {"results": []}
        if method == "POST":
            return {"pid": 1, "browser_path": "/chrome"}
        return {"name": "h", "capacity": 1, "sessions": []}

    def stop(self):
        self._listener.close()


@pytest.fixture
def closing_host(app):
    stand_in = ClosingHost()
    try:
        with app.app_context(), db.connection_context():
            hosts.add("closing", stand_in.url)
            yield stand_in, host_client.HostClient(BrowserHost.get(BrowserHost.name == "closing"))
    finally:
        stand_in.stop()


def click(client):
    return client.computer("s1", control.ComputerRequest(actions=[{"type": "click_mouse", "x": 1, "y": 1}]),
                           timeout=5)


def test_a_connection_idle_past_the_bound_is_not_used_again(closing_host, monkeypatch):
    stand_in, client = closing_host
    monkeypatch.setattr(host_client, "IDLE_SECONDS", IDLE_CLOSE / 2)
    assert click(client).results == []
    time.sleep(IDLE_CLOSE + 0.2)
    assert click(client).results == []  # on a new connection: the idle one was dropped, not sent on
    assert [number for number, _, _ in stand_in.calls] == [1, 2]


def test_a_computer_call_on_a_connection_the_host_closes_is_not_sent_again(closing_host):
    _, client = closing_host
    assert click(client).results == []
    time.sleep(IDLE_CLOSE + 0.2)  # within IDLE_SECONDS: the connection is used, and the host closes it
    with pytest.raises(host_client.HostError) as raised:
        click(client)
    assert raised.value.reached  # the actions may have run: not sent again


def test_a_get_on_a_connection_the_host_closes_is_sent_once_more(closing_host):
    stand_in, client = closing_host
    assert client.health().capacity == 1
    time.sleep(IDLE_CLOSE + 0.2)
    assert client.health().capacity == 1
    assert [number for number, _, _ in stand_in.calls] == [1, 2]


def test_a_start_goes_on_a_connection_of_its_own(closing_host):
    stand_in, client = closing_host
    assert client.health().capacity == 1  # a kept-alive connection in the pool
    request = control.StartRequest(session_id="s1")
    assert client.start(request, timeout=5).pid == 1
    assert client.start(request, timeout=5).pid == 1
    assert client.health().capacity == 1
    assert [(number, method) for number, method, _ in stand_in.calls] == [(1, "GET"), (2, "POST"), (3, "POST"),
                                                                          (1, "GET")]
