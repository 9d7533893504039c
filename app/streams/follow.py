"""The one follow loop every event stream runs, and the one waiter.

An area says what to read and when it is over (a `Reader`); the loop owns the rest: waiting on
the subject's channel (woken by a write in this process, or in another one through
app/streams/wakeups.py) with the poll interval as a fallback, keepalives after a quiet
heartbeat interval, handing `sse.IDLE` to the response after each wait (where it notices a
client that left), the ending when the server stops, and the reader's clean-up. Admission and
the response itself are `sse.stream`'s.

    frames = follow_loop(reader, heartbeat_seconds=15, poll_seconds=1)   # a generator of SSE frames
    value = wait_for(subject, check, limit_seconds=30, poll_seconds=1)
"""
import time
from dataclasses import dataclass, field

from app.core import shutdown, sse

MORE, WAIT, DONE = "more", "wait", "done"


@dataclass
class Batch:
    """What one read gave: frames to send, then MORE (read again at once: a full batch), WAIT
    (caught up: wait for the subject) or DONE (the stream is over once they are sent)."""

    frames: list = field(default_factory=list)
    then: str = WAIT


class Reader:
    """One follower's reader. `subject` is the channel it waits on."""

    subject = None

    def open(self):
        """Take what the stream holds while it runs (paired with close(); called by the loop, so a
        response that is never sent takes nothing)."""

    def read(self):
        """The next Batch. Called first at once, then after each wake-up or poll interval."""
        raise NotImplementedError

    def keepalive(self):
        """The frame sent after a quiet heartbeat interval."""
        return sse.comment()

    def ending(self):
        """The last frame when the server stops (None: none; clients resume with Last-Event-ID)."""
        return None

    def close(self):
        """Clean-up when the stream ends, however it ends (the client left, the server stops)."""


def follow_loop(reader, *, heartbeat_seconds, poll_seconds, channel_backend=None, monotonic=time.monotonic):
    """SSE frames of `reader` until it is DONE, the client leaves or the server stops."""
    from app import streams

    channels = channel_backend
    if channels is None:  # (not `or`: a backend with no subjects yet is falsy)
        channels = streams.channels()
        streams.listen()
    channels.ensure(reader.subject)  # a wake-up from elsewhere finds the channel and wakes us
    next_keepalive = monotonic() + heartbeat_seconds
    reader.open()
    try:
        while True:
            # The channel's position before the read: a write committed after the read still wakes the wait.
            mark = channels.latest_seq(reader.subject)
            batch = reader.read()
            yield from batch.frames
            if batch.then == DONE:
                return
            if batch.then == MORE:
                continue
            now = monotonic()
            if batch.frames:
                next_keepalive = now + heartbeat_seconds
            elif now >= next_keepalive:
                yield reader.keepalive()
                next_keepalive = now + heartbeat_seconds
            channels.wait(reader.subject, mark, timeout=max(0.0, min(poll_seconds, next_keepalive - now)))
            yield sse.IDLE
            if shutdown.stopping.is_set():
                last = reader.ending()
                if last is not None:
                    yield last
                return
    finally:
        reader.close()


def wait_for(subject, check, *, limit_seconds, poll_seconds, channel_backend=None, monotonic=time.monotonic):
    """`check()`'s first value that is not None, re-checked after each wake-up of `subject` or poll
    interval; None once `limit_seconds` (None: no limit) passed or the server is stopping."""
    from app import streams

    channels = channel_backend
    if channels is None:  # (not `or`: a backend with no subjects yet is falsy)
        channels = streams.channels()
        streams.listen()
    channels.ensure(subject)
    give_up = None if limit_seconds is None else monotonic() + limit_seconds
    while True:
        mark = channels.latest_seq(subject)
        value = check()
        if value is not None:
            return value
        remaining = poll_seconds if give_up is None else min(poll_seconds, give_up - monotonic())
        if remaining <= 0 or shutdown.stopping.is_set():
            return None
        channels.wait(subject, mark, timeout=remaining)
        if shutdown.stopping.is_set():
            return None
