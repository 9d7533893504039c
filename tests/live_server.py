"""Start the real server (gunicorn + gevent) on a private database, for the SDK tests and bench/.

The database is a fresh SQLite file, or, when TEST_DATABASE_URL names a Postgres
database, a schema of its own in that database (selected through the libpq
`options=-csearch_path=...` URL parameter), so the in-process tests, which drop
and recreate `public`, never touch it.
"""
import functools
import importlib
import itertools
import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx

from browserhost import sandbox_policy
from browserhost import settings as host_settings
from lantern_wire.hosts import control_key
from tests.fakes import LOOPBACK_PORTS_SETTING

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
POSTGRES_URL = os.environ.get("TEST_DATABASE_URL")
STARTUP_SECONDS = 30
SHUTDOWN_SECONDS = 15
# Pinned so that an instance/config.py or the caller's environment cannot change what the tests expect.
SERVER_SETTINGS = {
    "LANTERN_DEFAULT_ORG_MAX_CONCURRENT_SESSIONS": "10",
    "LANTERN_API_KEY_ROTATION_GRACE_DAYS": "7",
    "LANTERN_ENCRYPTION_KEYS": "0Bf1nWLZbzmB0b4YqMFKJCwZ2hYbYX7z1sO6oq3b9_c=",
    # Released blobs go at once, so tests can see them go (the grace is tested in-process).
    "LANTERN_BLOB_GRACE_SECONDS": "0",
    # Browsers come from the ingest endpoints unless a test starts a browser host (tests/browsers/live/).
    "LANTERN_BROWSER_DRIVER": "external",
    # A sandboxed browser reaches the tests' local sites (tests.fakes.LocalServer) and no other host port.
    "LANTERN_BROWSER_LOOPBACK_PORTS": LOOPBACK_PORTS_SETTING,
}


def run_cli(env, *args):
    result = subprocess.run(
        [str(BIN / "flask"), "--app", "app", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"flask {' '.join(args)} failed ({result.returncode}):\n"
                           f"{result.stdout}\n{result.stderr}")
    return result.stdout


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def with_query(url, **params):
    parts = urlsplit(url)
    query = parse_qsl(parts.query) + list(params.items())
    return urlunsplit(parts._replace(query=urlencode(query)))


def postgres_schema(url, schema, *, create):
    """Drop `schema` (and recreate it when `create`) in the database `url` names."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
        if create:
            connection.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))


def server_env(database_url, workdir):
    """The server's environment: its database, and blobs in `workdir` (never the repo's instance/)."""
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("LANTERN_", "KERNEL_"))}
    env.update(SERVER_SETTINGS)
    env["LANTERN_DATABASE_URL"] = database_url
    env["LANTERN_BLOB_DIR"] = str(Path(workdir) / "blobs")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def wait_until_serving(process, base_url, startup_seconds=STARTUP_SECONDS):
    deadline = time.monotonic() + startup_seconds
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"gunicorn exited with {process.returncode} during startup")
        try:
            # Any answer: a worker has loaded the app (bench/run.py's baseline has no /openapi.json).
            if httpx.get(f"{base_url}/openapi.json", timeout=2).status_code < 500:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"gunicorn did not answer on {base_url} within {startup_seconds}s")
        time.sleep(0.05)


def stop(process):
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=SHUTDOWN_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


_schemas = itertools.count()


@contextmanager
def private_database(workdir):
    """A database URL nothing else uses: a SQLite file, or a Postgres schema dropped afterwards."""
    if not POSTGRES_URL:
        yield f"sqlite:///{workdir / 'lantern.db'}"
        return
    # Per run, so two runs against the same database never share (or drop) each other's data.
    schema = f"lantern_sdk_{os.getpid()}_{next(_schemas)}"
    postgres_schema(POSTGRES_URL, schema, create=True)
    try:
        yield with_query(POSTGRES_URL, options=f"-csearch_path={schema}")
    finally:
        postgres_schema(POSTGRES_URL, schema, create=False)


@contextmanager
def gunicorn(env, log_path, workers=1, worker_connections=1000, app="wsgi:app", pythonpath=None, wrapper=(),
             startup_seconds=STARTUP_SECONDS, port=None):
    """`gunicorn --config gunicorn.conf.py wsgi:app` (gevent workers; another `app`, found on
    `pythonpath`, for a benchmark's baseline; run by `wrapper`, a command such as valgrind, when
    given) on `port` (default: a free one); yields its base URL."""
    port = port or free_port()
    base_url = f"http://127.0.0.1:{port}"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [*wrapper, *([sys.executable] if wrapper else []), str(BIN / "gunicorn"),
             "--config", str(ROOT / "gunicorn.conf.py"), "--workers", str(workers),
             "--worker-connections", str(worker_connections),
             "--bind", f"127.0.0.1:{port}", "--graceful-timeout", "5",
             # gunicorn 27 otherwise opens ~/.gunicorn/gunicorn.ctl, shared with any other server.
             "--no-control-socket", *(["--pythonpath", str(pythonpath)] if pythonpath else []), app],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )
    try:
        try:
            wait_until_serving(process, base_url, startup_seconds)
        except RuntimeError:
            stop(process)
            sys.stderr.write(f"--- gunicorn output ({log_path}) ---\n{log_path.read_text(errors='replace')}\n")
            raise
        yield base_url
    finally:
        stop(process)


@dataclass
class Served:
    base_url: str
    api_key: str
    env: dict
    log_path: Path


@contextmanager
def serve_with_organization(workdir, org_name, *, workers=1, worker_connections=1000, env_updates=None):
    """gunicorn on a private, migrated database holding one organization; yields a Served."""
    with private_database(workdir) as database_url:
        env = server_env(database_url, workdir)
        env.update(env_updates or {})
        run_cli(env, "db", "upgrade")
        output = run_cli(env, "orgs", "create", "--name", org_name, "--owner-email", "owner@served.test")
        api_key = output.strip().splitlines()[-1].strip()  # printed alone on the last line
        log_path = workdir / "gunicorn.log"
        with gunicorn(env, log_path, workers=workers, worker_connections=worker_connections) as base_url:
            yield Served(base_url=base_url, api_key=api_key, env=env, log_path=log_path)


@contextmanager
def serve_with_a_host(workdir, name, capacity, env_updates=None):
    """serve_with_organization with the host driver and one browser host `name` beside it (its folder under
    workdir/hosts); yields (Served, the host's process), both stopped afterwards."""
    updates = {"LANTERN_BROWSER_DRIVER": "host", "LANTERN_BROWSER_HOST_DIR": str(workdir / "hosts"),
               **(env_updates or {})}
    with serve_with_organization(workdir, name, env_updates=updates) as served:
        process, _ = browser_host(served.env, workdir, name, capacity, app_url=served.base_url)
        try:
            yield served, process
        finally:
            process.terminate()
            process.wait(timeout=30)


@functools.cache
def cannot_sandbox():
    """What this machine lacks to sandbox browsers ([]: nothing), as a browser host finds at its start."""
    return sandbox_policy.probe(sandbox_policy.SandboxPolicy())


def host_env(env, app_url, credential, packages):
    """A browser host's environment: its own settings taken from `env` (the app's), where the app is and its
    credential; no database URL and no encryption keys (it has no use for them, and must work without). Its
    Python path is this checkout and `packages` (host_packages): it runs with `-S`, without the site-packages
    that hold the app's dependencies, as on a machine where only the host is installed."""
    host = {name: value for name, value in os.environ.items() if not name.startswith(("LANTERN_", "KERNEL_"))}
    host.update({f"LANTERN_{name}": env[f"LANTERN_{name}"] for name in host_settings.NAMES
                 if f"LANTERN_{name}" in env})
    host.update(LANTERN_APP_URL=app_url, LANTERN_BROWSER_HOST_CREDENTIAL=credential, PYTHONUNBUFFERED="1",
                PYTHONPATH=f"{ROOT}{os.pathsep}{packages}")
    if cannot_sandbox():
        host["LANTERN_BROWSER_SANDBOX"] = "off"
    return host


def host_packages(folder):
    """`folder`, holding the packages a browser host needs beyond the standard library (setup.cfg's
    install_requires and theirs), and nothing of the app's."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("websocket", "urllib3", "pydantic", "pydantic_core", "typing_extensions", "annotated_types",
                 "typing_inspection", "werkzeug", "markupsafe"):
        module = importlib.import_module(name)
        source = Path(module.__file__)
        source = source.parent if source.name == "__init__.py" else source
        if not (folder / source.name).exists():
            (folder / source.name).symlink_to(source)
    return folder


def browser_host(env, workdir, name, capacity, *, app_url, port=None, advertise="127.0.0.1", wrapper=()):
    """(process, port) of `python -m browserhost` on 127.0.0.1 (run by `wrapper`, a command that ends by exec-ing
    its arguments, when given), added to the app as `name` (a new credential), once it answers its health check.

    Workers relay CDP straight to the browsers of a host advertised at 127.0.0.1, and through
    the host's own relay for any other name (as for a host on another machine). On a machine that
    cannot sandbox, browsers run without (the isolation tests skip, saying why). The caller stops it.
    """
    port = port or free_port()
    credential = run_cli(env, "browsers", "hosts", "add", name, "--address", f"http://{advertise}:{port}", "--replace",
                         "--quiet").strip()
    log_path = Path(workdir) / f"host-{name}.log"
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [*wrapper, sys.executable, "-S", "-m", "browserhost", "--bind", f"127.0.0.1:{port}",
             "--capacity", str(capacity), "--advertise", f"http://{advertise}:{port}"],
            cwd=ROOT, env=host_env(env, app_url, credential, host_packages(Path(workdir) / "host-packages")),
            stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + STARTUP_SECONDS
    while True:
        try:
            health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=5,
                               headers={"Authorization": f"Bearer {control_key(credential)}"})
            if health.status_code == 200 and health.json()["name"] == name:
                process.credential = credential
                return process, port
        except httpx.TransportError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            stop(process)
            raise RuntimeError(f"browser host {name} did not start:\n{log_path.read_text(errors='replace')}")
        time.sleep(0.1)
