"""Schema migrations, applied in order by `flask --app app db upgrade`.

Each module declares the tables as they were at that version (frozen copies),
never imports the live models, so old migrations keep working when models grow.
"""
from peewee import Model


class FrozenModel(Model):
    """Base of the table snapshots a migration declares (bound to its database there)."""

    class Meta:
        legacy_table_names = False
