"""An operator's ceiling on a browser host's browsers (`flask browsers hosts limit NAME N`): a host registers
its own capacity, and a host machine taken over could register a large one to draw most new sessions."""
from peewee import IntegerField
from playhouse.migrate import migrate


def upgrade(migrator):
    migrate(migrator.add_column("browser_host", "max_browsers", IntegerField(null=True)))
