"""Paged telemetry reads on a small and a large archive (`make bench`, or `.venv/bin/python bench/archive_pages.py`).

In-process (Flask's test client, so only the app and the database are measured): one database
holding two browser sessions, one with --small archived events and one with --large, written
straight into the archive (ts spread over the last 2 days; categories 90% console, 9% network,
1% page). Each kind of page (order, since, until, category, type, offset) is read --repeat times
on each session; the table gives the median ms of both and their ratio (large / small): a page
read that does not grow with the archive stays near 1. `--postgres URL` runs it on Postgres
(a private schema, dropped afterwards) instead of SQLite.
"""
import argparse
import json
import logging
import shlex
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app import create_app  # noqa: E402
from app.browsers.models import BrowserSession, TelemetryEvent  # noqa: E402
from app.core import clock, migrations  # noqa: E402
from app.core.db import db  # noqa: E402
from tests import live_server  # noqa: E402
from tests.live_server import run_cli, server_env  # noqa: E402

COMMAND = shlex.join([".venv/bin/python", "bench/archive_pages.py", *sys.argv[1:]])
KINDS = [("console", "console_log"), ("network", "network_request"), ("page", "page_load")]
SPAN = timedelta(days=2)


def fill(session_id, count):
    """`count` archived events over the last 2 days, in ts order but for 1% arriving late."""
    now, rows = clock.now(), []
    first = clock.micros(now - SPAN)
    step = clock.micros(now) - first
    for seq in range(1, count + 1):
        category, event_type = KINDS[0] if seq % 100 < 90 else KINDS[1] if seq % 100 < 99 else KINDS[2]
        ts = first + step * seq // count - (3_600_000_000 if seq % 97 == 0 else 0)  # some arrive an hour late
        body = json.dumps({"type": event_type, "category": category, "ts": ts, "source": {"kind": "cdp"},
                           "data": {"text": f"event {seq}"}}, separators=(",", ":"))
        rows.append({"session": session_id, "seq": seq, "ts": ts, "category": category, "type": event_type,
                     "body": body, "received_at": now})
        if len(rows) == 5000 or seq == count:
            with db.atomic():
                TelemetryEvent.insert_many(rows).execute()
            rows = []
    BrowserSession.update(last_seq=count).where(BrowserSession.id == session_id).execute()


def cases(middle_id):
    return [
        ("asc, default window (5m)", {}),
        ("asc, since=30d", {"since": "30d"}),
        ("asc, since=1h", {"since": "1h"}),
        ("asc, since=30d, category=page (1%)", {"since": "30d", "category": "page"}),
        ("asc, 5m window, category=page", {"category": "page"}),
        ("asc, since=30d, category=console,network", {"since": "30d", "category": "console,network"}),
        ("asc, since=30d, type=page_load", {"since": "30d", "type": "page_load"}),
        ("asc, since=30d, until=1d", {"since": "30d", "until": "1d"}),
        ("asc, since=30d, until=1d, category=page", {"since": "30d", "until": "1d", "category": "page"}),
        ("asc, offset cursor", {"offset": middle_id}),
        ("desc", {"order": "desc"}),
        ("desc, category=page", {"order": "desc", "category": "page"}),
        ("desc, until=1d", {"order": "desc", "until": "1d"}),
        ("desc, until=1d, category=page", {"order": "desc", "until": "1d", "category": "page"}),
        ("desc, offset cursor, type=page_load", {"order": "desc", "offset": middle_id, "type": "page_load"}),
    ]


def timed(client, session_id, query, repeat):
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        response = client.get(f"/browsers/{session_id}/telemetry/events", query_string={"limit": 100, **query})
        times.append(time.perf_counter() - began)
        assert response.status_code == 200, response.get_json()
    return statistics.median(times) * 1000


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=1000)
    parser.add_argument("--large", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--postgres", help="a Postgres URL (default: SQLite)")
    args = parser.parse_args()
    live_server.POSTGRES_URL = args.postgres
    with tempfile.TemporaryDirectory() as scratch, live_server.private_database(Path(scratch)) as database_url:
        env = server_env(database_url, scratch)
        run_cli(env, "db", "upgrade")
        key = run_cli(env, "orgs", "create", "--name", "bench", "--owner-email", "b@x.test").split()[-1]
        app = create_app({"DATABASE_URL": database_url, "BLOB_DIR": str(Path(scratch) / "blobs"),
                          "BROWSER_DRIVER": "external", "STREAM_WAKEUPS": "off"})
        migrations.upgrade(app.extensions["database"])
        logging.getLogger("app.requests").setLevel(logging.WARNING)  # one line per read otherwise
        client = app.test_client()
        client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {key}"
        sessions = [client.post("/browsers", json={"telemetry": {"enabled": True}}).get_json()["session_id"]
                    for _ in range(2)]
        began = time.perf_counter()
        with app.app_context(), db.connection_context():
            for session_id, count in zip(sessions, (args.small, args.large), strict=True):
                fill(session_id, count)
            middles = [TelemetryEvent.select(TelemetryEvent.id).where(TelemetryEvent.session == session_id)
                       .order_by(TelemetryEvent.id).offset(count // 2).limit(1).scalar()
                       for session_id, count in zip(sessions, (args.small, args.large), strict=True)]
        filled = time.perf_counter() - began
        engine = "Postgres" if args.postgres else "SQLite"
        print(f"\n### Paged telemetry reads, {engine} (`{COMMAND}`)\n")
        print(f"limit=100, median of {args.repeat} reads each, in-process; {args.small:,} and {args.large:,} "
              f"archived events (written in {filled:.0f} s)\n")
        print(f"| page | {args.small:,} events ms | {args.large:,} events ms | ratio |")
        print("|---|---|---|---|")
        ratios = []
        for (name, query), (_, large_query) in zip(cases(middles[0]), cases(middles[1]), strict=True):
            small = timed(client, sessions[0], query, args.repeat)
            large = timed(client, sessions[1], large_query, args.repeat)
            ratios.append(large / small)
            print(f"| {name} | {small:.2f} | {large:.2f} | {large / small:.2f} |", flush=True)
        print(f"\nworst ratio {max(ratios):.2f}")
        app.extensions["database"].close_all()


if __name__ == "__main__":
    main()
