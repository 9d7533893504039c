"""A 500 MiB body streams between a client, the app and a host (#36): a recording goes from the host program to the
app (gunicorn, a gevent worker) and a client downloads it, and neither process holds it: the RSS of the host and of
the app's worker rises by at most 32 MiB each (their VmRSS, sampled through the transfer, against just before).

The recording is the real one's path end to end (a headless session, the replays API, the host's recording thread,
its upload, the app's blob store, the download) but for its encoder: the host runs in a mount namespace of its own
where /usr/bin/ffmpeg is a script writing the test's pattern at once, so 500 MiB take seconds, not hours of screen.
"""
import contextlib
import hashlib
import inspect
import itertools
import os
import shutil
import sys
import threading
import time
from pathlib import Path

import httpx
import kernel
import pytest

from browserhost import launch
from browserhost.settings import HostSettings
from tests.browserhost.helpers import CHROMIUM
from tests.browsers.live.conftest import HOST_SETTINGS
from tests.live_server import browser_host, serve_with_organization
from tests.waiting import eventually

MiB = 1024 * 1024
BLOCKS = 500
BOUND = 32 * MiB
# The host's namespace sees the script in ffmpeg's place (its sandboxes bind the same /usr): its own mounts then
# stay its own, and go with it.
FAKE_FFMPEG_MOUNT = ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
                     'mount --bind "$0" /usr/bin/ffmpeg && exec "$@"']


def blocks():
    """The recording's bytes: BLOCKS different MiB of pseudo-random bytes (nothing along the way can shorten them)."""
    import random

    block = random.Random(36).randbytes(1024 * 1024)
    for number in range(BLOCKS):
        yield number.to_bytes(8, "big") + block[8:]


FAKE_FFMPEG = f"""#!/usr/bin/python3
# ffmpeg for a recording: its arguments and input unread, the test's bytes on stdout at once.
import sys

BLOCKS = {BLOCKS}


{inspect.getsource(blocks)}
for data in blocks():
    sys.stdout.buffer.write(data)
"""


def rss(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def gunicorn_worker(port):
    """The pid of the one gunicorn worker serving `port` (a child of the master, with the same command line)."""
    bound = f"127.0.0.1:{port}".encode()
    serving = {}
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes() if entry.name.isdigit() else b""
            if b"gunicorn" in cmdline and bound in cmdline:
                serving[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
    [worker] = [pid for pid, parent in serving.items() if parent in serving]
    return worker


class Peaks:
    """The highest VmRSS of each pid, sampled every few milliseconds on a thread until stopped."""

    def __init__(self, pids):
        self.before = {pid: rss(pid) for pid in pids}
        self.peak = dict(self.before)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self):
        while not self._done.wait(0.005):
            for pid in self.peak:
                self.peak[pid] = max(self.peak[pid], rss(pid))

    def rises(self):
        self._done.set()
        self._thread.join()
        return {pid: self.peak[pid] - self.before[pid] for pid in self.peak}


@pytest.fixture
def streaming(tmp_path_factory):
    if CHROMIUM is None:
        pytest.skip("no Chromium at /usr/lib/chromium/chromium (`apt-get install chromium` on Debian)")
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("the host's ffmpeg is replaced in a mount namespace of its own: root and unshare(1) only")
    workdir = tmp_path_factory.mktemp("streaming")
    fake = workdir / "ffmpeg"
    fake.write_text(FAKE_FFMPEG)
    fake.chmod(0o755)
    settings = {**HOST_SETTINGS, "LANTERN_BROWSER_HOST_DIR": str(workdir / "hosts")}
    try:
        with serve_with_organization(workdir, "streaming", env_updates=settings) as served:
            host, _ = browser_host(served.env, workdir, "streaming", 1, app_url=served.base_url,
                                   wrapper=[*FAKE_FFMPEG_MOUNT, str(fake)])
            try:
                yield served, host
            finally:
                host.terminate()
                host.wait(timeout=30)
                launch.kill_leftovers(workdir / "hosts" / "streaming" / "sessions",
                                      Path(HostSettings().browser_sandbox_dir))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)  # the blob store's 500 MiB


def test_a_500_mib_recording_streams_from_the_host_through_the_app_to_a_client(streaming):
    served, host = streaming
    sdk = kernel.Kernel(api_key=served.api_key, base_url=served.base_url, max_retries=0, timeout=60)
    worker = gunicorn_worker(served.base_url.rsplit(":", 1)[1])
    expected = hashlib.sha256()
    for data in blocks():
        expected.update(data)
    session_id = sdk.browsers.create(headless=True).session_id
    try:
        started = time.monotonic()
        peaks = Peaks([host.pid, worker])
        replay_id = sdk.browsers.replays.start(session_id, max_duration_in_seconds=120).replay_id

        def saved():
            return [r for r in sdk.browsers.replays.list(session_id)
                    if r.model_extra["status"] not in ("recording", "saving")]

        [replay] = eventually(saved, 60, interval=0.2)
        uploaded = time.monotonic()
        assert (replay.model_extra["status"], replay.model_extra["size_bytes"]) == ("saved", BLOCKS * MiB), replay
        downloaded, sha = 0, hashlib.sha256()
        with httpx.stream("GET", f"{served.base_url}/browsers/{session_id}/replays/{replay_id}", timeout=60,
                          headers={"Authorization": f"Bearer {served.api_key}"}) as response:
            assert response.status_code == 200
            for chunk in response.iter_raw(MiB):
                downloaded += len(chunk)
                sha.update(chunk)
        rises = peaks.rises()
        done = time.monotonic()
        part = httpx.get(f"{served.base_url}/browsers/{session_id}/replays/{replay_id}", timeout=60,
                         headers={"Authorization": f"Bearer {served.api_key}", "Range": f"bytes={MiB}-{MiB + 9}"})
        assert (part.status_code, part.content) == (206, next(itertools.islice(blocks(), 1, None))[:10])
    finally:
        with contextlib.suppress(kernel.NotFoundError):  # (ended already: what failed above says why)
            sdk.browsers.delete_by_id(session_id)
    assert (downloaded, sha.hexdigest()) == (BLOCKS * MiB, expected.hexdigest())
    print(f"\nhost RSS +{rises[host.pid] / MiB:.1f} MiB (from {peaks.before[host.pid] / MiB:.1f}), app worker RSS "
          f"+{rises[worker] / MiB:.1f} MiB (from {peaks.before[worker] / MiB:.1f}); recorded and uploaded in "
          f"{uploaded - started:.1f} s, downloaded in {done - uploaded:.1f} s", file=sys.stderr)
    assert rises[host.pid] <= BOUND, f"the host's RSS rose {rises[host.pid] / MiB:.1f} MiB"
    assert rises[worker] <= BOUND, f"the app worker's RSS rose {rises[worker] / MiB:.1f} MiB"
