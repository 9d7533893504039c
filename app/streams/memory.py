"""In-memory channels: a bounded deque and a condition variable per subject.

threading.Condition is what gevent's monkey-patching turns cooperative, so one
implementation serves plain threads (tests, `flask run`) and gunicorn's gevent
worker alike; nothing here imports gevent.
"""
import itertools
import threading
import time
from collections import deque


class _Channel:
    __slots__ = ("items", "next_seq", "condition", "used_at")

    def __init__(self, capacity):
        self.items = deque(maxlen=capacity)
        self.next_seq = 1
        self.condition = threading.Condition()
        self.used_at = time.monotonic()


class MemoryChannels:
    def __init__(self, capacity=1024):
        self.capacity = capacity
        self._channels = {}
        self._lock = threading.Lock()

    def _channel(self, subject):
        channel = self._channels.get(subject)
        if channel is None:
            with self._lock:
                channel = self._channels.setdefault(subject, _Channel(self.capacity))
        return channel

    def ensure(self, subject):
        """Create the subject's channel now (a follower does, before its first read)."""
        self._channel(subject).used_at = time.monotonic()

    def __contains__(self, subject):
        return subject in self._channels

    def append(self, subject, item):
        channel = self._channel(subject)
        with channel.condition:
            seq = channel.next_seq
            channel.next_seq += 1
            channel.items.append((seq, item))
            channel.used_at = time.monotonic()
            channel.condition.notify_all()
        return seq

    def extend(self, subject, entries):
        channel = self._channel(subject)
        with channel.condition:
            added = False
            for seq, item in entries:
                if seq >= channel.next_seq:
                    channel.items.append((seq, item))
                    channel.next_seq = seq + 1
                    added = True
            channel.used_at = time.monotonic()
            if added:
                channel.condition.notify_all()
        return channel.next_seq - 1

    def read_after(self, subject, seq, limit=None):
        channel = self._channel(subject)
        with channel.condition:
            channel.used_at = time.monotonic()
            # Seqs ascend, and followers are usually near the newest: walk back from it.
            found = list(itertools.takewhile(lambda entry: entry[0] > seq, reversed(channel.items)))
        found.reverse()
        return found[:limit] if limit is not None else found

    def wait(self, subject, after_seq, timeout):
        if after_seq > 0 and subject not in self._channels:
            return True  # discarded since `after_seq` was read: the subject ended
        channel = self._channel(subject)
        with channel.condition:
            channel.used_at = time.monotonic()
            # Checked under the lock the appender notifies with, so no wake-up is lost.
            return channel.condition.wait_for(lambda: channel.next_seq - 1 > after_seq
                                              or self._channels.get(subject) is not channel, timeout)

    def latest_seq(self, subject):
        channel = self._channels.get(subject)
        return channel.next_seq - 1 if channel else 0

    def oldest_seq(self, subject):
        channel = self._channel(subject)
        with channel.condition:
            return channel.items[0][0] if channel.items else 0

    def discard_idle(self, idle_seconds):
        cutoff = time.monotonic() - idle_seconds
        with self._lock:
            idle = [subject for subject, channel in self._channels.items() if channel.used_at < cutoff]
        for subject in idle:
            self.discard(subject)
        return len(idle)

    def __len__(self):
        return len(self._channels)

    def discard(self, subject):
        with self._lock:
            channel = self._channels.pop(subject, None)
        if channel is not None:
            with channel.condition:
                channel.condition.notify_all()
