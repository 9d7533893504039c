"""Telemetry captured from a real browser (`make bench`, or `.venv/bin/python bench/capture.py`).

Starts gunicorn (1 gevent worker, host driver) and one browser host on a private database, then,
each beside a baseline measured in the same run:
1. Throughput: a page logs N console lines in one tight loop; captured events per second (from the
   loop's start to the last one archived), events dropped, and the browser host's CPU (user + system,
   /proc/<pid>/stat) per 1,000 events; beside the same loop in a session whose capture is off (how
   long the loop takes there, and the host's CPU meanwhile).
2. Delay: one SSE reader of the session's telemetry stream; the page logs its own clock
   (performance.timeOrigin + performance.now()) every 20 ms, and the reader computes when each frame
   arrives (same machine, same clock): p50/p99 from console.log to the SSE frame; beside the same
   reader receiving events POSTed to the ingest endpoint, each carrying its send time.
Prints Markdown tables for docs/benchmarks.md. Traffic stays on 127.0.0.1.
"""
import argparse
import json
import os
import shlex
import statistics
import sys
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from browsers import Cdp, lantern_with_a_host, pct  # noqa: E402  (bench/ is this script's first sys.path entry)

from browserhost import launch  # noqa: E402
from tests.browserhost.helpers import Site  # noqa: E402

COMMAND = shlex.join([".venv/bin/python", "bench/capture.py", *sys.argv[1:]])
# Console only: the default set's connection events would take seqs of their own.
CONSOLE = {"enabled": True, "browser": {name: {"enabled": name == "console"}
                                        for name in ("console", "connection", "control", "system")}}
TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


def cpu_ms(pid):
    """User + system CPU of process `pid` (all its threads) so far, in ms."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * TICK_MS


class Lantern:
    def __init__(self, base_url, key):
        self.base_url = base_url
        # A kept-alive connection is let go before gunicorn's keep-alive (2 s) could close it under a request.
        self.http = httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {key}"}, timeout=60,
                                 limits=httpx.Limits(keepalive_expiry=1.0))

    def session(self, telemetry):
        return self.http.post("/browsers", json={"headless": True, "telemetry": telemetry}).json()

    def end(self, session):
        self.http.delete(f"/browsers/{session['session_id']}")

    def newest_seq(self, session_id):
        events = self.http.get(f"/browsers/{session_id}/telemetry/events",
                               params={"order": "desc", "limit": 1, "type": "console_log"}).json()
        assert isinstance(events, list), events
        return events[0]["seq"] if events else 0


def run_throughput(lantern, host_pid, site_url, lines):
    loop = f"(() => {{ const t = performance.now(); for (let i = 0; i < {lines}; i++) console.log('line ' + i); " \
           "return performance.now() - t; })()"
    rows = []
    for name, telemetry in (("capture on (console)", CONSOLE), ("capture off", {"enabled": False})):
        session = lantern.session(telemetry)
        cdp = Cdp(session["cdp_ws_url"])
        page = cdp.open_page(site_url)
        time.sleep(1)  # the capture's set-up of the page is not part of the figure
        cpu_before, began = cpu_ms(host_pid), time.perf_counter()
        loop_ms = cdp.call("Runtime.evaluate", {"expression": loop, "returnByValue": True},
                           session_id=page)["result"]["value"]
        captured, last_change = 0, time.perf_counter()
        while telemetry["enabled"] and time.perf_counter() - last_change < 2:
            seq = lantern.newest_seq(session["session_id"])
            if seq != captured:
                captured, last_change = seq, time.perf_counter()
            if captured >= lines:
                break
            time.sleep(0.05)
        elapsed = (last_change if telemetry["enabled"] else time.perf_counter()) - began
        host_cpu = cpu_ms(host_pid) - cpu_before
        cdp.close()
        lantern.end(session)
        rows.append((name, loop_ms, captured, elapsed, host_cpu))
    print(f"\nA page logging {lines:,} console lines in one loop (`{COMMAND}`):\n")
    print("| session | page loop ms | captured | dropped | captured events/s | host CPU ms | per 1,000 events |")
    print("|---|---|---|---|---|---|---|")
    for name, loop_ms, captured, elapsed, host_cpu in rows:
        if captured:
            print(f"| {name} | {loop_ms:.0f} | {captured:,} | {lines - captured:,} | {captured / elapsed:,.0f} "
                  f"| {host_cpu:.0f} | {host_cpu / captured * 1000:.1f} |")
        else:
            print(f"| {name} | {loop_ms:.0f} | - | - | - | {host_cpu:.0f} | - |")
    (_, on_ms, captured, _, on_cpu), (_, off_ms, _, _, off_cpu) = rows
    net = (on_cpu - off_cpu) / captured * 1000 if captured else float("nan")
    print(f"\nratio page loop (capture on / off): {on_ms / off_ms:.2f}; host CPU per 1,000 events net of the "
          f"capture-off run: {net:.1f} ms")


class Reader(threading.Thread):
    """One SSE reader of console_log frames: each one's delay from the clock value its text carries."""

    def __init__(self, lantern, session_id):
        super().__init__(daemon=True)
        self.url = f"{lantern.base_url}/browsers/{session_id}/telemetry/stream"
        self.headers = dict(lantern.http.headers)
        self.delays = []
        self.opened = threading.Event()

    def run(self):
        with httpx.stream("GET", self.url, params={"type": "console_log"}, headers=self.headers,
                          timeout=httpx.Timeout(60, read=None)) as response:
            self.opened.set()
            for line in response.iter_lines():
                if line.startswith("data: "):
                    arrived = time.time() * 1000
                    self.delays.append(arrived - float(json.loads(line[6:])["event"]["data"]["text"]))


def run_delay(lantern, site_url, count):
    rows = []
    for name in ("console.log in the page (captured)", "POST /telemetry/events (ingest)"):
        session = lantern.session(CONSOLE)
        reader = Reader(lantern, session["session_id"])
        reader.start()
        reader.opened.wait(30)
        cdp = Cdp(session["cdp_ws_url"])
        page = cdp.open_page(site_url)
        time.sleep(1)
        for _ in range(count):
            if name.startswith("console"):
                cdp.call("Runtime.evaluate", {"expression": "console.log(String(performance.timeOrigin + "
                                                            "performance.now()))"}, session_id=page)
            else:
                lantern.http.post(f"/browsers/{session['session_id']}/telemetry/events", json={"events": [
                    {"type": "console_log", "source": {"kind": "cdp"},
                     "data": {"text": repr(time.time() * 1000), "level": "log"}}]})
            time.sleep(0.02)
        deadline = time.monotonic() + 5
        while len(reader.delays) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        cdp.close()
        lantern.end(session)  # ends the stream
        reader.join(15)
        rows.append((name, [delay / 1000 for delay in reader.delays]))
    print(f"\nDelay to one SSE reader (same worker as the API calls), {count} events 20 ms apart (`{COMMAND}`):\n")
    print("| event written by | received | p50 ms | p99 ms | max ms |")
    print("|---|---|---|---|---|")
    for name, delays in rows:
        print(f"| {name} | {len(delays)} | {pct(delays, 50):.1f} | {pct(delays, 99):.1f} | {max(delays) * 1000:.1f} |")
    (_, captured), (_, ingested) = rows
    print(f"\nratio p50 (captured / ingested): {statistics.median(captured) / statistics.median(ingested):.1f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=20000, help="console lines of the throughput loop")
    parser.add_argument("--events", type=int, default=200, help="events of the delay run")
    args = parser.parse_args()
    if launch.find_chromium() is None:
        sys.exit("no Chromium: apt-get install chromium")
    site = Site().start()
    with lantern_with_a_host("on") as (base_url, key, host, _):  # browsers in sandboxes, as hosts run them
        lantern = Lantern(base_url, key)
        run_throughput(lantern, host.pid, site.url + "/page", args.lines)
        run_delay(lantern, site.url + "/page", args.events)
    site.stop()


if __name__ == "__main__":
    main()
