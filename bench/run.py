"""Throughput and latency of Lantern's routes under gunicorn + gevent (`make bench`).

Starts a real server on a private database (SQLite, or Postgres with
TEST_DATABASE_URL), creates an organization through the CLI, then drives each
scenario from client threads on keep-alive connections for a bounded time, and
prints a Markdown table for docs/benchmarks.md. Traffic goes to 127.0.0.1 only.
"""
import argparse
import http.client
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.live_server import gunicorn, private_database, run_cli, server_env  # noqa: E402


def scenarios(make_name, key_id):
    return [
        ("GET /org/api_keys/{id}", "GET", f"/org/api_keys/{key_id}", None),
        ("GET /org/limits", "GET", "/org/limits", None),
        ("GET /org/projects?limit=20", "GET", "/org/projects?limit=20", None),
        ("GET /org/api_keys?limit=20", "GET", "/org/api_keys?limit=20", None),
        ("POST /org/projects", "POST", "/org/projects", lambda: {"name": make_name()}),
    ]


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
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=8, help="concurrent client connections")
    parser.add_argument("--seconds", type=float, default=5.0, help="time per scenario")
    parser.add_argument("--max-requests", type=int, default=20000, help="cap per scenario")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as workdir, private_database(Path(workdir)) as database_url:
        env = server_env(database_url, workdir)
        run_cli(env, "db", "upgrade")
        output = run_cli(env, "orgs", "create", "--name", "bench", "--owner-email", "bench@example.test")
        api_key = output.strip().splitlines()[-1]
        with gunicorn(env, Path(workdir) / "hello.log", workers=args.workers, app="hello:app",
                      pythonpath=Path(__file__).parent) as hello_url:
            host, port = hello_url.removeprefix("http://").split(":")
            hello = drive(host, int(port), api_key, "GET", "/hello", None, threads=args.threads,
                          seconds=args.seconds, max_requests=args.max_requests)
        with gunicorn(env, Path(workdir) / "gunicorn.log", workers=args.workers) as base_url:
            host, port = base_url.removeprefix("http://").split(":")
            counter = iter(range(10**9))
            conn = http.client.HTTPConnection(host, int(port), timeout=30)
            conn.request("GET", "/org/api_keys?limit=1", headers={"Authorization": f"Bearer {api_key}"})
            key_id = json.loads(conn.getresponse().read())[0]["id"]
            conn.close()
            backend = "Postgres" if database_url.startswith("postgres") else "SQLite"
            print(f"{backend}, gunicorn gevent x{args.workers} workers, {args.threads} client threads, "
                  f"{args.seconds:g} s per scenario, {os.cpu_count()} cores shared by client and server\n")
            print("| scenario | requests | req/s | p50 ms | p95 ms | p99 ms | errors | ratio to hello world |")
            print("|---|---|---|---|---|---|---|---|")
            print(f"| Flask JSON hello world (baseline, same worker) | {hello['requests']} | {hello['rps']:.0f} "
                  f"| {hello['p50']:.1f} | {hello['p95']:.1f} | {hello['p99']:.1f} | {hello['errors']} | 1.00 |")
            for label, method, path, body in scenarios(lambda: f"bench-{next(counter)}", key_id):
                r = drive(host, int(port), api_key, method, path, body, threads=args.threads,
                          seconds=args.seconds, max_requests=args.max_requests)
                print(f"| {label} | {r['requests']} | {r['rps']:.0f} | {r['p50']:.1f} | {r['p95']:.1f} "
                      f"| {r['p99']:.1f} | {r['errors']} | {r['rps'] / hello['rps']:.2f} |")


if __name__ == "__main__":
    main()
