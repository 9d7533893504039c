"""A process in a session through Lantern (`.venv/bin/python bench/exec.py`).

Starts gunicorn (1 gevent worker, host driver) and one sandboxed browser host on a private database, and measures
POST /browsers/{id}/process/exec of /bin/true round trips in one headless session (the agent already started),
beside the same /bin/true run straight on the host (subprocess.run, as the agent runs it) in the same run: the
overhead (goal <= 20 ms at p50). Also the first exec of a session, which starts its agent, and the agent's own
duration_ms. Prints Markdown tables for docs/benchmarks.md. Traffic stays on 127.0.0.1.
"""
import argparse
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.browsers import lantern_with_a_host, pct  # noqa: E402
from browserhost import launch  # noqa: E402

COMMAND = shlex.join([".venv/bin/python", "bench/exec.py", *sys.argv[1:]])


def exec_true(http, session_id):
    """(seconds of the round trip, the agent's duration_ms) of one exec of /bin/true."""
    began = time.perf_counter()
    answer = http.post(f"/browsers/{session_id}/process/exec", json={"command": "/bin/true"})
    seconds = time.perf_counter() - began
    answer.raise_for_status()
    result = answer.json()
    if result["exit_code"] != 0:
        raise RuntimeError(f"/bin/true: {result}")
    return seconds, result["duration_ms"]


def on_the_host(count):
    times = []
    for _ in range(count):
        began = time.perf_counter()
        subprocess.run(["/bin/true"], check=True)
        times.append(time.perf_counter() - began)
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200)
    args = parser.parse_args()
    if launch.find_chromium() is None:
        sys.exit("no Chromium: apt-get install chromium")
    with lantern_with_a_host("on") as (base_url, key, _, _):
        # One kept-alive connection, as the SDKs keep theirs.
        http = httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {key}"}, timeout=60)
        session_id = http.post("/browsers", json={"headless": True, "timeout_seconds": 3600}).json()["session_id"]
        try:
            first, _ = exec_true(http, session_id)  # starts the session's agent
            through = [exec_true(http, session_id) for _ in range(args.count)]
            straight = on_the_host(args.count)
        finally:
            http.delete(f"/browsers/{session_id}")
            http.close()

    times = [seconds for seconds, _ in through]
    print(f"`{COMMAND}` ({args.count} in a row, sandboxed host, 1 gevent worker, headless session)\n")
    print("| exec of /bin/true | p50 ms | p95 ms | mean ms |\n|---|---|---|---|")
    for name, values in (("through Lantern (POST .../process/exec)", times),
                         ("straight on the host (subprocess.run)", straight)):
        print(f"| {name} | {pct(values, 50):.1f} | {pct(values, 95):.1f} | {statistics.mean(values) * 1000:.1f} |")
    print(f"\noverhead at p50: {pct(times, 50) - pct(straight, 50):.1f} ms (goal <= 20 ms); the agent's own "
          f"duration_ms p50: {statistics.median(ms for _, ms in through):.0f} ms; the session's first exec "
          f"(starts its agent): {first * 1000:.0f} ms")


if __name__ == "__main__":
    main()
