"""JSON from clients, refused up front unless every value can be stored and sent back.

Python's parser accepts documents that fail later, as 500s or as data no client can
read back: NUL characters (Postgres text cannot hold them), NaN and Infinity (and 1e999,
which overflows to infinity), integers beyond Python's 4,300-digit conversion limit, lone
UTF-16 surrogates ("\\ud800", or raw surrogate bytes, which `json.loads` lets through),
and nesting deep enough to exhaust the interpreter's recursion limit here or when the
value is encoded again.
"""
import json
import math
import re

# Deeper than any document this API defines or a browser reports; far below the
# interpreter's recursion limit, so encoding a stored value again cannot fail.
MAX_DEPTH = 128
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class InvalidJson(ValueError):
    """The text is not a JSON document Lantern accepts; the message (a predicate: "is not
    valid JSON") says why."""


def loads(data):
    """The document in `data` (bytes or str), or InvalidJson."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidJson("is not valid UTF-8") from None
    if "\\u0000" in data:  # Postgres text cannot hold NUL: refused on every database alike
        raise InvalidJson("has a NUL character (\\u0000), which cannot be stored")
    try:
        value = json.loads(data, parse_constant=_refuse_constant, parse_float=_finite_float)
    except RecursionError:
        raise InvalidJson(f"nests more than {MAX_DEPTH} levels deep") from None
    except InvalidJson:
        raise
    except json.JSONDecodeError:
        raise InvalidJson("is not valid JSON") from None
    except ValueError:
        # int() refuses literals past sys.get_int_max_str_digits().
        raise InvalidJson("has a number with too many digits") from None
    if data.count("[") + data.count("{") > MAX_DEPTH and _depth(value) > MAX_DEPTH:
        raise InvalidJson(f"nests more than {MAX_DEPTH} levels deep")
    if _SURROGATE_ESCAPE.search(data) and not _encodable(value):
        raise InvalidJson("has a string with an unpaired UTF-16 surrogate (\\ud800-\\udfff)")
    return value


def _refuse_constant(name):
    raise InvalidJson(f"has {name}, which is not a JSON number")


def _finite_float(text):
    number = float(text)
    if not math.isfinite(number):
        raise InvalidJson(f"has a number out of range ({text[:20]})")
    return number


def _depth(value):
    """How deeply containers nest in `value`, without recursion."""
    deepest = 0
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict):
            item = item.values()
        elif not isinstance(item, list):
            continue
        deepest = max(deepest, depth)
        if depth <= MAX_DEPTH:
            pending.extend((child, depth + 1) for child in item if isinstance(child, (dict, list)))
    return deepest


def _encodable(value):
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
