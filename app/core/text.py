"""Text folding for names that compare case- and accent-insensitively."""
import unicodedata


def fold(text):
    """Fold `text` so that `Zoë`, `ZOE` and `zoe` compare equal on any database.

    Stored beside a name as its lookup key; uniqueness and exact-name filters use
    the key, so they behave the same on SQLite and Postgres whatever the collation.
    """
    decomposed = unicodedata.normalize("NFKD", text)
    stripped = "".join(c for c in decomposed if not unicodedata.combining(c))
    return stripped.casefold()
