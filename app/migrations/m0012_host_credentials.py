"""Browser hosts authorised one by one: each host's credential is stored as its SHA-256 hash, the key the
app calls it with encrypted, and a revocation time; hosts no longer reach the database, so a session
records the newest batch of reports its host sent (a batch sent again is applied once).

Hosts registered before have no credential: they are listed and can be removed, but a host must be
added again (`flask browsers hosts add NAME`) to run.
"""
from peewee import BigIntegerField, CharField, TextField
from playhouse.migrate import migrate

from app.core.db import UtcDateTimeField


def upgrade(migrator):
    migrate(migrator.add_column("browser_host", "credential_hash", CharField(null=True)),
            migrator.add_column("browser_host", "control_key", TextField(null=True)),
            migrator.add_column("browser_host", "revoked_at", UtcDateTimeField(null=True)),
            migrator.add_index("browser_host", ("credential_hash",), unique=True),
            migrator.add_column("browser_session", "host_batch", BigIntegerField(default=0)))
