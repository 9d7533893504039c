"""Wake-ups across processes (app/streams/wakeups.py): on this suite's engine (SQLite or Postgres) and
on Redis; a listener that loses its connection comes back by itself."""
import threading
import time

import pytest

from app.core.db import db
from app.core.settings import settings
from app.streams import wakeups
from tests.conftest import POSTGRES_URL

WAIT = 10


class Heard:
    def __init__(self):
        self.items = []
        self.changed = threading.Condition()

    def __call__(self, subject, seq, ended):
        with self.changed:
            self.items.append((subject, seq, ended))
            self.changed.notify_all()

    def wait_for(self, item):
        with self.changed:
            assert self.changed.wait_for(lambda: item in self.items, WAIT), (item, self.items)
        return self.items


@pytest.fixture(params=["database", "redis"])
def buses(request, app):
    """(make, started): `make(heard)` builds one process's bus, listening; all stopped afterwards."""
    config = settings(app)
    if request.param == "redis":
        config = config.model_copy(update={"redis_url": request.getfixturevalue("redis_url")})
    started = []

    def make(heard):
        bus = wakeups.make_bus(config, db, heard)
        bus.listen()
        started.append(bus)
        assert bus.connected.wait(WAIT)
        return bus

    yield make
    for bus in started:
        bus.stop()


def test_the_engine_follows_the_configuration(app):
    engine = wakeups.PostgresBus if POSTGRES_URL else wakeups.SqliteBus
    assert type(wakeups.make_bus(settings(app), db, print)) is engine
    redis_bus = wakeups.make_bus(settings(app).model_copy(update={"redis_url": "redis://127.0.0.1:1/0"}), db, print)
    assert type(redis_bus) is wakeups.RedisBus
    assert wakeups.make_bus(settings(app).model_copy(update={"stream_wakeups": "off"}), db, print) is None


def test_a_wakeup_reaches_every_other_process_in_order_and_not_its_own(buses):
    heard_a, heard_b = Heard(), Heard()
    bus_a, bus_b = buses(heard_a), buses(heard_b)  # two processes, as far as the wake-ups go
    bus_a.publish("invocation:one", 3)
    bus_a.publish("telemetry:two", 7)
    bus_a.publish("browser-logs:two", ended=True)
    assert heard_b.wait_for(("browser-logs:two", 0, True)) == [
        ("invocation:one", 3, False), ("telemetry:two", 7, False), ("browser-logs:two", 0, True)]
    # Its own come back to A too (after them in the engine's order) but are not delivered.
    bus_b.publish("invocation:three")
    assert heard_a.wait_for(("invocation:three", 0, False)) == [("invocation:three", 0, False)]


def test_an_unreachable_engine_loses_wakeups_quietly_and_the_listener_keeps_trying(app):
    heard = Heard()
    bus = wakeups.make_bus(settings(app).model_copy(update={"redis_url": "redis://127.0.0.1:1/0"}), db, heard)
    bus.publish("invocation:lost")  # no exception: followers poll meanwhile
    bus.listen()
    try:
        time.sleep(wakeups.RECONNECT_SECONDS * 1.5)
        assert not bus.connected.is_set() and heard.items == []
    finally:
        bus.stop()


@pytest.mark.skipif(not POSTGRES_URL, reason="Postgres only: the LISTEN connection")
def test_a_listen_connection_that_drops_is_opened_again(buses):
    heard = Heard()
    buses(heard)
    publisher = buses(Heard())
    with db.connection_context():
        killed = db.execute_sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                                (wakeups.APPLICATION_NAME,)).fetchall()
    assert killed
    deadline = time.monotonic() + WAIT
    # Published until heard: those sent while it reconnects are lost, as followers' polls cover.
    while ("invocation:after", 0, False) not in heard.items:
        assert time.monotonic() < deadline, "the listener did not come back"
        publisher.publish("invocation:after")
        time.sleep(0.2)
