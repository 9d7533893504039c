"""A session spinning on every core beside another session's start (`.venv/bin/python bench/cpu_share.py`; #34 item 9).

Starts gunicorn (1 gevent worker, host driver) and one sandboxing browser host on a private database, once per
BROWSER_SANDBOX_CPUS value (by default 1, the default, and this machine's core count, which bounds nothing), and
in each measures, in turns: a new session's create-to-loaded time (POST /browsers to a page loaded through
Lantern's CDP relay) idle, and the same while another session's page runs 4 Workers per core spinning; then how
many cores that spinning session keeps busy. Prints a Markdown table for docs/benchmarks.md. Traffic stays on
127.0.0.1; needs root (sandboxes).
"""
import argparse
import contextlib
import os
import shlex
import sys
import tempfile
from pathlib import Path

import kernel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from browserhost import launch, sandbox, sandbox_policy  # noqa: E402
from tests.browserhost.helpers import Site  # noqa: E402
from tests.browsers.live.spinning import Spinner, cores_used, idle_and_busy  # noqa: E402
from tests.live_server import cannot_sandbox, serve_with_a_host  # noqa: E402

COMMAND = shlex.join([".venv/bin/python", "bench/cpu_share.py", *sys.argv[1:]])


@contextlib.contextmanager
def lantern_with_a_host(cpus):
    """(SDK client, host workdir): gunicorn and one browser host with BROWSER_SANDBOX_CPUS `cpus`, on a private
    database; all stopped afterwards."""
    with tempfile.TemporaryDirectory() as scratch, serve_with_a_host(
            Path(scratch), "bench", 4, {"LANTERN_BROWSER_SANDBOX_CPUS": str(cpus)}) as (served, _):
        with kernel.Kernel(api_key=served.api_key, base_url=served.base_url, max_retries=0, timeout=120) as client:
            yield client, Path(scratch) / "hosts" / "bench"


def measure(cpus, url, rounds):
    with lantern_with_a_host(cpus) as (client, host_dir):
        idle, busy = idle_and_busy(client, url, rounds)
        spinner = Spinner(client, url)
        try:
            spinner.start()
            box = sandbox.Sandbox(host_dir / "sessions" / spinner.session_id, sandbox_policy.SandboxPolicy(),
                                  memory_mb=0)
            used = cores_used(box.cgroup.pids, seconds=5)
        finally:
            spinner.close()
    return idle, busy, used


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cpus", type=float, nargs="+", default=[1.0, float(os.cpu_count() or 1)])
    args = parser.parse_args()
    if launch.find_chromium() is None:
        sys.exit("no Chromium: apt-get install chromium")
    if cannot_sandbox():
        sys.exit(f"this machine cannot sandbox: {cannot_sandbox()}")
    site = Site().start()
    try:
        rows = [(cpus, *measure(cpus, f"{site.url}/", args.rounds)) for cpus in args.cpus]
    finally:
        site.stop()
    print(f"`{COMMAND}` ({os.cpu_count()} cores, {args.rounds} rounds, medians)\n")
    print("| BROWSER_SANDBOX_CPUS | create-to-loaded idle | beside a session spinning on every core | ratio "
          "| cores the spinning session kept busy |")
    print("|---|---|---|---|---|")
    for cpus, idle, busy, used in rows:
        print(f"| {cpus:g} | {idle:.2f} s | {busy:.2f} s | {busy / idle:.2f} | {used:.2f} |")


if __name__ == "__main__":
    main()
