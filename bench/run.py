"""Throughput and latency of Lantern's routes under gunicorn + gevent (`make bench`).

Starts a real server on a private database (SQLite, or Postgres with
TEST_DATABASE_URL), creates an organization through the CLI with a few records
to read (20 projects, 20 keys, a browser session, an invocation), then drives
each scenario on keep-alive connections for a bounded time, and prints a
Markdown table for docs/benchmarks.md. Each route's rate is also given as a
ratio to a Flask JSON hello world served by the same kind of worker in the same
run. Reads are driven by wrk when it is installed (`apt-get install wrk`: a C
client leaves the server most of the CPU it shares with the client), else, and
always for writes, by Python client threads. Traffic goes to 127.0.0.1 only.
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
    parser.add_argument("--seconds", type=float, default=5.0, help="time per scenario")
    parser.add_argument("--max-requests", type=int, default=20000, help="cap per scenario (Python client)")
    parser.add_argument("--python-client", action="store_true", help="drive reads from Python even with wrk")
    args = parser.parse_args()
    use_wrk = shutil.which("wrk") is not None and not args.python_client

    def run(host, port, api_key, method, path, body):
        if use_wrk and method == "GET":
            return drive_wrk(host, port, api_key, path, connections=args.connections, seconds=args.seconds)
        return drive(host, port, api_key, method, path, body, threads=args.threads, seconds=args.seconds,
                     max_requests=args.max_requests)

    with tempfile.TemporaryDirectory() as workdir, private_database(Path(workdir)) as database_url:
        env = server_env(database_url, workdir)
        run_cli(env, "db", "upgrade")
        output = run_cli(env, "orgs", "create", "--name", "bench", "--owner-email", "bench@example.test")
        api_key = output.strip().splitlines()[-1]

        def run_hello():
            with gunicorn(env, Path(workdir) / "hello.log", workers=args.workers, app="hello:app",
                          pythonpath=Path(__file__).parent) as hello_url:
                host, port = hello_url.removeprefix("http://").split(":")
                return run(host, int(port), api_key, "GET", "/hello", None)

        # The baseline before and after the routes, averaged: it drifts by 10% within minutes here.
        hello_before = run_hello()
        rows = []
        with gunicorn(env, Path(workdir) / "gunicorn.log", workers=args.workers) as base_url:
            host, port = base_url.removeprefix("http://").split(":")
            counter = iter(range(10**9))
            ids = seed(host, int(port), api_key)
            backend = "Postgres" if database_url.startswith("postgres") else "SQLite"
            client = (f"wrk, {args.connections} connections (writes: {args.threads} Python client threads)"
                      if use_wrk else f"{args.threads} Python client threads")
            print(f"{backend}, gunicorn gevent x{args.workers} workers, {client}, "
                  f"{args.seconds:g} s per scenario, {os.cpu_count()} cores shared by client and server\n")
            for label, method, path, body in scenarios(lambda: f"bench-{next(counter)}", ids):
                rows.append((label, run(host, int(port), api_key, method, path, body)))
        hello_after = run_hello()
        baseline = (hello_before["rps"] + hello_after["rps"]) / 2
        print("| scenario | requests | req/s | p50 ms | p90/95 ms | p99 ms | errors | ratio to hello world |")
        print("|---|---|---|---|---|---|---|---|")
        for label, r in [("Flask JSON hello world, before the routes", hello_before), *rows,
                         ("Flask JSON hello world, after the routes", hello_after)]:
            print(f"| {label} | {r['requests']} | {r['rps']:.0f} | {r['p50']:.1f} | {r['p95']:.1f} "
                  f"| {r['p99']:.1f} | {r['errors']} | {r['rps'] / baseline:.2f} |")


if __name__ == "__main__":
    main()
