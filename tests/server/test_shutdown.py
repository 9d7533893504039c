"""#26.7: Ctrl-C stops gunicorn without a traceback from its workers, and quickly, open streams included."""
import os
import re
import signal
import time

import httpx

from tests.live_server import serve_with_organization
from tests.waiting import eventually


def test_ctrl_c_stops_every_worker_quietly_and_quickly(tmp_path):
    with serve_with_organization(tmp_path, "ctrl-c", workers=2) as served:
        session = httpx.post(f"{served.base_url}/browsers", json={},
                             headers={"Authorization": f"Bearer {served.api_key}"}).json()["session_id"]
        master = int(re.search(r"Listening at: \S+ \((\d+)\)", served.log_path.read_text()).group(1))
        with httpx.stream("GET", f"{served.base_url}/browsers/{session}/telemetry/stream", timeout=30,
                          headers={"Authorization": f"Bearer {served.api_key}"}) as stream:
            lines = stream.iter_lines()
            assert next(lines) == ": stream open"
            began = time.monotonic()
            os.kill(master, signal.SIGINT)  # what a terminal's Ctrl-C gives it (and, through it, the workers)
            for _ in lines:
                pass  # the stream ends
        eventually(lambda: "Shutting down: Master" in served.log_path.read_text(), 10)
        log = served.log_path.read_text()
        assert "Shutting down: Master" in log and time.monotonic() - began < 5
        assert "Traceback" not in log and "SystemExit" not in log, log


def test_gunicorns_configuration_imports_nothing_of_the_app():
    """The app may only be imported once gevent patched the worker (as --preload would, an import in the
    configuration module would give every greenlet of a worker one database connection state)."""
    import subprocess
    import sys

    from tests.live_server import ROOT

    check = ("import runpy, sys; runpy.run_path('gunicorn.conf.py'); "
             "loaded = sorted(m for m in sys.modules if m == 'app' or m.startswith('app.')); "
             "assert not loaded, loaded")
    result = subprocess.run([sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
