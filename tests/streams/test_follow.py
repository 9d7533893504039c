"""The one follow loop and the one waiter (app/streams/follow.py), with millisecond intervals and
their own channels."""
import threading

import pytest

from app.core import shutdown, sse
from app.streams.follow import DONE, MORE, WAIT, Batch, Reader, follow_loop, wait_for
from app.streams.memory import MemoryChannels


class Script(Reader):
    """Reads what the test queues; records its calls."""

    subject = "test:subject"

    def __init__(self, *batches):
        self.batches = list(batches)
        self.calls = []

    def open(self):
        self.calls.append("open")

    def read(self):
        self.calls.append("read")
        return self.batches.pop(0) if self.batches else Batch()

    def ending(self):
        return "ending\n\n"

    def close(self):
        self.calls.append("close")


@pytest.fixture
def channels():
    return MemoryChannels()


@pytest.fixture(autouse=True)
def not_stopping():
    yield
    shutdown.stopping.clear()


def frames(generator, count):
    """The first `count` items other than IDLE."""
    out = []
    for item in generator:
        if item is not sse.IDLE:
            out.append(item)
            if len(out) == count:
                break
    return out


def test_frames_come_in_order_more_reads_again_at_once_and_done_ends(channels):
    reader = Script(Batch(["a"], MORE), Batch(["b"], WAIT), Batch(["c"], DONE))
    loop = follow_loop(reader, heartbeat_seconds=60, poll_seconds=0.001, channel_backend=channels)
    assert [item for item in loop if item is not sse.IDLE] == ["a", "b", "c"]
    assert reader.calls == ["open", "read", "read", "read", "close"]
    assert channels.latest_seq(reader.subject) == 0  # it only waited


def test_a_quiet_stream_sends_the_readers_keepalive_after_each_heartbeat_interval(channels):
    now = [0.0]
    reader = Script()
    loop = follow_loop(reader, heartbeat_seconds=5, poll_seconds=0.001, channel_backend=channels,
                       monotonic=lambda: now[0])
    assert next(loop) is sse.IDLE  # read nothing, waited a poll interval
    now[0] = 5.0
    assert next(loop) == sse.comment()
    assert next(loop) is sse.IDLE
    loop.close()
    assert reader.calls[-1] == "close"


def test_frames_put_the_keepalive_off(channels):
    now = [0.0]
    reader = Script(*(Batch([str(n)]) for n in range(3)))
    loop = follow_loop(reader, heartbeat_seconds=5, poll_seconds=0.001, channel_backend=channels,
                       monotonic=lambda: now[0])
    seen = []
    for step in range(6):
        now[0] = step * 4.0  # frames every 4 s for 12 s: no keepalive; then quiet
        seen.append(next(loop))
    assert [item for item in seen if item is not sse.IDLE] == ["0", "1", "2"]
    now[0] = 30.0
    assert frames(loop, 1) == [sse.comment()]


def test_an_announcement_wakes_the_loop_before_its_poll_interval(channels):
    reader = Script()
    loop = follow_loop(reader, heartbeat_seconds=60, poll_seconds=30, channel_backend=channels)
    reader.batches.append(Batch(["first"]))
    assert next(loop) == "first"
    timer = threading.Timer(0.01, lambda: (reader.batches.append(Batch(["woken"])),
                                           channels.append(reader.subject, 1)))
    timer.start()
    assert next(loop) is sse.IDLE  # the wait ended by the append, not by the 30 s poll
    assert next(loop) == "woken"
    timer.join()
    loop.close()


def test_a_stopping_server_ends_the_stream_with_the_readers_ending(channels):
    reader = Script()
    loop = follow_loop(reader, heartbeat_seconds=60, poll_seconds=0.001, channel_backend=channels)
    assert next(loop) is sse.IDLE
    shutdown.stopping.set()
    assert list(loop) == ["ending\n\n"]  # looked right after the wait it was in
    assert reader.calls[-1] == "close"


def test_a_response_never_sent_takes_nothing(channels):
    reader = Script()
    follow_loop(reader, heartbeat_seconds=60, poll_seconds=0.001, channel_backend=channels).close()
    assert reader.calls == []


def test_wait_for_returns_the_first_value_and_none_at_the_limit(channels):
    answers = [None, None, "yes"]
    assert wait_for("s", lambda: answers.pop(0), limit_seconds=5, poll_seconds=0.001,
                    channel_backend=channels) == "yes"
    now = [0.0]

    def never():
        now[0] += 1.0
        return None

    assert wait_for("s", never, limit_seconds=3, poll_seconds=0.001, channel_backend=channels,
                    monotonic=lambda: now[0]) is None
    assert now[0] == 3.0  # checked once more after the last wait


def test_wait_for_wakes_on_its_subject_and_gives_up_when_the_server_stops(channels):
    flag = []
    setter = threading.Timer(0.01, lambda: (flag.append("set"), channels.append("s", 1)))
    setter.start()
    assert wait_for("s", lambda: flag[0] if flag else None, limit_seconds=None, poll_seconds=30,
                    channel_backend=channels) == "set"
    setter.join()
    shutdown.stopping.set()
    assert wait_for("s", lambda: None, limit_seconds=None, poll_seconds=0.001, channel_backend=channels) is None
