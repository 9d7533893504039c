"""Real browsers through Lantern (`make bench`, or `.venv/bin/python bench/browsers.py`).

Starts gunicorn (1 gevent worker, host driver) and one browser host on a private database, once
with BROWSER_SANDBOX=off and once with it on, and measures each beside the other in the same run:
1. Start: POST /browsers to a page loaded over CDP through Lantern's relay, over N sessions one
   after another; and a bare Chromium started the same way (browserhost.launch), its page
   loaded straight over its DevTools port.
2. Relay: 1,000 `Runtime.evaluate("1")` round trips in a row, and 2 MB screenshots
   (Page.captureScreenshot, PNG, of a page of random pixels), through the relay and straight to the
   same browser's DevTools (its port, or its sandbox's socket) over the same client (websocket-client).
3. Memory: PSS and RSS of everything one idle headless session runs (its process group, or its
   sandbox's cgroup and slirp4netns), from /proc; and the capacity a host computes from this machine.
Prints Markdown tables for docs/benchmarks.md. Traffic stays on 127.0.0.1.
"""
import argparse
import contextlib
import json
import os
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import websocket

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from browserhost import launch, launch_options, sandbox, sandbox_policy, unsandboxed  # noqa: E402
from browserhost.settings import HostSettings, memory_capacity  # noqa: E402
from lantern_wire.devtools import DevTools  # noqa: E402
from tests.browserhost.helpers import Site  # noqa: E402
from tests.live_server import browser_host, gunicorn, private_database, run_cli, server_env  # noqa: E402

COMMAND = shlex.join([".venv/bin/python", "bench/browsers.py", *sys.argv[1:]])


class Cdp:
    """A bare synchronous CDP client: what the relay adds is measured with the same client on both paths."""

    def __init__(self, url, sock=None):
        self.ws = websocket.create_connection(url, suppress_origin=True, timeout=30, enable_multithread=False,
                                              socket=sock)
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


def start_times(base_url, key, site_url, count):
    """Seconds from POST /browsers to a page loaded over CDP through Lantern, for `count` sessions in turn."""
    headers = {"Authorization": f"Bearer {key}"}
    times = []
    for _ in range(count):
        began = time.perf_counter()
        created = httpx.post(f"{base_url}/browsers", json={"headless": True}, headers=headers, timeout=60).json()
        cdp = Cdp(created["cdp_ws_url"])
        cdp.open_page(site_url)
        times.append(time.perf_counter() - began)
        cdp.close()
        httpx.delete(f"{base_url}/browsers/{created['session_id']}", headers=headers, timeout=60)
    return times


def bare_start_times(site_url, count):
    """The same with a bare Chromium started by browserhost.launch, its page loaded over its port."""
    binary, times = launch.find_chromium(), []
    with tempfile.TemporaryDirectory() as scratch:
        for number in range(count):
            began = time.perf_counter()
            browser = launch.Browser.start(binary, Path(scratch) / str(number), launch_options.LaunchOptions())
            cdp = Cdp(browser.ws_url)
            cdp.open_page(site_url)
            times.append(time.perf_counter() - began)
            cdp.close()
            browser.stop()
    return times


def relay_times(base_url, key, site_url, round_trips, screenshots, workdir):
    """{path: (round trip times, screenshot times, screenshot size)} through Lantern and straight to the
    browser's DevTools (its sandbox's socket, or its port), with the same client."""
    headers = {"Authorization": f"Bearer {key}"}
    created = httpx.post(f"{base_url}/browsers", json={"headless": True, "viewport": {"width": 1920, "height": 1080}},
                         headers=headers, timeout=60).json()
    devtools = session_devtools(workdir, created["session_id"])
    rows = {}
    for name, connect in (("through Lantern", lambda: Cdp(created["cdp_ws_url"])),
                          ("straight to Chromium", lambda: Cdp(devtools.ws_url(), devtools.connect()))):
        cdp = connect()
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
        rows[name] = (times, shots, size)
    httpx.delete(f"{base_url}/browsers/{created['session_id']}", headers=headers, timeout=60)
    return rows


def session_devtools(workdir, session_id):
    """The DevTools of a session's browser as its host reaches them."""
    folder = workdir / "hosts" / "bench" / "sessions" / session_id
    active_port = folder / "user-data" / "DevToolsActivePort"
    if active_port.exists():  # no sandbox: Chromium's port on 127.0.0.1
        port, path = active_port.read_text().split()
        return DevTools(path, port=int(port))
    socket_path = sandbox.Sandbox(folder, sandbox_policy.SandboxPolicy(), memory_mb=0).devtools_socket()
    version = DevTools("", socket_path=socket_path).get_json("/json/version")
    return DevTools(urlsplit(version["webSocketDebuggerUrl"]).path, socket_path=socket_path)


def idle_memory(base_url, key, workdir, settle=3.0):
    """(processes, PSS KiB, RSS KiB) of one idle headless session's browser and everything of its sandbox
    (slirp4netns included), through Lantern."""
    headers = {"Authorization": f"Bearer {key}"}
    created = httpx.post(f"{base_url}/browsers", json={"headless": True}, headers=headers, timeout=60).json()
    time.sleep(settle)
    folder = workdir / "hosts" / "bench" / "sessions" / created["session_id"]
    box = sandbox.Sandbox(folder, sandbox_policy.SandboxPolicy(), memory_mb=0)
    members = set(box.cgroup.pids())
    if members:
        members |= {pid for pid in map(int, filter(str.isdigit, os.listdir("/proc")))
                    if f"/var/run/netns/{box.name}" in unsandboxed.cmdline(pid)}  # slirp4netns
    else:
        members = set(unsandboxed.group_members(int((folder / "chromium.pgid").read_text())))
    pss = rss = 0
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
    httpx.delete(f"{base_url}/browsers/{created['session_id']}", headers=headers, timeout=60)
    return len(members), pss, rss


def report(results, bare, count, round_trips):
    print(f"\nSandboxed (BROWSER_SANDBOX=on) beside unsandboxed (off), measured in the same run (`{COMMAND}`).")
    print(f"\nStart to a loaded page, {count} sessions one after another:\n")
    print("| path | p50 ms | p95 ms | max ms |")
    print("|---|---|---|---|")
    for name, values in (("POST /browsers + CDP through Lantern, sandbox off", results["off"]["start"]),
                         ("POST /browsers + CDP through Lantern, sandbox on", results["on"]["start"]),
                         ("bare Chromium, its page over its port", bare)):
        print(f"| {name} | {pct(values, 50):.0f} | {pct(values, 95):.0f} | {max(values) * 1000:.0f} |")
    on, off = (statistics.median(results[mode]["start"]) for mode in ("on", "off"))
    print(f"\nratio p50 (on / off): {on / off:.2f}")
    print(f"\nCDP round trips on one connection ({round_trips} x Runtime.evaluate(1)) and 2 MB screenshots:\n")
    print("| sandbox | path | p50 ms | p99 ms | screenshot p50 ms |")
    print("|---|---|---|---|---|")
    for mode in ("off", "on"):
        for name, (times, shots, _) in results[mode]["relay"].items():
            print(f"| {mode} | {name} | {pct(times, 50):.3f} | {pct(times, 99):.3f} | {pct(shots, 50):.0f} |")
    through = {mode: statistics.median(results[mode]["relay"]["through Lantern"][0]) for mode in ("off", "on")}
    print(f"\nthrough Lantern, on - off: {(through['on'] - through['off']) * 1000:+.3f} ms per round trip")
    print("\nOne idle headless session (about:blank), everything it runs:\n")
    print("| sandbox | processes | PSS MiB | RSS sum MiB |")
    print("|---|---|---|---|")
    for mode in ("off", "on"):
        processes, pss, rss = results[mode]["memory"]
        print(f"| {mode} | {processes} | {pss / 1024:.0f} | {rss / 1024:.0f} |")
    print(f"\nPSS ratio (on / off): {results['on']['memory'][1] / results['off']['memory'][1]:.2f}")
    per_browser = HostSettings().browser_host_memory_per_browser_mb
    print(f"\nBrowsers per host: {memory_capacity(per_browser)} here either way (80% of memory at {per_browser} MB "
          "each; the sandbox changes neither).")


@contextlib.contextmanager
def lantern_with_a_host(sandbox_setting):
    """(base URL, owner key, host process, workdir): gunicorn (1 gevent worker, host driver) and one
    browser host named `bench` (BROWSER_SANDBOX `sandbox_setting`) on a private database; all stopped
    afterwards."""
    with tempfile.TemporaryDirectory() as scratch, private_database(Path(scratch)) as database_url:
        workdir = Path(scratch)
        env = server_env(database_url, workdir)
        env.update(LANTERN_BROWSER_DRIVER="host", LANTERN_BROWSER_HOST_DIR=str(workdir / "hosts"),
                   LANTERN_BROWSER_SANDBOX=sandbox_setting)
        run_cli(env, "db", "upgrade")
        key = run_cli(env, "orgs", "create", "--name", "bench", "--owner-email", "b@x.test").split()[-1]
        with gunicorn(env, workdir / "gunicorn.log", workers=1) as base_url:
            host, _ = browser_host(env, workdir, "bench", capacity=4, app_url=base_url)
            try:
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
    results = {}
    for setting in ("off", "on"):
        with lantern_with_a_host(setting) as (base_url, key, _, workdir):
            results[setting] = {
                "start": start_times(base_url, key, site.url + "/page", args.sessions),
                "relay": relay_times(base_url, key, site.url, args.round_trips, args.screenshots, workdir),
                "memory": idle_memory(base_url, key, workdir)}
    bare = bare_start_times(site.url + "/page", args.sessions)
    site.stop()
    report(results, bare, args.sessions, args.round_trips)


if __name__ == "__main__":
    main()
