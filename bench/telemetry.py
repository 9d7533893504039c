"""Browser session telemetry: ingest throughput, SSE fan-out, ring-buffer memory (`make bench`).

1. Ingest: one gevent worker; client threads POST batches of console_log events to
   /browsers/{id}/telemetry/events (one session per batch size) for a bounded time;
   events/s and requests/s accepted, request latency, then a check that the newest
   archived seq (GET ...?order=desc&limit=1) equals the number of events accepted.
2. Fan-out: one gevent worker, one session, N SSE readers on /browsers/{id}/telemetry/stream
   (raw sockets, one selector loop in one thread: it only timestamps and stores what
   arrives; the chunked bodies are decoded and parsed after the run), one writer posting
   batches at a steady rate; each event's data.text is its send time, so readers compute
   the delivery latency (same machine, same clock). The session is then ended (DELETE),
   which closes every stream. Every reader must see every seq exactly once, in order.
3. Memory: in-process, MemoryChannels(capacity=1024) filled as app.browsers.telemetry
   fills it ((seq, (type, envelope_frame(seq, body))) per event), measured with tracemalloc.
4. Host ingest, two paths in one run, on one database: (a) the baseline, what a browser host did before
   it became its own program: in-process, telemetry.ingest(..., activity=False) in a loop (the call the
   app now makes for each telemetry report); (b) the path now: a browserhost.uplink.Reports fed batches
   of --host-batch console events (the same events; the capture's flusher hands up to 500 at a time) as
   fast as it takes them, sending to gunicorn (1 gevent worker) with the credential of a host added and
   registered for the run, into a session whose host the bench sets to it in the database. Reports drops
   (and counts) events past its limit, and a throughput with drops would not count: the producer waits
   for room instead, with flush() every FLUSH_EVERY_EVENTS events (four full requests), so the queue
   never nears the limit (the host's default); it then empties once per four requests, for only as long
   as the producer takes to queue the next ones. The two paths run in turns (--host-rounds), about
   --seconds each in all (a turn of (b) ends once what it queued is acknowledged), so that a load beside
   the bench weighs on both alike. Each row: events/s from the first event queued to the last one
   acknowledged (Reports.flush; each call of (a) returns after its commit), summed over the turns, then
   a check that the archive holds exactly every event acknowledged (the session's rows and its
   last_seq); the ratio (b)/(a).

Each prints a Markdown table for docs/benchmarks.md. Traffic goes to 127.0.0.1 only.
"""
import argparse
import collections
import gc
import http.client
import json
import os
import resource
import selectors
import shlex
import socket
import statistics
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from invocation_fanout import request  # noqa: E402  (bench/ is this script's first sys.path entry)

from browserhost.settings import HostSettings  # noqa: E402
from browserhost.uplink import AppClient, Refused, Reports  # noqa: E402
from lantern_wire.hosts import REGISTER  # noqa: E402
from tests.live_server import gunicorn, private_database, run_cli, server_env  # noqa: E402

SESSION = {"telemetry": {"enabled": True, "browser": {"console": {"enabled": True}}}, "timeout_seconds": 3600}
COMMAND = shlex.join([".venv/bin/python", "bench/telemetry.py", *sys.argv[1:]])
CAPACITY = 1024
# 4. (b): the host's queue limit, and how often the producer waits for what it queued to be acknowledged
# (four full requests: Reports sends up to 5,000 events a request).
HOST_REPORT_QUEUE = HostSettings().browser_host_report_queue
FLUSH_EVERY_EVENTS = 20_000


def console_log(text):
    return {"type": "console_log", "source": {"kind": "cdp"}, "data": {"text": text, "level": "log"}}


def call(host, port, method, path, key, body=None):
    """One request on a new connection (gunicorn closes keep-alive connections idle for 2 s)."""
    conn = http.client.HTTPConnection(host, port, timeout=60)
    try:
        return request(conn, method, path, key, body)
    finally:
        conn.close()


def percentile(values, p):
    """`values` sorted, in seconds; milliseconds out."""
    return values[min(len(values) - 1, int(p * len(values)))] * 1000 if values else 0.0


def latency_cells(values):
    values = sorted(values)
    if not values:
        return "- | - | -"
    return f"{statistics.median(values) * 1000:.1f} | {percentile(values, 0.95):.1f} | {percentile(values, 0.99):.1f}"


# 1. Ingest ---------------------------------------------------------------------------------------

def ingest(host, port, key, batch, *, threads, seconds):
    session = call(host, port, "POST", "/browsers", key, SESSION)
    path = f"/browsers/{session['session_id']}/telemetry/events"
    # ~200-byte events once normalized; the same body every time (the server assigns seq).
    body = json.dumps({"events": [console_log(f"bench event {n:04d} " + "x" * 80) for n in range(batch)]})
    latencies, errors, accepted, last_seqs = [], [], [0], []
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds

    def worker():
        client = http.client.HTTPConnection(host, port, timeout=60)
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        try:
            while time.monotonic() < stop_at:
                started = time.perf_counter()
                client.request("POST", path, body=body, headers=headers)
                response = client.getresponse()
                data = response.read()
                elapsed = time.perf_counter() - started
                with lock:
                    latencies.append(elapsed)
                    if response.status == 201:
                        result = json.loads(data)
                        accepted[0] += result["accepted"]
                        last_seqs.append(result["last_seq"])
                        if result["dropped"]:
                            errors.append(f"dropped {result['dropped']}")
                    else:
                        errors.append(f"{response.status} {data[:120]!r}")
        except Exception as error:  # counted, shown below the table
            with lock:
                errors.append(repr(error))
        finally:
            client.close()

    started = time.perf_counter()
    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    wall = time.perf_counter() - started
    newest = call(host, port, "GET", f"{path}?order=desc&limit=1", key)
    newest_seq = newest[0]["seq"] if newest else 0
    call(host, port, "DELETE", f"/browsers/{session['session_id']}", key)
    total = accepted[0]
    check = "ok" if newest_seq == total == max(last_seqs, default=0) else (
        f"MISMATCH (newest seq {newest_seq}, accepted {total}, highest last_seq {max(last_seqs, default=0)})")
    return {"batch": batch, "requests": len(latencies), "rps": len(latencies) / wall, "events": total,
            "eps": total / wall, "latency": latency_cells(latencies), "errors": errors, "check": check}


def run_ingest(host, port, key, args):
    sizes = sorted({1, 10, args.batch})
    print(f"### `{COMMAND}` (1. ingest)\n")
    print(f"1 gevent worker, 1 session per row, {args.threads} client threads, {args.seconds:g} s per row, "
          f"{os.cpu_count()} cores shared by client and server\n")
    print("| events/request | requests | req/s | events accepted | events/s | p50 ms | p95 ms | p99 ms "
          "| errors | newest seq |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    problems = []
    for batch in sizes:
        r = ingest(host, port, key, batch, threads=args.threads, seconds=args.seconds)
        print(f"| {batch} | {r['requests']} | {r['rps']:.0f} | {r['events']} | {r['eps']:.0f} | {r['latency']} "
              f"| {len(r['errors'])} | {r['check']} |", flush=True)
        problems += [f"batch {batch}: {e}" for e in r["errors"][:3]]
    if problems:
        print("\ningest errors: " + "; ".join(problems))
    print()


class InProcess:
    """(a) The baseline: the call the app makes for each telemetry report, in a loop, in this process."""

    name = "in-process `telemetry.ingest(..., activity=False)` (baseline)"

    def __init__(self, session_id, batch):
        self.session_id, self.batch = session_id, batch
        self.calls, self.requests, self.accepted, self.wall, self.problems = 0, "-", 0, 0.0, []

    def run(self, seconds):
        from app.browsers import telemetry
        from app.browsers.models import BrowserSession

        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            self.accepted += telemetry.ingest(BrowserSession(id=self.session_id), self.batch, activity=False)[0]
            self.calls += 1
        self.wall += time.perf_counter() - started

    def stop(self):
        pass


class CountingClient(AppClient):
    """The host's AppClient, tallying what the app answered to the reports (read once Reports is flushed):
    requests answered, refused ones by status (Reports sends a 413's reports again in halves), report results."""

    def __init__(self, app_url, credential):
        super().__init__(app_url, credential)
        self.requests, self.accepted, self.statuses = 0, 0, collections.Counter()
        self.refused = collections.Counter()

    def post(self, path, body):
        try:
            answer = super().post(path, body)
        except Refused as error:
            self.refused[error.status] += 1
            raise
        self.requests += 1
        for result in answer["results"]:
            self.statuses[result["status"]] += 1
            self.accepted += result.get("accepted", 0)
        return answer


class OverHttp:
    """(b) The browser host's path now: one Reports (one sender thread, as a host has), fed the batch as fast
    as it takes it, waiting for room every FLUSH_EVERY_EVENTS events (module docstring, item 4)."""

    name = "HTTP: `Reports` -> POST /internal/browser-hosts/reports"

    def __init__(self, app_url, credential, session_id, batch):
        self.session_id, self.batch = session_id, batch
        self.client = CountingClient(app_url, credential)
        self.reports = Reports(self.client, limit=HOST_REPORT_QUEUE).start()
        self.every = max(1, FLUSH_EVERY_EVENTS // len(batch))
        self.calls, self.wall, self.problems = 0, 0.0, []

    def run(self, seconds):
        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            self.reports.telemetry(self.session_id, self.batch)
            self.calls += 1
            if self.calls % self.every == 0 and not self.reports.flush(timeout=60):
                self.problems.append("a flush took over 60 s")
                break
        if not self.reports.flush(timeout=60):
            self.problems.append("the last flush took over 60 s")
        self.wall += time.perf_counter() - started  # from the first event queued to the last acknowledged

    def stop(self):
        self.reports.stop()
        if self.reports.dropped:
            self.problems.append(f"Reports dropped {self.reports.dropped} events")
        if set(self.client.statuses) - {"ok"}:
            self.problems.append(f"answers {dict(self.client.statuses)}")
        for status, count in sorted(self.client.refused.items()):
            self.problems.append(f"{count} request(s) refused with HTTP {status}")

    @property
    def requests(self):
        return self.client.requests

    @property
    def accepted(self):
        return self.client.accepted


def archive_check(path):
    """'all' when the archive's rows and the session's last_seq both equal the events queued and acknowledged."""
    from app.browsers.models import BrowserSession, TelemetryEvent

    rows = TelemetryEvent.select().where(TelemetryEvent.session == path.session_id).count()
    session = BrowserSession.get_by_id(path.session_id)
    queued = path.calls * len(path.batch)
    if rows == session.last_seq == path.accepted == queued and not session.telemetry_dropped:
        return "all"
    return (f"MISMATCH (queued {queued}, acknowledged {path.accepted}, rows {rows}, last_seq {session.last_seq}, "
            f"telemetry_dropped {session.telemetry_dropped})")


def run_host_ingest(args):
    """4. The browser host's path into the archive, on the database TEST_DATABASE_URL names (else SQLite):
    (a) in-process and (b) over HTTP, each into a session of its own, in turns of seconds / rounds."""
    with tempfile.TemporaryDirectory() as workdir, private_database(Path(workdir)) as database_url:
        env = server_env(database_url, workdir)
        # The bench's host sends reports but no heart-beat: it must not be found lost (its sessions ended).
        env["LANTERN_BROWSER_HOST_TIMEOUT_SECONDS"] = "3600"
        env["LANTERN_TELEMETRY_ARCHIVE_SESSION_MAX_BYTES"] = "null"  # a long run would go past a session's budget
        run_cli(env, "db", "upgrade")
        key = run_cli(env, "orgs", "create", "--name", "bench", "--owner-email", "b@example.test").split()[-1]
        credential = run_cli(env, "browsers", "hosts", "add", "bench-host", "--address", "http://127.0.0.1:1",
                             "--quiet").strip()
        os.environ.update({name: value for name, value in env.items() if name.startswith("LANTERN_")})
        from app import create_app
        from app.browsers.models import BrowserHost, BrowserSession
        from app.core.db import db
        from lantern_wire.telemetry import validate_event

        app = create_app()

        def new_session():
            created = app.test_client().post("/browsers", json=SESSION, headers={"Authorization": f"Bearer {key}"})
            return created.get_json()["session_id"]

        now_us = int(time.time() * 1e6)
        batch = [validate_event(console_log(f"line {n} " + "x" * 60), now_us=now_us + n)
                 for n in range(args.host_batch)]
        with gunicorn(env, Path(workdir) / "gunicorn.log") as app_url:
            AppClient(app_url, credential).post(REGISTER, {"address": "http://127.0.0.1:1", "capacity": 1,
                                                           "headful": False, "unavailable_reason": None})
            local_session, remote_session = new_session(), new_session()
            with app.app_context(), db.connection_context():
                host = BrowserHost.get(BrowserHost.name == "bench-host")
                BrowserSession.update(host=host.id).where(BrowserSession.id == remote_session).execute()
                paths = [InProcess(local_session, batch), OverHttp(app_url, credential, remote_session, batch)]
                for _ in range(args.rounds):
                    for path in paths:
                        path.run(args.seconds / args.rounds)
                for path in paths:
                    path.stop()
                checks = [archive_check(path) for path in paths]
        backend = "Postgres" if database_url.startswith("postgres") else "SQLite"
        print(f"### `{COMMAND}` (4. host ingest)\n")
        print(f"{backend}, {args.host_batch} events per call, {args.seconds:g} s per path in {args.rounds} turns; "
              f"HTTP: gunicorn 1 gevent worker, one Reports (limit {HOST_REPORT_QUEUE:,}) flushed every "
              f"{paths[1].every} calls; {os.cpu_count()} cores shared by client and server\n")
        print("| path | calls | requests answered | events acknowledged | events/s | archived |")
        print("|---|---|---|---|---|---|")
        for path, check in zip(paths, checks, strict=True):
            print(f"| {path.name} | {path.calls} | {path.requests} | {path.accepted} "
                  f"| {path.accepted / path.wall:.0f} | {check} |")
        local, remote = paths
        print(f"\nratio events/s (HTTP / in-process): "
              f"{(remote.accepted / remote.wall) / (local.accepted / local.wall):.2f}")
        problems = local.problems + remote.problems
        print("\n" + ("; ".join(problems) if problems else "no drop, no refusal, no timeout") + "\n", flush=True)


# 2. Fan-out --------------------------------------------------------------------------------------

class Reader:
    """One SSE connection: the bytes that arrived and when; decoded after the run."""

    def __init__(self, host, port, key, session_id):
        self.sock = socket.create_connection((host, port), timeout=30)
        self.sock.sendall((f"GET /browsers/{session_id}/telemetry/stream HTTP/1.1\r\nHost: {host}:{port}\r\n"
                           f"Authorization: Bearer {key}\r\nAccept: text/event-stream\r\n"
                           "Connection: close\r\n\r\n").encode())
        self.sock.setblocking(False)
        self.received = []  # (time.time(), bytes)
        self.head = b""
        self.opened = self.counted = self.closed = False
        self.seqs, self.latencies, self.last_at, self.error = [], [], 0.0, None

    def on_readable(self, now):
        try:
            data = self.sock.recv(262144)
        except BlockingIOError:
            return
        except OSError as error:
            data, self.error = b"", error
        if not data:
            self.closed = self.opened = True  # closed before its headers: reported by decode()
            self.sock.close()
            return
        self.received.append((now, data))
        if not self.opened:
            self.head += data
            self.opened = b"\r\n\r\n" in self.head

    def decode(self):
        """Headers, then the chunked body, then SSE frames: seq and latency of every data frame."""
        raw = b"".join(data for _, data in self.received)
        head, sep, _ = raw.partition(b"\r\n\r\n")
        status = head.split(b"\r\n", 1)[0]
        if not sep or b" 200 " not in status + b" ":
            self.error = self.error or f"status {status[:80]!r}"
            return
        chunked = b"transfer-encoding: chunked" in head.lower()
        # When each byte arrived: the time of the recv() that brought it.
        ends, offset = [], 0
        for at, data in self.received:
            offset += len(data)
            ends.append((offset, at))
        position = len(head) + len(sep)
        body, positions = [], []  # decoded pieces and the raw offset where each piece ends
        if chunked:
            while True:
                line_end = raw.find(b"\r\n", position)
                if line_end < 0:
                    break
                size = int(raw[position:line_end].split(b";")[0], 16)
                if size == 0:
                    break
                start = line_end + 2
                body.append(raw[start:start + size])
                positions.append(start + size)
                position = start + size + 2
        else:
            body.append(raw[position:])
            positions.append(len(raw))
        arrival, index = [], 0
        for end in positions:
            while ends[index][0] < end:
                index += 1
            arrival.append(ends[index][1])
        # A frame arrives when the piece that completes it does (gunicorn sends one chunk per frame).
        buffered = b""
        for piece, at in zip(body, arrival, strict=True):
            buffered += piece
            *frames, buffered = buffered.split(b"\n\n")
            for frame in frames:
                for line in frame.split(b"\n"):
                    if line.startswith(b"data: "):
                        envelope = json.loads(line[6:])
                        self.seqs.append(envelope["seq"])
                        self.latencies.append(at - float(envelope["event"]["data"]["text"]))
                        self.last_at = at


def select_loop(readers, all_opened, finished, deadline):
    selector = selectors.DefaultSelector()
    for reader in readers:
        selector.register(reader.sock, selectors.EVENT_READ, reader)
    opened, open_count = 0, len(readers)
    while open_count and time.monotonic() < deadline[0]:
        for key, _ in selector.select(timeout=0.5):
            reader = key.data
            reader.on_readable(time.time())
            if reader.closed:
                selector.unregister(key.fileobj)
                open_count -= 1
            if reader.opened and not reader.counted:
                reader.counted = True
                opened += 1
                if opened == len(readers):
                    all_opened.set()
    for key in list(selector.get_map().values()):
        key.data.sock.close()
    selector.close()
    finished.set()


def finish(readers, finished, deadline):
    """Wait for the select loop to see every stream close (30 s at most), then decode what each read."""
    if not finished.wait(30):
        deadline[0] = 0.0
        finished.wait(5)
    for reader in readers:
        try:
            reader.decode()
        except Exception as error:  # reported below the table
            reader.error = reader.error or repr(error)


def run_fanout(host, port, key, args):
    session = call(host, port, "POST", "/browsers", key, SESSION)
    path = f"/browsers/{session['session_id']}/telemetry/events"
    readers = [Reader(host, port, key, session["session_id"]) for _ in range(args.readers)]
    all_opened, finished, deadline = threading.Event(), threading.Event(), [time.monotonic() + 60 + args.seconds]
    loop = threading.Thread(target=select_loop, args=(readers, all_opened, finished, deadline), daemon=True)
    loop.start()
    if not all_opened.wait(30):
        print(f"only some of {args.readers} streams opened within 30 s")
    conn = http.client.HTTPConnection(host, port, timeout=60)
    written, posts, started = 0, 0, time.time()
    interval = 1.0 / args.rate
    while time.time() - started < args.seconds:
        pause = started + posts * interval - time.time()
        if pause > 0:
            time.sleep(pause)
        events = [console_log(f"{time.time():.6f}") for _ in range(args.fanout_batch)]
        result = request(conn, "POST", path, key, {"events": events})
        written += result["accepted"]
        posts += 1
    write_seconds = time.time() - started
    request(conn, "DELETE", f"/browsers/{session['session_id']}", key)  # every stream closes within a poll interval
    conn.close()
    finish(readers, finished, deadline)

    latencies = sorted(x for r in readers for x in r.latencies)
    deliveries = len(latencies)
    last_at = max((r.last_at for r in readers), default=started)
    complete = sum(1 for r in readers if r.seqs == list(range(1, written + 1)))
    still_open = sum(1 for r in readers if not r.closed)
    print(f"### `{COMMAND}` (2. fan-out)\n")
    print(f"1 gevent worker, 1 session, {args.readers} SSE readers (1 selector thread), 1 writer posting "
          f"{args.fanout_batch} events/request at {args.rate:g} requests/s for {args.seconds:g} s, "
          f"{os.cpu_count()} cores shared by client and server\n")
    print("| events written | writer events/s | deliveries | deliveries/s | readers complete | p50 ms | p95 ms "
          "| p99 ms | max ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    print(f"| {written} | {written / write_seconds:.0f} | {deliveries} "
          f"| {deliveries / max(last_at - started, 1e-9):.0f} | {complete}/{args.readers} | {latency_cells(latencies)} "
          f"| {(latencies[-1] * 1000 if latencies else 0):.1f} |")
    incomplete = [r for r in readers if r.seqs != list(range(1, written + 1))]
    notes = []
    if still_open:
        notes.append(f"{still_open} stream(s) still open 30 s after the session ended")
    if incomplete:
        sample = incomplete[0]
        missing = sorted(set(range(1, written + 1)) - set(sample.seqs))
        duplicates = len(sample.seqs) - len(set(sample.seqs))
        notes.append(f"{len(incomplete)} incomplete reader(s); first: {len(sample.seqs)} frames, "
                     f"{len(missing)} missing (first {missing[:5]}), {duplicates} duplicate(s), "
                     f"in order: {sample.seqs == sorted(sample.seqs)}, error: {sample.error}")
    errors = [r.error for r in readers if r.error]
    if errors:
        notes.append(f"{len(errors)} reader error(s): {errors[:3]}")
    if notes:
        print("\n" + "\n".join(notes))
    print("\ndeliveries/s: frames received by all readers / (last frame received - first send)\n")


# 3. Memory ---------------------------------------------------------------------------------------

def event_body(seq, ts, text_length):
    """The stored body (json.dumps of validate_event's result) of one ~200-byte console_log event."""
    return (f'{{"type":"console_log","category":"console","ts":{ts},"source":{{"kind":"cdp"}},'
            f'"data":{{"text":"{seq:06d} {"x" * (text_length - 7)}","level":"log"}}}}')


def fill(channels, subject, now_us, text_length, envelope_frame):
    """One full buffer, as telemetry.ingest fills it from 100-event requests; returns the frames' bytes.

    The body comes from a template (checked against validate_event + json.dumps in run_memory)
    rather than from json.loads + json.dumps per event: tracemalloc makes every allocation
    ~10x slower, and only what the buffer keeps matters here: per event, the entry tuples and the
    frame; the type name is interned, as telemetry.ingest does.
    """
    payload, prefix, suffix = 0, "console", "_log"
    for first in range(1, CAPACITY + 1, 100):
        entries = []
        for seq in range(first, min(first + 100, CAPACITY + 1)):
            frame = envelope_frame(seq, event_body(seq, now_us + seq, text_length))
            payload += len(frame)
            entries.append((seq, (sys.intern(prefix + suffix), frame)))
        channels.extend(subject, entries)
    return payload


def run_memory():
    from app.browsers.telemetry import envelope_frame
    from app.streams.memory import MemoryChannels
    from lantern_wire.telemetry import validate_event

    now_us = int(time.time() * 1_000_000)
    text_length = 100
    sent = {"type": "console_log", "source": {"kind": "cdp"}, "ts": now_us + 7,
            "data": {"text": "000007 " + "x" * (text_length - 7), "level": "log"}}
    stored = json.dumps(validate_event(json.loads(json.dumps(sent)), now_us=now_us), separators=(",", ":"))
    assert stored == event_body(7, now_us + 7, text_length), stored
    fill(MemoryChannels(capacity=CAPACITY), "warm-up", now_us, text_length, envelope_frame)
    rows = []
    for sessions in (1, 100, 1000):
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        channels = MemoryChannels(capacity=CAPACITY)
        payload = sum(fill(channels, f"telemetry:{n:08d}", now_us, text_length, envelope_frame)
                      for n in range(sessions))
        gc.collect()
        used = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        assert len(channels) == sessions and channels.latest_seq("telemetry:00000000") == CAPACITY
        del channels
        rows.append((sessions, used, payload))
    print(f"### `{COMMAND}` (3. buffer memory)\n")
    print(f"In-process, tracemalloc, MemoryChannels(capacity={CAPACITY}), every buffer full of console_log "
          f"events of {len(stored)} bytes of JSON, entries (seq, (type, frame)) as app.browsers.telemetry "
          "makes them; overhead = traced bytes / SSE frame bytes\n")
    print("| sessions | total MiB | bytes per full buffer | bytes per event | frame bytes per event | overhead |")
    print("|---|---|---|---|---|---|")
    for sessions, used, payload in rows:
        events = sessions * CAPACITY
        print(f"| {sessions} | {used / 2**20:.1f} | {used / sessions:,.0f} | {used / events:.0f} "
              f"| {payload / events:.0f} | {used / payload:.2f}x |")
    print()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=None,
                        help="time per ingest row and host-ingest path (default 5), of fan-out writing (default 10)")
    parser.add_argument("--threads", type=int, default=4, help="ingest client threads")
    parser.add_argument("--batch", type=int, default=100, help="ingest events per request (1 and 10 also run)")
    parser.add_argument("--readers", type=int, default=200, help="fan-out SSE readers")
    parser.add_argument("--fanout-batch", type=int, default=10, help="fan-out events per request")
    parser.add_argument("--rate", type=float, default=10.0, help="fan-out writer requests per second")
    parser.add_argument("--host-batch", type=int, default=500, help="host ingest events per call")
    parser.add_argument("--host-rounds", type=int, default=5,
                        help="host ingest: turns of the two paths (each runs --seconds in all)")
    parser.add_argument("--only", choices=("ingest", "fanout", "memory", "host-ingest"), action="append",
                        help="run only these measurements (repeatable)")
    args = parser.parse_args()
    only = set(args.only or ("ingest", "fanout", "memory", "host-ingest"))

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = args.readers + 256
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))

    if only & {"ingest", "fanout"}:
        with tempfile.TemporaryDirectory() as workdir, private_database(Path(workdir)) as database_url:
            env = server_env(database_url, workdir)
            env["LANTERN_TELEMETRY_ARCHIVE_SESSION_MAX_BYTES"] = "null"  # a long run would go past a session's budget
            run_cli(env, "db", "upgrade")
            key = run_cli(env, "orgs", "create", "--name", "bench", "--owner-email", "b@example.test").split()[-1]
            backend = "Postgres" if database_url.startswith("postgres") else "SQLite"
            print(f"{backend}; gunicorn 1 gevent worker, --worker-connections "
                  f"{max(1000, args.readers + args.threads + 100)}\n")
            with gunicorn(env, Path(workdir) / "gunicorn.log",
                          worker_connections=max(1000, args.readers + args.threads + 100)) as url:
                host, port = url.removeprefix("http://").split(":")
                if "ingest" in only:
                    run_ingest(host, int(port), key, argparse.Namespace(
                        threads=args.threads, batch=args.batch, seconds=args.seconds or 5.0))
                if "fanout" in only:
                    run_fanout(host, int(port), key, argparse.Namespace(
                        readers=args.readers, fanout_batch=args.fanout_batch, rate=args.rate,
                        seconds=args.seconds or 10.0))
    if "memory" in only:
        run_memory()
    if "host-ingest" in only:
        run_host_ingest(argparse.Namespace(host_batch=args.host_batch, rounds=args.host_rounds,
                                           seconds=args.seconds or 5.0))


if __name__ == "__main__":
    main()
