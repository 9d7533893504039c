"""Real browsers through Lantern (`make bench`, or `.venv/bin/python bench/browsers.py`).

Starts gunicorn (1 gevent worker, host driver) and one browser host on a private
database, then, each beside a baseline measured in the same run:
1. Start: POST /browsers to a page loaded over CDP through Lantern's relay, over N
   sessions one after another; beside a bare Chromium started the same way
   (app.browsers.host.launch) and the same page loaded straight over its DevTools port.
2. Relay: 1,000 `Runtime.evaluate("1")` round trips in a row, and 2 MB screenshots
   (Page.captureScreenshot, PNG, of a page of random pixels), through the relay and straight to the
   same browser over the same kind of client (websocket-client).
3. Memory: PSS and RSS of one idle headless browser's process group (from /proc), and
   the capacity a host computes from this machine's memory.
Prints Markdown tables for docs/benchmarks.md. Traffic stays on 127.0.0.1.
"""
import argparse
import contextlib
import json
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
import websocket

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.browsers.cli import memory_capacity  # noqa: E402
from app.browsers.host import launch  # noqa: E402
from app.config import DefaultConfig  # noqa: E402
from tests.browsers.host.helpers import Site  # noqa: E402
from tests.live_server import browser_host, gunicorn, private_database, run_cli, server_env  # noqa: E402

COMMAND = shlex.join([".venv/bin/python", "bench/browsers.py", *sys.argv[1:]])


class Cdp:
    """A bare synchronous CDP client: what the relay adds is measured with the same client on both paths."""

    def __init__(self, url):
        self.ws = websocket.create_connection(url, suppress_origin=True, timeout=30, enable_multithread=False)
        self.next_id = 0

    def call(self, method, params=None, session_id=None):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session_id:
            message["sessionId"] = session_id
        self.ws.send(json.dumps(message))
        while True:
            answer = json.loads(self.ws.recv())
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise RuntimeError(answer["error"])
                return answer["result"]

    def open_page(self, url):
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        self.call("Page.enable", session_id=session)
        self.call("Page.navigate", {"url": url}, session_id=session)
        self.call("Runtime.evaluate", {"expression": "new Promise(r => document.readyState === 'complete' ? r() : "
                                                     "addEventListener('load', () => r()))", "awaitPromise": True},
                  session_id=session)
        return session

    def close(self):
        self.ws.close()


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))] * 1000


def bench_start(base_url, key, site_url, count):
    through, bare = [], []
    headers = {"Authorization": f"Bearer {key}"}
    for _ in range(count):
        began = time.perf_counter()
        created = httpx.post(f"{base_url}/browsers", json={"headless": True}, headers=headers, timeout=60).json()
        cdp = Cdp(created["cdp_ws_url"])
        cdp.open_page(site_url)
        through.append(time.perf_counter() - began)
        cdp.close()
        httpx.delete(f"{base_url}/browsers/{created['session_id']}", headers=headers, timeout=60)
    binary = launch.find_chromium()
    with tempfile.TemporaryDirectory() as scratch:
        for number in range(count):
            began = time.perf_counter()
            browser = launch.Browser.start(binary, Path(scratch) / str(number), launch.LaunchOptions())
            cdp = Cdp(browser.ws_url)
            cdp.open_page(site_url)
            bare.append(time.perf_counter() - began)
            cdp.close()
            browser.stop()
    print(f"\nStart to a loaded page, {count} sessions one after another (`{COMMAND}`):\n")
    print("| path | p50 ms | p95 ms | max ms |")
    print("|---|---|---|---|")
    for name, values in (("POST /browsers + CDP through Lantern", through), ("bare Chromium, same flags", bare)):
        print(f"| {name} | {pct(values, 50):.0f} | {pct(values, 95):.0f} | {max(values) * 1000:.0f} |")
    print(f"\nratio p50 (Lantern / bare): {statistics.median(through) / statistics.median(bare):.2f}")


def bench_relay(base_url, key, site_url, round_trips, screenshots, hosts_dir):
    headers = {"Authorization": f"Bearer {key}"}
    created = httpx.post(f"{base_url}/browsers", json={"headless": True, "viewport": {"width": 1920, "height": 1080}},
                         headers=headers, timeout=60).json()
    version = httpx.get(created["cdp_ws_url"].replace("ws://", "http://").replace("/cdp?", "/cdp/json/version?"),
                        timeout=10).json()
    host_dir = hosts_dir / "bench" / "sessions" / created["session_id"] / "user-data"
    port, path = (host_dir / "DevToolsActivePort").read_text().split()
    direct_url = f"ws://127.0.0.1:{port}{path}"
    rows = []
    for name, url in (("through Lantern", created["cdp_ws_url"]), ("straight to Chromium", direct_url)):
        cdp = Cdp(url)
        session = cdp.open_page(site_url + "/big")
        times = []
        for _ in range(round_trips):
            began = time.perf_counter()
            cdp.call("Runtime.evaluate", {"expression": "1"}, session_id=session)
            times.append(time.perf_counter() - began)
        shots, size = [], 0
        for _ in range(screenshots):
            began = time.perf_counter()
            size = len(cdp.call("Page.captureScreenshot", {"format": "png"}, session_id=session)["data"])
            shots.append(time.perf_counter() - began)
        cdp.close()
        rows.append((name, times, shots, size))
    print(f"\nCDP round trips on one connection ({version['Browser']}; `{COMMAND}`):\n")
    print(f"| path | {round_trips} x Runtime.evaluate(1): p50 ms | p99 ms | total s "
          f"| screenshot ({rows[0][3] // 1024} KiB base64) p50 ms |")
    print("|---|---|---|---|---|")
    for name, times, shots, _ in rows:
        print(f"| {name} | {pct(times, 50):.3f} | {pct(times, 99):.3f} | {sum(times):.2f} | {pct(shots, 50):.0f} |")
    (_, relayed, relayed_shots, _), (_, direct, direct_shots, _) = rows
    print(f"\nrelay adds {(statistics.median(relayed) - statistics.median(direct)) * 1000:.3f} ms per round trip "
          f"(ratio {statistics.median(relayed) / statistics.median(direct):.2f}); screenshot ratio "
          f"{statistics.median(relayed_shots) / statistics.median(direct_shots):.2f}")
    httpx.delete(f"{base_url}/browsers/{created['session_id']}", headers=headers, timeout=60)


def bench_memory():
    binary = launch.find_chromium()
    with tempfile.TemporaryDirectory() as scratch:
        browser = launch.Browser.start(binary, Path(scratch), launch.LaunchOptions())
        time.sleep(3)  # let it settle
        pss = rss = 0
        members = launch._group_members(browser.pid)
        for pid in members:
            try:
                rollup = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
            except OSError:
                continue
            for line in rollup:
                if line.startswith("Pss:"):
                    pss += int(line.split()[1])
                elif line.startswith("Rss:"):
                    rss += int(line.split()[1])
        browser.stop()
    per_browser = DefaultConfig.BROWSER_HOST_MEMORY_PER_BROWSER_MB
    print(f"\nOne idle headless browser (about:blank): {len(members)} processes, PSS {pss / 1024:.0f} MiB, "
          f"RSS sum {rss / 1024:.0f} MiB; a host here takes {memory_capacity(per_browser)} browsers by default "
          f"(80% of memory at {per_browser} MB each).")


@contextlib.contextmanager
def lantern_with_a_host():
    """(base URL, owner key, host process, workdir): gunicorn (1 gevent worker, host driver) and one
    browser host named `bench` on a private database; all stopped afterwards."""
    with tempfile.TemporaryDirectory() as scratch, private_database(Path(scratch)) as database_url:
        workdir = Path(scratch)
        env = server_env(database_url, workdir)
        env.update(LANTERN_BROWSER_DRIVER="host", LANTERN_BROWSER_HOST_SECRET="bench",
                   LANTERN_BROWSER_HOST_DIR=str(workdir / "hosts"))
        run_cli(env, "db", "upgrade")
        key = run_cli(env, "orgs", "create", "--name", "bench", "--owner-email", "b@x.test").split()[-1]
        host, _ = browser_host(env, workdir, "bench", capacity=4)
        try:
            with gunicorn(env, workdir / "gunicorn.log", workers=1) as base_url:
                yield base_url, key, host, workdir
        finally:
            host.terminate()
            host.wait(timeout=30)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--round-trips", type=int, default=1000)
    parser.add_argument("--screenshots", type=int, default=10)
    args = parser.parse_args()
    if launch.find_chromium() is None:
        sys.exit("no Chromium: apt-get install chromium")
    site = Site()
    # Random pixels do not compress: a 1000x700 canvas makes a PNG of about 2 MB.
    big = (b"<!doctype html><body style='margin:0'><canvas id=c width=1000 height=700></canvas><script>"
           b"const c = document.getElementById('c').getContext('2d'), image = c.createImageData(1000, 700);"
           b"for (let i = 0; i < image.data.length; i++) image.data[i] = i % 4 == 3 ? 255 : Math.random() * 256;"
           b"c.putImageData(image, 0, 0)</script>")
    site_get = site.get

    def get(handler):
        if handler.path.endswith("/big"):
            handler.answer(200, big, "text/html")
        else:
            site_get(handler)

    site.get = get
    site.start()
    with lantern_with_a_host() as (base_url, key, _, workdir):
        bench_start(base_url, key, site.url + "/page", args.sessions)
        bench_relay(base_url, key, site.url, args.round_trips, args.screenshots, workdir / "hosts")
    site.stop()
    bench_memory()


if __name__ == "__main__":
    main()
