"""The baselines of bench/run.py and bench/instructions.py, served the way Lantern is (gunicorn.conf.py's
worker): a Flask JSON hello world, and the floor of a list page."""
import functools
import sqlite3

from flask import Flask

app = Flask(__name__)


@app.get("/hello")
def hello():
    return {"hello": "world"}


# The least a 20-row list page costs in this stack: 20 rows of 13 columns (as many as an API key list
# item shows) read through the sqlite3 module from one table in memory, and written by Flask as JSON. No
# key, no file, no join, no model, no schema: what Lantern's lists do beyond this is their own cost.
FLOOR_COLUMNS = ("id", "name", "masked_key", "created_at", "expires_at", "deleted_at", "project_id",
                 "project_name", "creator_id", "creator_email", "creator_name", "org_id", "status")


@functools.cache  # made by the worker's first request, after the fork
def floor_database():
    database = sqlite3.connect(":memory:", check_same_thread=False)
    database.execute(f"CREATE TABLE item ({', '.join(FLOOR_COLUMNS)})")
    database.executemany(f"INSERT INTO item VALUES ({', '.join('?' * len(FLOOR_COLUMNS))})", [
        (f"key{n:021d}", f"key {n}", f"sk_...{n:04d}", f"2026-11-25T12:00:{n:02d}.000000Z", None, None,
         "project000000000000000001", "Default", "user00000000000000000001", "owner@example.test", "Owner",
         "org000000000000000000001", "active") for n in range(25)])
    return database


@app.get("/rows")
def rows():
    found = floor_database().execute("SELECT * FROM item ORDER BY created_at DESC LIMIT 21").fetchall()
    return [dict(zip(FLOOR_COLUMNS, row, strict=True)) for row in found[:20]]
