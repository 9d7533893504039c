"""A private Redis for the tests: Debian's redis-server on a free port of 127.0.0.1, nothing saved to disk,
stopped with the test session (`make install-test` installs it)."""
import shutil
import subprocess
import time

import pytest

from tests.live_server import free_port

STARTUP_SECONDS = 10


def start(workdir):
    """(process, URL) of a new redis-server, serving once this returns; (None, None) when none is installed."""
    binary = shutil.which("redis-server")
    if binary is None:
        return None, None
    port = free_port()
    process = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
                                "no", "--dir", str(workdir), "--daemonize", "no"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    import redis

    deadline = time.monotonic() + STARTUP_SECONDS
    while True:
        try:
            if redis.Redis.from_url(url, socket_connect_timeout=1).ping():
                return process, url
        except redis.RedisError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            process.wait()
            pytest.fail(f"redis-server did not start on port {port}")
        time.sleep(0.05)


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory):
    """The URL of the suite's own Redis; the test skips when redis-server is not installed."""
    process, url = start(tmp_path_factory.mktemp("redis"))
    if process is None:
        pytest.skip("no redis-server (make install-test installs Debian's)")
    yield url
    process.terminate()
    process.wait(timeout=10)
