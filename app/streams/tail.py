"""The newest events of a subject, read from the durable store once and shared by every
follower of that subject in this process.

Without it, each wake-up would cost one database query per follower; with it, one
read per subject per wake-up (or per poll interval, for events another worker
wrote), whatever the number of followers.
"""
import threading
import time


class SharedTail:
    def __init__(self, fetch_after, floor, *, batch, capacity=1000):
        """`fetch_after(cursor)` returns up to `batch` (id, item) pairs with ids above cursor, ascending.

        The tail is complete from `floor` on: it holds every event with an id above it.
        """
        self._fetch_after = fetch_after
        self._batch = batch
        self._lock = threading.Lock()
        self._events = []
        self._capacity = capacity
        self.floor = floor
        self._read_at_seq = -1
        self._read_at = 0.0
        self.followers = 0

    def after(self, cursor, seen_seq, poll_seconds):
        """Events above `cursor`, or None when the cursor is older than the tail (read yourself).

        Re-reads the store only when the channel moved past what was read (`seen_seq`)
        or the poll interval passed, and then reads until nothing more comes, so a
        burst larger than one batch arrives at once; followers arriving meanwhile
        share that read.
        """
        with self._lock:
            if cursor < self.floor:
                return None
            if seen_seq > self._read_at_seq or time.monotonic() - self._read_at >= poll_seconds:
                while True:
                    newest = self._events[-1][0] if self._events else self.floor
                    batch = self._fetch_after(newest)
                    self._events.extend(batch)
                    if len(batch) < self._batch:
                        break
                self._read_at_seq, self._read_at = seen_seq, time.monotonic()
                if len(self._events) > self._capacity:
                    self.floor = self._events[-self._capacity - 1][0]
                    self._events = self._events[-self._capacity:]
                if cursor < self.floor:
                    return None
            return [event for event in self._events if event[0] > cursor]


class Tails:
    """SharedTail per subject while it has followers: taken in a follower's setup,
    released in its `finally`, dropped with the last one."""

    def __init__(self):
        self._tails = {}
        self._lock = threading.Lock()

    def acquire(self, subject, make):
        with self._lock:
            tail = self._tails.get(subject)
            if tail is None:
                tail = self._tails[subject] = make()
            tail.followers += 1
            return tail

    def release(self, subject, tail):
        with self._lock:
            tail.followers -= 1
            if tail.followers <= 0 and self._tails.get(subject) is tail:
                del self._tails[subject]

    def __len__(self):
        return len(self._tails)
