import socket

import pytest

from tests.connect_server import FakeConnect


@pytest.fixture
def connect():
    server = FakeConnect().start()
    yield server
    server.stop()


@pytest.fixture
def closed_port_url():
    """A 127.0.0.1 URL where nothing listens."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"
