"""Throughput and latency of Lantern's routes under gunicorn + gevent (`make bench`).

Starts a real server on a private database (SQLite, or Postgres with
TEST_DATABASE_URL), creates an organization through the CLI with a few records
to read (20 projects, 20 keys, a browser session, an invocation), then drives
each scenario on keep-alive connections for a bounded time, and prints a
Markdown table for docs/benchmarks.md. Each route's rate is also given as a
ratio to a Flask JSON hello world served by the same kind of worker, driven in
turns with the route (this machine's speed drifts by 10% within minutes). Reads
are driven by wrk when it is installed (`apt-get install wrk`: a C client leaves
the server most of the CPU it shares with the client), else, and always for
writes, by Python client threads. A last row, the floor, is a 20-row list page
read straight from sqlite3 by the hello world's app (bench/hello.py): what a list
costs in this stack before any of Lantern's own work. Traffic goes to 127.0.0.1 only.
"""
import argparse
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.live_server import gunicorn, private_database, run_cli, server_env  # noqa: E402


def scenarios(make_name, ids):
    return [
        ("GET /org/api_keys/{id}", "GET", f"/org/api_keys/{ids['key']}", None),
        ("GET /org/limits", "GET", "/org/limits", None),
        ("GET /browsers/{id}", "GET", f"/browsers/{ids['browser']}", None),
        ("GET /invocations/{id}", "GET", f"/invocations/{ids['invocation']}", None),
        ("GET /org/projects?limit=20", "GET", "/org/projects?limit=20", None),
        ("GET /org/api_keys?limit=20", "GET", "/org/api_keys?limit=20", None),
        ("GET /browsers?limit=20", "GET", "/browsers?limit=20", None),
        ("GET /invocations?limit=20", "GET", "/invocations?limit=20", None),
        ("POST /org/projects", "POST", "/org/projects", lambda: {"name": make_name()}),
    ]


# Served by the hello world's app (bench/hello.py): the least a 20-row list page costs in this stack.
FLOOR = ("GET /rows: 20 rows straight from sqlite3 (floor, hello world's app)", "GET", "/rows", None)


def seed(host, port, api_key):
    """What the reads read: 20 more projects and keys, a browser session, an invocation."""
    conn = http.client.HTTPConnection(host, port, timeout=30)

    def call(method, path, body=None):
        conn.request(method, path, body=json.dumps(body) if body is not None else None,
                     headers={"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"})
        response = conn.getresponse()
        data = json.loads(response.read() or "null")
        if response.status >= 400:
            raise RuntimeError(f"{method} {path}: {response.status} {data}")
        return data

    try:
        for n in range(20):
            call("POST", "/org/projects", {"name": f"seed-{n}"})
            call("POST", "/org/api_keys", {"name": f"seed-{n}"})
        for n in range(20):
            call("POST", "/invocations", {"app_name": "bench", "action_name": f"seed-{n}", "version": "1",
                                          "async": True, "async_timeout_seconds": 3600})
        invocation = call("POST", "/invocations", {"app_name": "bench", "action_name": "read", "version": "1",
                                                   "async": True, "async_timeout_seconds": 3600})
        browsers = [call("POST", "/browsers", {"timeout_seconds": 3600}) for _ in range(5)]
        return {"key": call("GET", "/org/api_keys?limit=1")[0]["id"], "invocation": invocation["id"],
                "browser": browsers[-1]["session_id"]}
    finally:
        conn.close()


def drive_wrk(host, port, api_key, path, *, connections, seconds):
    """wrk's figures for GET `path` (2 client threads, as many cores as the machine has)."""
    output = subprocess.run(
        ["wrk", "-t2", f"-c{connections}", f"-d{seconds:g}s", "--latency",
         "-H", f"Authorization: Bearer {api_key}", f"http://{host}:{port}{path}"],
        capture_output=True, text=True, check=True, timeout=seconds + 60).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))
    requests = int(re.search(r"(\d+) requests in", output).group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", output)

    def pct(label):
        value, unit = re.search(rf"^\s+{label}%\s+([\d.]+)(us|ms|s)\s*$", output, re.M).groups()
        return float(value) * {"us": 0.001, "ms": 1, "s": 1000}[unit]

    return {"requests": requests, "rps": rps, "p50": pct(50), "p95": pct(90), "p99": pct(99),
            "errors": int(errors.group(1)) if errors else 0}


def drive(host, port, api_key, method, path, body_factory, *, threads, seconds, max_requests):
    latencies, errors = [], []
    lock = threading.Lock()
    stop_at = time.monotonic() + seconds
    budget = [max_requests]

    def worker():
        conn = http.client.HTTPConnection(host, port, timeout=30)
        headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
        try:
            while time.monotonic() < stop_at:
                with lock:
                    if budget[0] <= 0:
                        return
                    budget[0] -= 1
                body = json.dumps(body_factory()) if body_factory else None
                started = time.perf_counter()
                conn.request(method, path, body=body, headers=headers)
                response = conn.getresponse()
                response.read()
                elapsed = time.perf_counter() - started
                with lock:
                    latencies.append(elapsed)
                    if response.status >= 400:
                        errors.append(response.status)
        finally:
            conn.close()

    started = time.perf_counter()
    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    wall = time.perf_counter() - started
    latencies.sort()

    def pct(p):
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000

    return {"requests": len(latencies), "rps": len(latencies) / wall, "p50": statistics.median(latencies) * 1000,
            "p95": pct(0.95), "p99": pct(0.99), "errors": len(errors)}


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--threads", type=int, default=8, help="client threads (Python client)")
    parser.add_argument("--connections", type=int, default=20, help="connections (wrk)")
    parser.add_argument("--seconds", type=float, default=5.0, help="time per scenario (and as much for its baseline)")
    parser.add_argument("--rounds", type=int, default=5, help="alternations of baseline and scenario per scenario")
    parser.add_argument("--max-requests", type=int, default=20000, help="cap per scenario (Python client)")
    parser.add_argument("--python-client", action="store_true", help="drive reads from Python even with wrk")
    parser.add_argument("--only", default="", help="run the scenarios whose label contains this text")
    args = parser.parse_args()
    use_wrk = shutil.which("wrk") is not None and not args.python_client
    slice_seconds = args.seconds / args.rounds

    def run(url, api_key, method, path, body, seconds):
        host, port = url.removeprefix("http://").split(":")
        if use_wrk and method == "GET":
            return drive_wrk(host, int(port), api_key, path, connections=args.connections, seconds=seconds)
        return drive(host, int(port), api_key, method, path, body, threads=args.threads, seconds=seconds,
                     max_requests=args.max_requests)

    def alternating(hello_url, base_url, api_key, method, path, body):
        """The scenario and the hello world in turns of equal length; their figures summed over the
        turns, so that the machine's drift (10% within minutes here) falls on both alike."""
        turns = [(run(hello_url, api_key, "GET", "/hello", None, slice_seconds),
                  run(base_url, api_key, method, path, body, slice_seconds)) for _ in range(args.rounds)]
        return combined([hello for hello, _ in turns]), combined([route for _, route in turns])

    with tempfile.TemporaryDirectory() as workdir, private_database(Path(workdir)) as database_url:
        env = server_env(database_url, workdir)
        run_cli(env, "db", "upgrade")
        output = run_cli(env, "orgs", "create", "--name", "bench", "--owner-email", "bench@example.test")
        api_key = output.strip().splitlines()[-1]
        rows = []
        with gunicorn(env, Path(workdir) / "hello.log", workers=args.workers, app="hello:app",
                      pythonpath=Path(__file__).parent) as hello_url, \
                gunicorn(env, Path(workdir) / "gunicorn.log", workers=args.workers) as base_url:
            host, port = base_url.removeprefix("http://").split(":")
            counter = iter(range(10**9))
            ids = seed(host, int(port), api_key)
            backend = "Postgres" if database_url.startswith("postgres") else "SQLite"
            client = (f"wrk, {args.connections} connections (writes: {args.threads} Python client threads)"
                      if use_wrk else f"{args.threads} Python client threads")
            print(f"{backend}, gunicorn gevent x{args.workers} workers, {client}, {args.seconds:g} s per scenario "
                  f"in {args.rounds} turns alternating with the hello world, "
                  f"{os.cpu_count()} cores shared by client and server\n")
            for label, method, path, body in scenarios(lambda: f"bench-{next(counter)}", ids):
                if args.only not in label:
                    continue
                rows.append((label, *alternating(hello_url, base_url, api_key, method, path, body)))
            if args.only in FLOOR[0]:
                label, method, path, body = FLOOR
                rows.append((label, *alternating(hello_url, hello_url, api_key, method, path, body)))
        print("| scenario | requests | req/s | p50 ms | p90/95 ms | p99 ms | errors | hello world req/s "
              "| ratio to hello world |")
        print("|---|---|---|---|---|---|---|---|---|")
        for label, hello, r in rows:
            print(f"| {label} | {r['requests']} | {r['rps']:.0f} | {r['p50']:.1f} | {r['p95']:.1f} "
                  f"| {r['p99']:.1f} | {r['errors']} | {hello['rps']:.0f} | {r['rps'] / hello['rps']:.2f} |")


def combined(parts):
    """One run's figures from runs of equal length: requests summed; the latencies of the slowest turn."""
    return {"requests": sum(p["requests"] for p in parts), "rps": statistics.fmean(p["rps"] for p in parts),
            "errors": sum(p["errors"] for p in parts),
            **{name: max(p[name] for p in parts) for name in ("p50", "p95", "p99")}}


if __name__ == "__main__":
    main()
