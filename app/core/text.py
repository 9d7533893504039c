"""Text folding for names that compare case- and accent-insensitively, and text made storable."""
import re
import unicodedata
from urllib.parse import urlparse


def fold(text):
    """Fold `text` so that `Zoë`, `ZOE` and `zoe` compare equal on any database.

    Stored beside a name as its lookup key; uniqueness and exact-name filters use
    the key, so they behave the same on SQLite and Postgres whatever the collation.
    """
    decomposed = unicodedata.normalize("NFKD", text)
    stripped = "".join(c for c in decomposed if not unicodedata.combining(c))
    return stripped.casefold()


def host_of(url_or_host):
    """The host a URL or bare host name names: lower case, no port, no trailing dot, no "www."."""
    try:
        host = urlparse(url_or_host if "://" in url_or_host else f"//{url_or_host}").hostname or ""
    except ValueError:
        return ""
    host = host.lower().rstrip(".")
    return host.removeprefix("www.")


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# What breaks a line of text as a terminal or a log reader shows it: C0 and C1 controls, Unicode's line breaks.
CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def storable(text):
    """`text` with what no database column can hold replaced by U+FFFD: NUL (Postgres text refuses it) and lone
    UTF-16 surrogates (no UTF-8 encodes them; JSON decodes "\\ud800" to one, and a page's JavaScript makes them)."""
    return _UNSTORABLE.sub("\ufffd", text)


def one_line(text):
    """`text` storable, and with every control character (line breaks, a terminal's escapes) a space: for a line
    that others print, such as a host's reason in `hosts list`."""
    return CONTROLS.sub(" ", storable(text))
