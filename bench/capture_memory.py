"""The browser host's memory while a page logs huge strings (`.venv/bin/python bench/capture_memory.py`).

For each value of BROWSER_CAPTURE_MAX_MESSAGE_MB in --bounds, starts gunicorn (1 gevent worker, host
driver) and one browser host (browsers in sandboxes) on a private database; one headless session (4GiB,
console and page captured) opens a quiet start page, then logs a --mb MB string --logs times, --interval
seconds apart, and "after". Measured on the host process: its RSS once the session is idle (VmRSS), its
peak from then until "after" is archived (VmHWM, reset through /proc/<pid>/clear_refs), the seconds from
the first log to "after" in the archive, and the drops the host reported. A bound above --mb is the host
as it was before the bound (every message read whole). Prints a Markdown table for docs/benchmarks.md.
Needs root (the sandboxes, and resetting another process's peak).
"""
import argparse
import re
import shlex
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import kernel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from browserhost import launch  # noqa: E402
from browserhost.cdp import CdpClient  # noqa: E402
from tests.browserhost.helpers import Site  # noqa: E402
from tests.live_server import serve_with_a_host  # noqa: E402
from tests.waiting import eventually  # noqa: E402

COMMAND = shlex.join([".venv/bin/python", "bench/capture_memory.py", *sys.argv[1:]])
CAPTURED = {"enabled": True, "browser": {name: {"enabled": True} for name in ("console", "page")}}


def memory_mb(pid, field):
    """VmRSS (now) or VmHWM (the peak since the last reset) of process `pid`, in MB."""
    kb = re.search(rf"^{field}:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text(), re.M).group(1)
    return int(kb) / 1024


@contextmanager
def lantern(max_message_mb):
    """(SDK client, host pid): gunicorn and one browser host with BROWSER_CAPTURE_MAX_MESSAGE_MB
    `max_message_mb`; stopped afterwards."""
    bound = {"LANTERN_BROWSER_CAPTURE_MAX_MESSAGE_MB": str(max_message_mb)}
    with tempfile.TemporaryDirectory() as scratch:
        with serve_with_a_host(Path(scratch), "bench", 2, bound) as (served, host):
            with kernel.Kernel(api_key=served.api_key, base_url=served.base_url, max_retries=0, timeout=60) as client:
                yield client, host.pid


def run(max_message_mb, site, args):
    with lantern(max_message_mb) as (sdk, host):
        created = sdk.browsers.create(headless=True, memory="4GiB", start_url=f"{site.url}/quiet",
                                      telemetry=CAPTURED)

        def archived(type_):
            return list(sdk.browsers.telemetry.events(created.session_id, since="1h", limit=100, type=[type_]))

        if not eventually(lambda: archived("page_load"), 30, interval=0.2):
            raise SystemExit("the start page's load never arrived")
        time.sleep(1)  # settled: the start page's batch sent
        idle = memory_mb(host, "VmRSS")
        Path(f"/proc/{host}/clear_refs").write_text("5")
        logs = (f"new Promise(done => {{ const huge = 'x'.repeat({args.mb} * 1024 * 1024); let left = {args.logs};"
                " const next = () => { console.log(huge);"
                f" if (--left) return setTimeout(next, {args.interval * 1000}); console.log('after'); done(); }};"
                " next(); })")
        started = time.monotonic()
        with CdpClient(created.cdp_ws_url, timeout=args.logs * 120) as cdp:  # without Runtime.enable: no events
            page = next(t for t in cdp.call("Target.getTargets")["targetInfos"] if t["type"] == "page")["targetId"]
            session = cdp.call("Target.attachToTarget", {"targetId": page, "flatten": True})["sessionId"]
            cdp.call("Runtime.evaluate", {"expression": logs, "awaitPromise": True}, session_id=session)
        after = eventually(lambda: [e for e in archived("console_log") if e.event.data.text == "after"], 120,
                           interval=0.2)
        seconds = time.monotonic() - started
        peak = memory_mb(host, "VmHWM")
        huge = [e for e in archived("console_log") if e.event.data.text != "after"]
        lines = [line.message for line in sdk.browsers.logs.stream(
            created.session_id, source="supervisor", supervisor_process="browser-host", follow=False)]
        drops = [re.search(r"(\d+) events dropped", line).group(1) for line in lines if "events dropped" in line]
        sdk.browsers.delete_by_id(created.session_id)
    return {"bound": max_message_mb, "idle": idle, "peak": peak, "seconds": seconds, "after": bool(after),
            "captured": len(huge), "dropped": drops[-1] if drops else "0"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=200, help="the size of each logged string, in MB")
    parser.add_argument("--logs", type=int, default=3)
    parser.add_argument("--interval", type=float, default=1.5, help="seconds between two logs")
    parser.add_argument("--bounds", default="16,1024", help="values of BROWSER_CAPTURE_MAX_MESSAGE_MB, in turn")
    args = parser.parse_args()
    if launch.find_chromium() is None:
        sys.exit("no Chromium: apt-get install chromium")
    site = Site().start()
    try:
        rows = [run(int(bound), site, args) for bound in args.bounds.split(",")]
    finally:
        site.stop()
    print(f"`{COMMAND}`\n")
    print("| BROWSER_CAPTURE_MAX_MESSAGE_MB | host RSS idle MB | host peak MB | peak - idle MB | huge logs captured "
          "| dropped | \"after\" archived | s to \"after\" |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['bound']} | {row['idle']:.0f} | {row['peak']:.0f} | {row['peak'] - row['idle']:.0f} "
              f"| {row['captured']} | {row['dropped']} | {'yes' if row['after'] else 'no'} | {row['seconds']:.1f} |")


if __name__ == "__main__":
    main()
