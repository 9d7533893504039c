"""Paged telemetry reads that do not grow with the archive: each archived event keeps `ts_high`, the
highest ts of its session's events up to it (in archive order), and the session the highest so far.

`ts_high` rises with the archive row id, so the first row of a `since` window and the last row
before an `until` are found in the (session, ts_high, id) index instead of by scanning every event
of the window; the rows whose own ts is below their ts_high (events that came late) are the only
ones to look at apart, through a small partial index. The (session, ts) index is no longer used.
"""
from peewee import BigIntegerField
from playhouse.migrate import migrate

BATCH = 1000


def upgrade(migrator):
    database = migrator.database
    migrate(migrator.add_column("telemetry_event", "ts_high", BigIntegerField(default=0)),
            migrator.add_column("browser_session", "telemetry_ts_high", BigIntegerField(default=0)))
    backfill(database)
    database.execute_sql("DROP INDEX IF EXISTS telemetry_event_session_id_ts")
    database.execute_sql("CREATE INDEX telemetry_event_session_id_ts_high_id ON telemetry_event "
                         "(session_id, ts_high, id)")
    database.execute_sql("CREATE INDEX telemetry_event_late ON telemetry_event (session_id, id) WHERE ts < ts_high")


def backfill(database):
    """Every archived event's ts_high, and each session's highest ts, from the archive as it is."""
    sessions = [row[0] for row in database.execute_sql("SELECT DISTINCT session_id FROM telemetry_event")]
    for session_id in sessions:
        high, updates = 0, []
        rows = database.execute_sql("SELECT id, ts FROM telemetry_event WHERE session_id = %s ORDER BY id"
                                    % database.param, (session_id,))
        for row_id, ts in rows.fetchall():
            high = max(high, ts)
            updates.append((high, row_id))
        for start in range(0, len(updates), BATCH):
            database.cursor().executemany(f"UPDATE telemetry_event SET ts_high = {database.param} "
                                          f"WHERE id = {database.param}", updates[start:start + BATCH])
        database.execute_sql(f"UPDATE browser_session SET telemetry_ts_high = {database.param} "
                             f"WHERE id = {database.param}", (high, session_id))
