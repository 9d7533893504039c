"""Wake-ups across processes: a writer announces a subject after its commit, and the followers of
that subject in every other process (workers, app servers) wake at once instead of at their next poll.

The database stays the source of truth: a wake-up carries no event, only "this subject moved"
(and, for telemetry, the newest seq; or that the subject ended). Each process that follows
something runs one listener (started by the first follower after the process forked); what it
hears goes to `deliver`, which pokes the local channel the followers wait on. One engine carries
them, chosen by configuration:

    LANTERN_REDIS_URL set      Redis pub/sub on channel `lantern:streams`
    Postgres database          LISTEN/NOTIFY on channel `lantern_streams`
    SQLite database            rows in `stream_wakeup`, which each listener polls every
                               STREAM_WAKEUP_POLL_SECONDS (`PRAGMA data_version` first: the
                               table is read only when another connection committed)

When the engine is unreachable (Redis down, the LISTEN connection dropped), publishing fails
quietly and the listener reconnects every second; followers keep their own poll
(STREAM_POLL_SECONDS) meanwhile, so they are late, never wrong, and recover by themselves.
"""
import json
import logging
import os
import selectors
import sqlite3
import threading
import time
import uuid

from app.core import clock

log = logging.getLogger(__name__)

CHANNEL = "lantern_streams"
REDIS_CHANNEL = "lantern:streams"
RECONNECT_SECONDS = 1.0
LISTEN_TICK_SECONDS = 1.0  # how often a listener looks whether it should stop
APPLICATION_NAME = "lantern-wakeups"  # the LISTEN connection, as Postgres shows it
SQLITE_KEEP_SECONDS = 60  # wake-up rows older than this are deleted by the listeners


def _payload(origin, subject, seq, ended):
    return json.dumps([origin, subject, seq, ended], separators=(",", ":"))


class Bus:
    """Publishes wake-ups and, in a listening process, hands other processes' to `deliver`."""

    def __init__(self, deliver):
        self.deliver = deliver
        self.origin = None
        self._listener_pid = None
        self._lock = threading.Lock()
        self.connected = threading.Event()  # the listener hears
        self._stopping = threading.Event()

    def publish(self, subject, seq=0, ended=False):
        try:
            self._publish(_payload(self._origin(), subject, seq, ended))
        except Exception as error:  # noqa: BLE001 - followers poll meanwhile: late, not lost
            log.warning("wake-up for %s not published (%s); followers see it at their next poll", subject, error)

    def listen(self):
        """Start this process's listener once (again after a fork: threads do not survive one)."""
        if self._listener_pid == os.getpid():
            return
        with self._lock:
            if self._listener_pid == os.getpid():
                return
            self._listener_pid = os.getpid()
            self.connected.clear()
            threading.Thread(target=self._run, name=f"wakeups {type(self).__name__}", daemon=True).start()

    def stop(self):
        """End this process's listener (within a second); publishing still works."""
        self._stopping.set()

    def _origin(self):
        if self.origin is None or not self.origin.startswith(f"{os.getpid()}:"):
            self.origin = f"{os.getpid()}:{uuid.uuid4().hex[:12]}"
        return self.origin

    def _heard(self, payload):
        try:
            origin, subject, seq, ended = json.loads(payload)
        except (ValueError, TypeError):
            return
        if origin != self.origin:  # this process woke its own followers already
            self.deliver(subject, seq, ended)

    def _run(self):
        while not self._stopping.is_set():
            try:
                self._listen()
            except Exception as error:  # noqa: BLE001 - any loss of the engine: retry, followers poll
                log.warning("wake-up listener lost its connection (%s); retrying in %s s", error, RECONNECT_SECONDS)
            self.connected.clear()
            self._stopping.wait(RECONNECT_SECONDS)


class PostgresBus(Bus):
    def __init__(self, deliver, database, connect_params):
        super().__init__(deliver)
        self.database = database
        self.connect_params = connect_params

    def _publish(self, payload):
        # On the caller's connection: inside its transaction it is delivered at commit, or not at all.
        _execute(self.database, "SELECT pg_notify(%s, %s)", (CHANNEL, payload))

    def _listen(self):
        import psycopg

        self._origin()
        with psycopg.connect(autocommit=True, application_name=APPLICATION_NAME, **self.connect_params) as connection:
            connection.execute(f"LISTEN {CHANNEL}")
            self.connected.set()
            pgconn, quiet_since = connection.pgconn, time.monotonic()
            # A selector (epoll), not select(), which refuses descriptors past 1023 (a worker with a
            # thousand streams open has such numbers); gevent makes it cooperative. The libpq calls
            # below never block.
            with selectors.DefaultSelector() as selector:
                selector.register(pgconn.socket, selectors.EVENT_READ)
                while not self._stopping.is_set():
                    if not selector.select(LISTEN_TICK_SECONDS):
                        if time.monotonic() - quiet_since >= 30:
                            connection.execute("SELECT 1")  # notices a connection that died quietly
                            quiet_since = time.monotonic()
                        continue
                    quiet_since = time.monotonic()
                    pgconn.consume_input()
                    while (notice := pgconn.notifies()) is not None:
                        self._heard(notice.extra.decode())


class RedisBus(Bus):
    def __init__(self, deliver, url):
        super().__init__(deliver)
        import redis

        self.url = url
        self._client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)

    def _publish(self, payload):
        self._client.publish(REDIS_CHANNEL, payload)

    def _listen(self):
        import redis

        self._origin()
        client = redis.Redis.from_url(self.url, socket_connect_timeout=2, health_check_interval=30)
        with client.pubsub(ignore_subscribe_messages=True) as pubsub:
            pubsub.subscribe(REDIS_CHANNEL)
            self.connected.set()
            while not self._stopping.is_set():
                message = pubsub.get_message(timeout=LISTEN_TICK_SECONDS)
                if message is not None and message["type"] == "message":
                    self._heard(message["data"].decode())


class SqliteBus(Bus):
    def __init__(self, deliver, database, path, poll_seconds):
        super().__init__(deliver)
        self.database = database
        self.path = path
        self.poll_seconds = poll_seconds

    def _publish(self, payload):
        _execute(self.database, "INSERT INTO stream_wakeup (payload, created_at) VALUES (?, ?)",
                 (payload, clock.micros(clock.now())))

    def _listen(self):
        self._origin()
        connection = sqlite3.connect(self.path, timeout=5, isolation_level=None, check_same_thread=False)
        try:
            cursor_id = connection.execute("SELECT coalesce(max(id), 0) FROM stream_wakeup").fetchone()[0]
            version, pruned_at = None, 0.0
            self.connected.set()
            while not self._stopping.is_set():
                now = time.monotonic()
                current = connection.execute("PRAGMA data_version").fetchone()[0]
                if current != version:
                    version = current
                    rows = connection.execute("SELECT id, payload FROM stream_wakeup WHERE id > ? ORDER BY id",
                                              (cursor_id,)).fetchall()
                    for _, payload in rows:
                        self._heard(payload)
                    if rows:
                        cursor_id = rows[-1][0]
                if now - pruned_at >= SQLITE_KEEP_SECONDS / 6:
                    pruned_at = now
                    cutoff = clock.micros(clock.now()) - SQLITE_KEEP_SECONDS * 1_000_000
                    connection.execute("DELETE FROM stream_wakeup WHERE created_at < ?", (cutoff,))
                time.sleep(self.poll_seconds)
        finally:
            connection.close()


def _execute(database, sql, params):
    """On the caller's open connection (a connection_context would close it on the way out), else a short one."""
    if not database.is_closed():
        database.execute_sql(sql, params)
        return
    with database.connection_context():
        database.execute_sql(sql, params)


def make_bus(config, database, deliver):
    """The bus these settings (app/config.py) name (module docstring) for the app's opened `database` (its
    engine and connection settings are the ones open_database read from DATABASE_URL), or None
    when wake-ups are off."""
    from peewee import PostgresqlDatabase, SqliteDatabase

    if config.stream_wakeups == "off":
        return None
    if config.redis_url:
        return RedisBus(deliver, config.redis_url)
    engine = database.obj
    if isinstance(engine, PostgresqlDatabase):
        return PostgresBus(deliver, database, {**engine.connect_params, "dbname": engine.database})
    if isinstance(engine, SqliteDatabase) and engine.database != ":memory:":
        return SqliteBus(deliver, database, engine.database, config.stream_wakeup_poll_seconds)
    return None
