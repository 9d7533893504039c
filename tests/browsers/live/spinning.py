"""One session spinning on every core, and another session's create-to-loaded time beside it (#34 item 9):
shared by the live test (a ratio in one run) and bench/cpu_share.py (the figures in docs/benchmarks.md)."""
import os
import statistics
import time
from pathlib import Path

from browserhost.cdp import CdpClient
from tests.browserhost.helpers import evaluate, open_page

WORKERS_PER_CORE = 4
# Workers spinning without end, resolved once all of them run; stopped by terminating them.
SPIN = """new Promise(done => {
  const wanted = navigator.hardwareConcurrency * %d;
  let spinning = 0;
  globalThis.spinners = Array.from({length: wanted}, () => {
    const worker = new Worker(URL.createObjectURL(new Blob(["postMessage(1); for (;;) {}"])));
    worker.onmessage = () => ++spinning === wanted && done(wanted);
    return worker;
  });
})""" % WORKERS_PER_CORE
STOP = "globalThis.spinners.forEach(worker => worker.terminate())"


class Spinner:
    """A session whose page keeps every core busy while spinning (`with spinner.spinning(): ...`)."""

    def __init__(self, sdk, url):
        self.sdk = sdk
        self.session_id = sdk.browsers.create(headless=True).session_id
        self.cdp = CdpClient(sdk.browsers.retrieve(self.session_id).cdp_ws_url, timeout=60)
        self.page = open_page(self.cdp, url)

    def start(self):
        evaluate(self.cdp, self.page, SPIN)

    def stop(self):
        evaluate(self.cdp, self.page, STOP)

    def close(self):
        self.cdp.close()
        self.sdk.browsers.delete_by_id(self.session_id)


def cpu_seconds(pids):
    """CPU time the processes `pids` have used so far (those that ended meanwhile count for nothing)."""
    ticks = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def cores_used(pids_of, seconds=2.0):
    """How many cores the processes `pids_of()` kept busy over `seconds`."""
    before, started = cpu_seconds(pids_of()), time.monotonic()
    time.sleep(seconds)
    return (cpu_seconds(pids_of()) - before) / (time.monotonic() - started)


def create_to_loaded(sdk, url):
    """Seconds from POST /browsers to a page of the new session loaded at `url` (through Lantern's CDP relay);
    the session is deleted after."""
    started = time.monotonic()
    created = sdk.browsers.create(headless=True)
    with CdpClient(created.cdp_ws_url, timeout=60) as cdp:
        open_page(cdp, url)
    elapsed = time.monotonic() - started
    sdk.browsers.delete_by_id(created.session_id)
    return elapsed


def idle_and_busy(sdk, url, rounds):
    """(median create-to-loaded idle, the same beside a session spinning on every core), in `rounds` rounds
    taken in turn (so that other load on the machine falls on both alike)."""
    create_to_loaded(sdk, url)  # the first start of a run warms caches the others find warm
    spinner = Spinner(sdk, url)
    idle, busy = [], []
    try:
        for _ in range(rounds):
            idle.append(create_to_loaded(sdk, url))
            spinner.start()
            try:
                busy.append(create_to_loaded(sdk, url))
            finally:
                spinner.stop()
    finally:
        spinner.close()
    return statistics.median(idle), statistics.median(busy)
