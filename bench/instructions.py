"""Instructions per request of each read, beside the Flask hello world (`valgrind` needed).

bench/run.py's ratios drift with this machine's speed (single turns of one read
spread ±0.1 within a run); the instructions a gunicorn worker runs per request do
not. This runs the hello world and Lantern (one gevent worker each, SQLite or
TEST_DATABASE_URL's Postgres) under `valgrind --tool=callgrind`, sends each route
`--warm-up` requests and then `--requests` sequential requests on one keep-alive
connection with the worker's counters zeroed before and dumped after
(`callgrind_control`), and prints instructions per request and their ratio to the
hello world's, with the floor of a list page (bench/hello.py's /rows) beside them.
The worker's own periodic tasks are counted too. Slow: about 30 s
per route. Traffic goes to 127.0.0.1 only.
"""
import argparse
import glob
import http.client
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from run import FLOOR, scenarios, seed  # noqa: E402

from tests.live_server import gunicorn, private_database, run_cli, server_env  # noqa: E402

STARTUP_SECONDS = 300  # the app loads some 50 times slower under callgrind


def per_request(base_url, worker, path, api_key, dumps, args):
    """Instructions the worker ran per request of GET `path`."""
    host, port = base_url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=STARTUP_SECONDS)
    headers = {"Authorization": f"Bearer {api_key}"}

    def send(count):
        for _ in range(count):
            connection.request("GET", path, headers=headers)
            response = connection.getresponse()
            response.read()
            if response.status != 200:
                raise RuntimeError(f"GET {path}: {response.status}")

    try:
        send(args.warm_up)
        subprocess.run(["callgrind_control", "--zero", str(worker)], check=True, capture_output=True)
        send(args.requests)
        before = set(glob.glob(f"{dumps}/callgrind.{worker}.*"))
        subprocess.run(["callgrind_control", "--dump", str(worker)], check=True, capture_output=True)
    finally:
        connection.close()
    (dump,) = set(glob.glob(f"{dumps}/callgrind.{worker}.*")) - before
    totals = re.search(r"^(?:summary|totals):\s+(\d+)", Path(dump).read_text(), re.M)
    return int(totals.group(1)) / args.requests


def worker_of(base_url):
    """The pid of the one worker of the gunicorn listening at `base_url`: of the processes holding
    its socket, the one whose parent holds it too."""
    port = base_url.rsplit(":", 1)[1]
    listeners = subprocess.run(["ss", "-Hltnp", f"sport = :{port}"], capture_output=True, text=True).stdout
    holders = {int(pid) for pid in re.findall(r"pid=(\d+)", listeners)}
    (worker,) = [pid for pid in holders if _parent(pid) in holders]
    return worker


def _parent(pid):
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=200, help="measured requests per route")
    parser.add_argument("--warm-up", type=int, default=50, help="requests per route before measuring")
    parser.add_argument("--only", default="", help="run the routes whose label contains this text")
    args = parser.parse_args()
    if not shutil.which("valgrind"):
        sys.exit("valgrind is not installed (apt-get install valgrind)")
    with tempfile.TemporaryDirectory() as workdir, private_database(Path(workdir)) as database_url:
        env = server_env(database_url, workdir)
        run_cli(env, "db", "upgrade")
        api_key = run_cli(env, "orgs", "create", "--name", "bench",
                          "--owner-email", "bench@example.test").strip().splitlines()[-1]
        with gunicorn(env, Path(workdir) / "seed.log") as base_url:
            host, port = base_url.removeprefix("http://").split(":")
            ids = seed(host, int(port), api_key)
        dumps = Path(workdir) / "callgrind"
        dumps.mkdir()
        wrapper = ("valgrind", "--tool=callgrind", "--trace-children=yes", f"--callgrind-out-file={dumps}/callgrind.%p")
        # A request may take seconds under callgrind: gunicorn must not take the worker for hung.
        slow_env = {**env, "GUNICORN_CMD_ARGS": f"--timeout {STARTUP_SECONDS}"}
        with gunicorn(slow_env, Path(workdir) / "hello.log", app="hello:app", pythonpath=Path(__file__).parent,
                      wrapper=wrapper, startup_seconds=STARTUP_SECONDS) as hello_url:
            hello_worker = worker_of(hello_url)
            hello = per_request(hello_url, hello_worker, "/hello", api_key, dumps, args)
            floor_label, _, floor_path, _ = FLOOR
            floor = per_request(hello_url, hello_worker, floor_path, api_key, dumps, args)
        backend = "Postgres" if database_url.startswith("postgres") else "SQLite"
        print(f"{backend}, one gunicorn gevent worker under callgrind, {args.requests} sequential keep-alive "
              f"requests per route after {args.warm_up}\n")
        print("| route | instructions/request | ratio to hello world |")
        print("|---|---|---|")
        print(f"| Flask JSON hello world | {hello:,.0f} | 1.00 |")
        print(f"| {floor_label} | {floor:,.0f} | {hello / floor:.2f} |", flush=True)
        with gunicorn(slow_env, Path(workdir) / "gunicorn.log", wrapper=wrapper,
                      startup_seconds=STARTUP_SECONDS) as base_url:
            worker = worker_of(base_url)
            for label, method, path, _ in scenarios(lambda: "unused", ids):
                if method == "GET" and args.only in label:
                    count = per_request(base_url, worker, path, api_key, dumps, args)
                    print(f"| {label} | {count:,.0f} | {hello / count:.2f} |", flush=True)


if __name__ == "__main__":
    main()
