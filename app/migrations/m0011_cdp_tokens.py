"""A random CDP token per session instead of one derived from the host secret: its SHA-256 hash checks
the token a client gives, and the token itself is kept encrypted (like credential values) so that the
session's record can show it. A session that was active before has neither: its CDP URL works with a
bearer key until it ends.
"""
from peewee import CharField, TextField
from playhouse.migrate import migrate


def upgrade(migrator):
    migrate(migrator.add_column("browser_session", "cdp_token", TextField(null=True)),
            migrator.add_column("browser_session", "cdp_token_hash", CharField(null=True)))
