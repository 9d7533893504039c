"""SharedTail: one read per wake-up for every follower, bursts, trimming."""
from app.streams.tail import SharedTail, Tails


class Store:
    def __init__(self):
        self.events, self.reads = [], 0

    def add(self, n):
        start = len(self.events) + 1
        self.events.extend((i, f"e{i}") for i in range(start, start + n))

    def fetch_after(self, cursor, batch=3):
        self.reads += 1
        return [e for e in self.events if e[0] > cursor][:batch]


def test_followers_share_one_read_per_wake_up():
    store = Store()
    tail = SharedTail(store.fetch_after, floor=0, batch=3)
    store.add(2)
    assert tail.after(0, seen_seq=1, poll_seconds=60) == [(1, "e1"), (2, "e2")]
    reads = store.reads
    assert tail.after(1, seen_seq=1, poll_seconds=60) == [(2, "e2")]
    assert tail.after(0, seen_seq=1, poll_seconds=60) == [(1, "e1"), (2, "e2")]
    assert store.reads == reads, "same wake-up: served from memory"


def test_a_burst_larger_than_a_batch_is_read_at_once():
    store = Store()
    tail = SharedTail(store.fetch_after, floor=0, batch=3)
    store.add(10)
    assert [e[0] for e in tail.after(0, seen_seq=1, poll_seconds=60)] == list(range(1, 11))


def test_the_poll_interval_rereads_without_a_wake_up():
    store = Store()
    tail = SharedTail(store.fetch_after, floor=0, batch=3)
    assert tail.after(0, seen_seq=0, poll_seconds=60) == []
    store.add(1)  # written by another process: no wake-up here
    assert tail.after(0, seen_seq=0, poll_seconds=60) == []
    assert tail.after(0, seen_seq=0, poll_seconds=0) == [(1, "e1")]


def test_trimming_raises_the_floor_and_old_cursors_read_on_their_own():
    store = Store()
    tail = SharedTail(store.fetch_after, floor=0, batch=3, capacity=4)
    store.add(6)
    assert tail.after(4, seen_seq=1, poll_seconds=60) == [(5, "e5"), (6, "e6")]
    assert tail.floor == 2
    assert tail.after(1, seen_seq=1, poll_seconds=60) is None
    assert tail.after(2, seen_seq=1, poll_seconds=60) == [(3, "e3"), (4, "e4"), (5, "e5"), (6, "e6")]


def test_tails_live_while_they_have_followers():
    tails = Tails()
    made = []
    a = tails.acquire("s", lambda: made.append(1) or SharedTail(lambda c: [], 0, batch=1))
    b = tails.acquire("s", lambda: made.append(2) or SharedTail(lambda c: [], 0, batch=1))
    assert a is b and made == [1]
    tails.release("s", a)
    assert len(tails) == 1
    tails.release("s", b)
    assert len(tails) == 0
