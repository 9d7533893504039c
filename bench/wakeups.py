"""Stream delivery across workers and app servers, per wake-up engine; idle streams' memory (`make bench`).

1. Delivery: one browser session, N SSE readers of its telemetry stream spread over the app servers
   (raw sockets in one selector thread, bench/telemetry.py's), one writer posting one event at a
   time to the first app server at a steady rate; each event's text is its send time, so readers
   compute the delivery delay (same machine, same clock). For each engine (SQLite's shared poll,
   Postgres LISTEN/NOTIFY, Redis pub/sub on Postgres), 2 app servers x 2 gevent workers, beside the
   baseline of the same run on 1 server x 1 worker (every reader in the writer's process).
2. Idle streams: M telemetry streams held open on one gevent worker; the worker's RSS before and
   after (from /proc), per stream.

Prints Markdown tables for docs/benchmarks.md. Traffic stays on 127.0.0.1.
"""
import argparse
import contextlib
import http.client
import json
import os
import selectors
import shlex
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import telemetry as fanout  # noqa: E402  (bench/telemetry.py: bench/ is this script's first sys.path entry)
from invocation_fanout import Follower, request  # noqa: E402

from tests import live_server  # noqa: E402
from tests.live_server import gunicorn, run_cli, server_env  # noqa: E402

COMMAND = shlex.join([".venv/bin/python", "bench/wakeups.py", *sys.argv[1:]])
SESSION = {"telemetry": {"enabled": True, "browser": {"console": {"enabled": True}}}}


@contextlib.contextmanager
def deployment(engine, servers, workers, postgres_url, extra_env=None):
    """(base URLs, key) of `servers` gunicorns of `workers` workers on one fresh database."""
    with tempfile.TemporaryDirectory() as scratch:
        workdir = Path(scratch)
        live_server.POSTGRES_URL = None if engine == "sqlite" else postgres_url
        with contextlib.ExitStack() as stack:
            database_url = stack.enter_context(live_server.private_database(workdir))
            env = server_env(database_url, workdir)
            env.update(LANTERN_STREAMS_PER_ORG="20000", **(extra_env or {}))
            if engine == "redis":
                env["LANTERN_REDIS_URL"] = "redis://127.0.0.1:6379/14"
            run_cli(env, "db", "upgrade")
            key = run_cli(env, "orgs", "create", "--name", "bench", "--owner-email", "b@x.test").split()[-1]
            urls = [stack.enter_context(gunicorn(env, workdir / f"server-{n}.log", workers=workers,
                                                 worker_connections=int(env.get("BENCH_CONNECTIONS", 1000))))
                    for n in range(servers)]
            yield urls, key


def delivery(urls, key, readers_count, rate, seconds):
    host, port = urls[0].removeprefix("http://").split(":")
    session = fanout.call(host, int(port), "POST", "/browsers", key, SESSION)
    readers = []
    for n in range(readers_count):
        reader_host, reader_port = urls[n % len(urls)].removeprefix("http://").split(":")
        readers.append(fanout.Reader(reader_host, int(reader_port), key, session["session_id"]))
    all_opened, finished, deadline = threading.Event(), threading.Event(), [time.monotonic() + 60 + seconds]
    threading.Thread(target=fanout.select_loop, args=(readers, all_opened, finished, deadline), daemon=True).start()
    all_opened.wait(30)
    time.sleep(1)  # every stream past its first read
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    path = f"/browsers/{session['session_id']}/telemetry/events"
    written, started = 0, time.time()
    while time.time() - started < seconds:
        pause = started + written / rate - time.time()
        if pause > 0:
            time.sleep(pause)
        written += request(conn, "POST", path, key, {"events": [fanout.console_log(f"{time.time():.6f}")]})["accepted"]
    conn.close()
    time.sleep(2)
    conn = http.client.HTTPConnection(host, int(port), timeout=60)  # past gunicorn's keep-alive
    request(conn, "DELETE", f"/browsers/{session['session_id']}", key)
    conn.close()
    fanout.finish(readers, finished, deadline)
    latencies = sorted(x for reader in readers for x in reader.latencies)
    complete = sum(1 for reader in readers if reader.seqs == list(range(1, written + 1)))
    return written, len(latencies), complete, latencies


def invocation_delivery(urls, key, followers_count, rate, seconds):
    """The same with invocation log lines: followers of GET /invocations/{id}/events over the app servers."""
    host, port = urls[0].removeprefix("http://").split(":")
    writer = http.client.HTTPConnection(host, int(port), timeout=60)
    invocation = request(writer, "POST", "/invocations", key, {"app_name": "bench", "action_name": "wakeups",
                                                               "version": "1", "async": True,
                                                               "async_timeout_seconds": 3600})
    connected = threading.Semaphore(0)
    followers = []
    for n in range(followers_count):
        follower_host, follower_port = urls[n % len(urls)].removeprefix("http://").split(":")
        followers.append(Follower(follower_host, int(follower_port), key, invocation["id"], connected))
        followers[-1].start()
    for _ in followers:
        connected.acquire()
    time.sleep(1)
    writer.close()
    writer = http.client.HTTPConnection(host, int(port), timeout=60)  # past gunicorn's keep-alive
    sent, started = 0, time.time()
    while time.time() - started < seconds:
        pause = started + sent / rate - time.time()
        if pause > 0:
            time.sleep(pause)
        request(writer, "POST", f"/invocations/{invocation['id']}/logs", key,
                {"lines": [{"message": json.dumps({"i": sent, "t": time.time()})}]})
        sent += 1
    request(writer, "PATCH", f"/invocations/{invocation['id']}", key, {"status": "succeeded"})
    writer.close()
    for follower in followers:
        follower.join(timeout=60)
    latencies = sorted(x for follower in followers for x in follower.latencies)
    complete = sum(1 for follower in followers if follower.indexes == list(range(sent)))
    return sent, len(latencies), complete, latencies


def run_delivery(args):
    print(f"\n### Delivery across processes (`{COMMAND}`)\n")
    print(f"{args.readers} SSE readers of one session's telemetry, one writer posting 1 event at a time to the "
          f"first app server at {args.rate:g}/s for {args.seconds:g} s; {os.cpu_count()} cores shared by everything\n")
    print("| engine | stream | app servers x workers | events | deliveries | readers complete "
          "| p50 ms | p95 ms | p99 ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    for engine in args.engines:
        name = {"sqlite": "SQLite, shared poll", "postgres": "Postgres, LISTEN/NOTIFY",
                "redis": "Postgres + Redis pub/sub"}[engine]
        for stream, measure in (("telemetry", delivery), ("invocation logs", invocation_delivery)):
            for servers, workers in ((1, 1), (2, 2)):
                with deployment(engine, servers, workers, args.postgres) as (urls, key):
                    written, deliveries, complete, latencies = measure(urls, key, args.readers, args.rate,
                                                                       args.seconds)
                print(f"| {name} | {stream} | {servers} x {workers} | {written} | {deliveries} "
                      f"| {complete}/{args.readers} | {fanout.latency_cells(latencies)} |", flush=True)


def worker_rss_kib(master_pid):
    children = subprocess.run(["pgrep", "-P", str(master_pid)], capture_output=True, text=True).stdout.split()
    status = Path(f"/proc/{children[0]}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmRSS:")).split()[1])


def run_idle(args):
    with deployment("sqlite", 1, 1, None, {"BENCH_CONNECTIONS": str(args.idle + 500),
                                          "LANTERN_STREAMS_RESERVED_CONNECTIONS": "100"}) as (urls, key):
        host, port = urls[0].removeprefix("http://").split(":")
        port = int(port)
        master = int(subprocess.run(["pgrep", "-f", "--", f"--bind 127.0.0.1:{port} "], capture_output=True,
                                    text=True).stdout.split()[0])
        session = fanout.call(host, port, "POST", "/browsers", key, SESSION)
        before = worker_rss_kib(master)
        selector, sockets, opened = selectors.DefaultSelector(), [], 0
        request_bytes = (f"GET /browsers/{session['session_id']}/telemetry/stream HTTP/1.1\r\nHost: {host}\r\n"
                         f"Authorization: Bearer {key}\r\n\r\n").encode()
        for _ in range(args.idle):
            sock = socket.create_connection((host, port))
            sock.sendall(request_bytes)
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ)
            sockets.append(sock)
        deadline, seen = time.monotonic() + 120, set()
        while opened < args.idle and time.monotonic() < deadline:
            for key_, _ in selector.select(timeout=1):
                if key_.fileobj not in seen and key_.fileobj.recv(65536).startswith(b"HTTP/1.1 200"):
                    seen.add(key_.fileobj)
                    opened += 1
                    selector.unregister(key_.fileobj)
        time.sleep(3)  # idle: a poll interval or two
        after = worker_rss_kib(master)
        for sock in sockets:
            sock.close()
    print(f"\n### Idle streams on one worker (`{COMMAND}`)\n")
    print(f"{opened} of {args.idle} telemetry streams open on one gevent worker: RSS {before / 1024:.0f} MiB before, "
          f"{after / 1024:.0f} MiB with them: {(after - before) / max(opened, 1):.1f} KiB per stream\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--readers", type=int, default=500)
    parser.add_argument("--rate", type=float, default=20, help="events per second")
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--engines", nargs="+", default=["sqlite", "postgres", "redis"])
    parser.add_argument("--postgres", default=os.environ.get("TEST_DATABASE_URL",
                                                             "postgresql://postgres@127.0.0.1:5432/test"))
    parser.add_argument("--idle", type=int, default=10000, help="idle streams (0: skip)")
    args = parser.parse_args()
    run_delivery(args)
    if args.idle:
        run_idle(args)


if __name__ == "__main__":
    main()
