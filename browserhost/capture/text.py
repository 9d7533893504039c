"""What bounds the strings of an event: `Cut`, and the limits more than one category cuts to (a
limit only one category uses stays in that category's module)."""

MAX_URL = 2048
MAX_SHORT = 256           # selectors, tags, keys, element text
MAX_HEADERS = 100
MAX_HEADER_VALUE = 2048


class Cut:
    """Bounds the strings of one event; remembers whether anything was cut (the event's `truncated`)."""

    __slots__ = ("cut",)

    def __init__(self):
        self.cut = False

    def __call__(self, value, limit):
        if not isinstance(value, str):
            value = "" if value is None else str(value)
        if len(value) > limit:
            self.cut = True
            return value[:limit]
        return value

    def headers(self, headers):
        if not isinstance(headers, dict):
            return {}
        if len(headers) > MAX_HEADERS:
            self.cut = True
        return {self(name, MAX_SHORT): self(value, MAX_HEADER_VALUE)
                for name, value in list(headers.items())[:MAX_HEADERS]}
