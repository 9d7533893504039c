"""Offset paging for every list: a JSON array plus X-Has-More and X-Next-Offset."""
import marshmallow as ma
from flask import after_this_request

DEFAULT_LIMIT, MAX_LIMIT = 20, 100
# The largest integer every database stores; larger query values are 400, not a 500.
MAX_INT64 = 2**63 - 1

PAGE_HEADERS = {
    "X-Has-More": {"description": "true when another page follows",
                   "schema": {"type": "string", "enum": ["true", "false"]}},
    "X-Next-Offset": {"description": "offset of the next page; 0 on the last page", "schema": {"type": "integer"}},
}


class PageArgsSchema(ma.Schema):
    """Mixed into each list's query schema."""

    limit = ma.fields.Integer(load_default=DEFAULT_LIMIT, validate=ma.validate.Range(1, MAX_LIMIT),
                              metadata={"description": f"items per page, 1..{MAX_LIMIT}"})
    offset = ma.fields.Integer(load_default=0, validate=ma.validate.Range(0, MAX_INT64),
                               metadata={"description": "items to skip"})


def page(query, args):
    """One page of `query`, announcing the next offset in headers.

    `query` is an ordered peewee query, or a function of a limit and an offset
    that gives a list of that many rows from there (CompiledQuery.pages: the
    SQL of each list is built once).

    The hot lists' queries select only the columns their items show: the rows
    are for the page alone, and each column read through Python 3.11's sqlite3
    costs about 2,400 instructions (it lets go of the GIL for every column),
    more than the dump of the value. tests/core/test_list_pages.py holds each
    such list to the single read of each of its items.
    """
    limit, offset = args["limit"], args["offset"]
    rows = query(limit + 1, offset) if callable(query) else list(query.limit(limit + 1).offset(offset))
    has_more = len(rows) > limit
    rows = rows[:limit]

    @after_this_request
    def add_page_headers(response):
        response.headers["X-Has-More"] = "true" if has_more else "false"
        response.headers["X-Next-Offset"] = str(offset + len(rows) if has_more else 0)
        return response

    return rows
