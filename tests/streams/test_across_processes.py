"""Followers in two gunicorn workers woken by a write in a third process (as a browser host writes), with
their poll interval at 60 s: what reaches them before then came through the wake-up bus."""
import json
import threading

import httpx
import pytest

from app import create_app
from app.browsers import telemetry
from app.browsers.models import BrowserSession
from app.core import clock
from app.core.db import db
from tests.live_server import serve_with_organization

FOLLOWERS = 6  # over 2 workers
WAIT = 20  # well under the 60 s poll


class Follower(threading.Thread):
    def __init__(self, base_url, key, session_id):
        super().__init__(daemon=True)
        self.url = f"{base_url}/browsers/{session_id}/telemetry/stream"
        self.headers = {"Authorization": f"Bearer {key}"}
        self.texts, self.opened, self.closed = [], threading.Event(), threading.Event()
        self.arrived = threading.Condition()

    def run(self):
        try:
            with httpx.stream("GET", self.url, headers=self.headers, timeout=httpx.Timeout(10, read=90)) as response:
                self.opened.set()
                for line in response.iter_lines():
                    if line.startswith("data: "):
                        with self.arrived:
                            self.texts.append(json.loads(line[6:])["event"]["data"]["text"])
                            self.arrived.notify_all()
        finally:
            self.closed.set()

    def wait_for(self, count):
        with self.arrived:
            return self.arrived.wait_for(lambda: len(self.texts) >= count, WAIT)


@pytest.fixture(params=["database", "redis"])
def served(request, tmp_path):
    env = {"LANTERN_STREAM_POLL_SECONDS": "60"}
    if request.param == "redis":
        env["LANTERN_REDIS_URL"] = request.getfixturevalue("redis_url")
    with serve_with_organization(tmp_path, "Wake-ups", workers=2, env_updates=env) as served:
        yield served


def test_a_write_in_another_process_reaches_followers_in_every_worker_at_once(served, tmp_path):
    headers = {"Authorization": f"Bearer {served.api_key}"}
    session_id = httpx.post(f"{served.base_url}/browsers", headers=headers, timeout=10,
                            json={"telemetry": {"enabled": True, "browser": {"console": {"enabled": True}}}}
                            ).json()["session_id"]
    followers = [Follower(served.base_url, served.api_key, session_id) for _ in range(FOLLOWERS)]
    for follower in followers:
        follower.start()
        assert follower.opened.wait(10)

    # A third process writes as a worker applying a host's reports does (no activity): the archive and a wake-up.
    # The deployment's settings, keys included (without them the app would make a key file in the repo's instance/).
    writer = create_app({"DATABASE_URL": served.env["LANTERN_DATABASE_URL"], "BLOB_DIR": str(tmp_path / "blobs"),
                         "REDIS_URL": served.env.get("LANTERN_REDIS_URL"),
                         "ENCRYPTION_KEYS": served.env["LANTERN_ENCRYPTION_KEYS"]})
    try:
        with writer.app_context(), db.connection_context():
            session = BrowserSession.get_by_id(session_id)
            for text in ("one", "two"):
                telemetry.ingest(session, [{"type": "console_log", "category": "console",
                                            "ts": clock.micros(clock.now()), "source": {"kind": "cdp"},
                                            "data": {"text": text, "level": "log"}}], activity=False)
    finally:
        writer.extensions["database"].close_all()
    for follower in followers:
        assert follower.wait_for(2), f"a follower got {follower.texts} within {WAIT} s"
        assert follower.texts == ["one", "two"]

    # Ended through one worker: the streams in the other close too, without waiting for their poll.
    assert httpx.delete(f"{served.base_url}/browsers/{session_id}", headers=headers, timeout=10).status_code == 204
    for follower in followers:
        assert follower.closed.wait(WAIT), "a stream outlived its session"
