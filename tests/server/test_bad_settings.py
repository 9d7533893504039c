"""A wrong setting stops each way of starting the app with one line, no traceback: `flask`, `python wsgi.py` and
gunicorn (whose master then stops instead of starting workers again and again)."""
import subprocess
import sys

import pytest

from tests.live_server import BIN, ROOT, free_port, server_env

LINE = ("Lantern cannot start: STREAM_POLL_SECONDS='soon' (from LANTERN_STREAM_POLL_SECONDS): should be a valid "
        "number, unable to parse string as a number")


@pytest.fixture
def bad_env(tmp_path):
    return {**server_env(f"sqlite:///{tmp_path / 'lantern.db'}", tmp_path), "LANTERN_STREAM_POLL_SECONDS": "soon"}


@pytest.mark.parametrize("command", [[str(BIN / "flask"), "--app", "app", "db", "upgrade"],
                                     [sys.executable, "wsgi.py"]])
def test_flask_and_wsgi_py_stop_with_the_line(bad_env, command):
    done = subprocess.run(command, cwd=ROOT, env=bad_env, capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (1, "", LINE + "\n")


def test_gunicorn_stops_with_the_line(bad_env):
    done = subprocess.run([str(BIN / "gunicorn"), "--config", str(ROOT / "gunicorn.conf.py"), "--workers", "1",
                           "--bind", f"127.0.0.1:{free_port()}", "--no-control-socket", "wsgi:app"],
                          cwd=ROOT, env=bad_env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 4  # gunicorn's "App failed to load": the master stops
    assert LINE in done.stderr.splitlines() and "Traceback" not in done.stderr
