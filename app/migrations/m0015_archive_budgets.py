"""The size of each session's archived telemetry, held to TELEMETRY_ARCHIVE_SESSION_MAX_BYTES (#34: one page
logging without end wrote 9.5 MB/s into the archive). Sessions archived before count from 0: what they hold is
kept, and their next events are counted."""
from peewee import BigIntegerField
from playhouse.migrate import migrate


def upgrade(migrator):
    migrate(migrator.add_column("browser_session", "telemetry_bytes", BigIntegerField(default=0)))
