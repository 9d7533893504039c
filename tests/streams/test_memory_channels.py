"""The in-memory channel backend: order, bounds, wake-ups."""
import threading
import time

from app.core import sse
from app.streams.memory import MemoryChannels


def test_sequence_numbers_are_monotonic_per_subject():
    channels = MemoryChannels(capacity=10)
    assert [channels.append("a", x) for x in "xyz"] == [1, 2, 3]
    assert channels.append("b", "other") == 1
    assert channels.read_after("a", 0) == [(1, "x"), (2, "y"), (3, "z")]
    assert channels.read_after("a", 2) == [(3, "z")]
    assert channels.read_after("a", 1, limit=1) == [(2, "y")]
    assert (channels.latest_seq("a"), channels.oldest_seq("a"), channels.latest_seq("new")) == (3, 1, 0)


def test_bounded_buffer_evicts_the_oldest_and_wraps_around():
    channels = MemoryChannels(capacity=4)
    for i in range(1, 11):
        channels.append("s", i)
    assert channels.oldest_seq("s") == 7 and channels.latest_seq("s") == 10
    # A cursor that was evicted resumes at the oldest retained item, without gaps after it.
    assert channels.read_after("s", 2) == [(7, 7), (8, 8), (9, 9), (10, 10)]
    assert channels.read_after("s", 8) == [(9, 9), (10, 10)]


def test_wait_returns_at_once_when_something_is_already_there():
    channels = MemoryChannels()
    channels.append("s", 1)
    assert channels.wait("s", 0, timeout=5) is True


def test_wait_times_out_when_nothing_comes():
    channels = MemoryChannels()
    assert channels.wait("s", 0, timeout=0.01) is False


def test_one_append_wakes_every_waiter():
    channels = MemoryChannels()
    woken, ready = [], threading.Barrier(21)

    def waiter():
        ready.wait()
        woken.append(channels.wait("s", 0, timeout=10))

    threads = [threading.Thread(target=waiter) for _ in range(20)]
    for t in threads:
        t.start()
    ready.wait()
    time.sleep(0.05)  # let the waiters block (a head start, not a correctness condition)
    channels.append("s", "go")
    for t in threads:
        t.join(timeout=10)
    assert woken == [True] * 20


def test_no_wake_up_is_lost_between_checking_and_waiting():
    """Appends racing with waits: every waiter that saw seq n returns once n+1 exists."""
    channels = MemoryChannels()
    results = []

    def follower():
        seen = 0
        while seen < 200:
            if not channels.wait("s", seen, timeout=5):
                results.append(("timed out at", seen))
                return
            seen = channels.latest_seq("s")
        results.append("done")

    threads = [threading.Thread(target=follower) for _ in range(5)]
    for t in threads:
        t.start()
    for i in range(200):
        channels.append("s", i)
    for t in threads:
        t.join(timeout=30)
    assert results == ["done"] * 5


def test_discard_wakes_waiters():
    channels = MemoryChannels()
    woke = []
    thread = threading.Thread(target=lambda: woke.append(channels.wait("s", 0, timeout=10)))
    thread.start()
    time.sleep(0.05)
    channels.discard("s")
    thread.join(timeout=10)
    assert woke == [True]


def test_sse_frames():
    assert sse.frame({"a": 1}, 7) == 'id: 7\ndata: {"a":1}\n\n'
    assert sse.frame({"event": "x"}) == 'data: {"event":"x"}\n\n'
    assert sse.comment() == ": keepalive\n\n"
