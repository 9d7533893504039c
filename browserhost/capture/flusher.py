"""The queue of captured events and the thread that hands them to the sink (`Flusher`), and the
session's categories it reads again before each pass (`Categories`).

The CDP reader turns events into dicts and appends them to a bounded deque; it never waits on the
sink. Past `max_pending` queued events, new ones are dropped and counted (`dropped`). One flusher
thread hands the queue to `sink(events)` in batches of at most `max_batch`, every `flush_seconds` or
as soon as a batch is full (`captured` counts what the sink took; a sink that raises loses its batch,
counted as dropped). Before each pass it calls `categories()` again: a change of the session's
settings applies within `flush_seconds` (polling, so the host has nothing to call).

Dropped events are only counted: no SDK type carries such a count (monitor_* and system types
describe other things), so `dropped` is the figure to report: the flusher hands each new total to
`on_drops(total)` (at most once per DROP_REPORT_SECONDS; by default a log line).
"""
import collections
import logging
import math
import threading
import time

log = logging.getLogger(__package__)  # the name these lines had before capture.py became a package

DROP_REPORT_SECONDS = 10  # at most one log line about drops per this many seconds


class Categories:
    """The categories `read()` names, as of the last `refresh()`: `"console" in categories`."""

    def __init__(self, read):
        self.enabled = frozenset()
        self._read = read
        self._failing = False

    def __contains__(self, category):
        return category in self.enabled

    def refresh(self):
        try:
            self.enabled = frozenset(self._read())
        except Exception:
            if not self._failing:  # once, not every flush
                log.exception("reading the telemetry categories failed; keeping %s", sorted(self.enabled))
            self._failing = True
        else:
            self._failing = False


class Flusher:
    """`emit()` queues an event; `run()` (the flusher thread) hands the queue to `sink` until `stopping`
    is set and it is woken, calling `before_pass()` before each pass."""

    def __init__(self, sink, *, flush_seconds, max_batch, max_pending, clock, on_drops, before_pass):
        self.flush_seconds = flush_seconds
        self.max_batch = max_batch
        self.max_pending = max_pending
        self.dropped = 0
        self.captured = 0
        self.stopping = threading.Event()
        self._sink = sink
        self._clock = clock
        self._on_drops = on_drops
        self._before_pass = before_pass
        self._pending = collections.deque()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._reported_drops = 0
        self._reported_at = -math.inf

    def emit(self, event_type, category, source, data, truncated=False, *, read_at=None):
        read_at = self._clock() if read_at is None else read_at
        event = {"type": event_type, "category": category, "ts": int(read_at * 1_000_000),
                 "source": source, "data": data}
        if truncated:
            event["truncated"] = True
        pending = self._pending
        if len(pending) >= self.max_pending:
            with self._lock:
                self.dropped += 1
            return
        pending.append(event)
        if len(pending) >= self.max_batch and not self._wake.is_set():
            self._wake.set()

    def count_dropped(self, count=1):
        """Events lost before they were made (a CDP message skipped for its size)."""
        with self._lock:
            self.dropped += count

    def wake(self):
        self._wake.set()

    def run(self):
        while not self.stopping.is_set():
            self._wake.wait(self.flush_seconds)
            self._wake.clear()  # before draining: an event queued from now on sets it again
            self._before_pass()
            self.drain()
        self.drain()

    def drain(self):
        """Hand the events queued now to the sink (not those added meanwhile: under a flood the
        flusher still re-reads the categories between passes)."""
        pending = self._pending
        left = len(pending)
        while left:
            batch = [pending.popleft() for _ in range(min(left, self.max_batch))]
            left -= len(batch)
            try:
                self._sink(batch)
            except Exception:
                log.exception("telemetry sink failed: %s events lost", len(batch))
                with self._lock:
                    self.dropped += len(batch)
            else:
                with self._lock:
                    self.captured += len(batch)
        now = time.monotonic()
        if self.dropped != self._reported_drops and now - self._reported_at >= DROP_REPORT_SECONDS:
            try:
                self._on_drops(self.dropped)
            except Exception:
                log.exception("reporting %s dropped telemetry events failed", self.dropped)
            self._reported_drops, self._reported_at = self.dropped, now
