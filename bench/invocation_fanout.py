"""Invocation log fan-out: one writer, many SSE followers, one gevent worker (`make bench`).

Starts gunicorn (1 gevent worker) on a private database, creates an async
invocation, connects the followers to GET /invocations/{id}/events, then one
writer posts log lines (each carrying its send time) for a bounded time and
finishes the invocation. Every follower must see every line exactly once;
latency is the time from the writer's send to a follower's receipt (same
machine, same clock). Prints a Markdown table for docs/benchmarks.md.
"""
import argparse
import http.client
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.live_server import gunicorn, private_database, run_cli, server_env  # noqa: E402


def request(conn, method, path, key, body=None):
    conn.request(method, path, body=json.dumps(body) if body is not None else None,
                 headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    response = conn.getresponse()
    data = response.read()
    if response.status >= 400:
        raise RuntimeError(f"{method} {path}: {response.status} {data[:200]!r}")
    return json.loads(data) if data else None


class Follower(threading.Thread):
    def __init__(self, host, port, key, invocation_id, connected):
        super().__init__(daemon=True)
        self.args = (host, port, key, invocation_id)
        self.connected = connected
        self.latencies, self.indexes, self.error = [], [], None

    def run(self):
        host, port, key, invocation_id = self.args
        try:
            conn = http.client.HTTPConnection(host, port, timeout=120)
            conn.request("GET", f"/invocations/{invocation_id}/events",
                         headers={"Authorization": f"Bearer {key}", "Accept": "text/event-stream"})
            response = conn.getresponse()
            self.connected.release()
            while line := response.readline():
                if not line.startswith(b"data: "):
                    continue
                received = time.time()
                event = json.loads(line[6:])
                if event["event"] == "log":
                    sent = json.loads(event["message"])
                    self.latencies.append(received - sent["t"])
                    self.indexes.append(sent["i"])
            conn.close()
        except Exception as error:  # reported in the summary
            self.error = error
            self.connected.release()


def percentile(values, p):
    return values[min(len(values) - 1, int(p * len(values)))] * 1000


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--followers", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=10.0, help="how long the writer writes")
    parser.add_argument("--max-lines", type=int, default=5000)
    parser.add_argument("--batch", type=int, default=1, help="log lines per POST")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as workdir, private_database(Path(workdir)) as database_url:
        env = server_env(database_url, workdir)
        run_cli(env, "db", "upgrade")
        key = run_cli(env, "orgs", "create", "--name", "bench", "--owner-email", "b@example.test").split()[-1]
        with gunicorn(env, Path(workdir) / "gunicorn.log", workers=1) as base_url:
            host, port = base_url.removeprefix("http://").split(":")
            port = int(port)
            writer = http.client.HTTPConnection(host, port, timeout=60)
            invocation = request(writer, "POST", "/invocations", key,
                                 {"app_name": "bench", "action_name": "fanout", "version": "1", "async": True,
                                  "async_timeout_seconds": 3600})
            connected = threading.Semaphore(0)
            followers = [Follower(host, port, key, invocation["id"], connected) for _ in range(args.followers)]
            for follower in followers:
                follower.start()
            for _ in followers:
                connected.acquire()
            sent, started = 0, time.time()
            while time.time() - started < args.seconds and sent < args.max_lines:
                lines = [{"message": json.dumps({"i": sent + n, "t": time.time()})} for n in range(args.batch)]
                request(writer, "POST", f"/invocations/{invocation['id']}/logs", key, {"lines": lines})
                sent += len(lines)
            write_seconds = time.time() - started
            request(writer, "PATCH", f"/invocations/{invocation['id']}", key, {"status": "succeeded"})
            for follower in followers:
                follower.join(timeout=120)
            done_seconds = time.time() - started

    latencies = sorted(x for f in followers for x in f.latencies) or [0.0]
    complete = sum(1 for f in followers if f.indexes == list(range(sent)))
    errors = [f.error for f in followers if f.error]
    print(f"1 gevent worker, {args.followers} followers, {args.batch} line(s) per POST, "
          f"{args.seconds:g} s of writing, client threads on the same 2 cores\n")
    print("| lines written | writer lines/s | deliveries/s | followers complete | p50 ms | p95 ms | p99 ms | max ms |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| {sent} | {sent / write_seconds:.0f} | {len(latencies) / done_seconds:.0f} "
          f"| {complete}/{args.followers} | {statistics.median(latencies) * 1000:.1f} "
          f"| {percentile(latencies, 0.95):.1f} | {percentile(latencies, 0.99):.1f} | {latencies[-1] * 1000:.1f} |")
    if errors:
        print(f"\nfollower errors: {errors[:3]}")


if __name__ == "__main__":
    main()
