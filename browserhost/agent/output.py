"""A bounded journal of what a process printed or a watch saw, read by any number of readers at once.

Every entry has a key that grows with each entry and covers a span of keys (a chunk of output: its bytes, so a
key is a position in the output; a watch's event: one). The journal keeps the newest entries whose spans add up to
at most its limit and drops the oldest; writers never wait for readers. A reader follows it from a key (0: from the
start, or an SSE Last-Event-ID), first told how much it missed if its key fell out of the journal, then every
entry after it as it comes, a keep-alive (None) when nothing came for a while, and the end once the journal is
closed and read to its last entry."""
import threading
from collections import deque
from dataclasses import dataclass
from typing import Callable, Iterator

from .http import AgentError

KEEP_ALIVE_SECONDS = 15.0


@dataclass
class Entry:
    key: int
    span: int
    data: object


class Journal:
    """Entries kept while their spans, each plus `entry_cost`, add up to at most `limit` (the newest one always).
    The cost stands for an entry's own memory, so a ring of tiny chunks stays as small as one of large ones."""

    def __init__(self, limit: int, entry_cost: int = 0):
        self.limit = limit
        self.entry_cost = entry_cost
        self.entries: deque[Entry] = deque()
        self.kept = 0  # what the entries kept cost: their spans and entry_cost each
        self.last_key = 0
        self.handed = 0  # the newest key a reader has taken: entries after it may still be merged
        self.closed = False
        self.changed = threading.Condition()

    def append(self, data, span: int = 1, merges: Callable[[object], bool] | None = None) -> int:
        """Add an entry (or, when `merges(last)` says so and no reader has taken the last entry yet, let the last
        one stand for it); its key."""
        with self.changed:
            last = self.entries[-1] if self.entries else None
            if merges and last is not None and last.key > self.handed and merges(last.data):
                return last.key
            self.last_key += span
            self.entries.append(Entry(self.last_key, span, data))
            self.kept += span + self.entry_cost
            while self.kept > self.limit and len(self.entries) > 1:
                self.kept -= self.entries.popleft().span + self.entry_cost
            self.changed.notify_all()
            return self.last_key

    def close(self) -> None:
        with self.changed:
            self.closed = True
            self.changed.notify_all()

    def check_key(self, value: str | None) -> int:
        """A reader's starting key from a Last-Event-ID header (0 without one), or AgentError 400."""
        if value is None or not value.strip():
            return 0
        if not value.strip().isdigit():
            raise AgentError(400, "invalid_last_event_id", "Last-Event-ID must be an id this stream sent")
        key = int(value)
        with self.changed:
            if key > self.last_key:
                raise AgentError(400, "invalid_last_event_id", f"Last-Event-ID {key} was never sent here")
        return key

    def follow(self, after: int, render: Callable[[object], dict], missed: Callable[[int], dict],
               keep_alive: float = KEEP_ALIVE_SECONDS) -> Iterator[tuple[int, dict] | None]:
        """(key, frame) of each entry after `after` as it comes; first (key, missed(span missed)) when entries
        after it were dropped; None after `keep_alive` seconds of nothing; the end once closed and read."""
        cursor = after
        while True:
            with self.changed:
                if not self.changed.wait_for(lambda seen=cursor: self.last_key > seen or self.closed, keep_alive):
                    batch, gap = None, 0
                else:
                    first = self.entries[0] if self.entries else None
                    start = first.key - first.span if first else self.last_key
                    gap = start - cursor if start > cursor else 0
                    batch = [entry for entry in self.entries if entry.key > cursor]
                    if batch:
                        self.handed = max(self.handed, batch[-1].key)
                    elif self.closed and not gap:
                        return
            if batch is None:
                yield None
                continue
            if gap:
                cursor += gap
                yield cursor, missed(gap)
            for entry in batch:
                cursor = entry.key
                yield entry.key, render(entry.data)
