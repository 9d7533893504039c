"""The journal behind process output and watch events: bounded, oldest dropped first, every reader following it
from any key, told what it missed, kept alive while nothing comes, ended once it is closed."""
import threading

import pytest

from browserhost.agent.http import AgentError
from browserhost.agent.output import Journal


def missed(span):
    return {"missed": span}


def test_the_oldest_entries_go_first_and_a_late_reader_is_told():
    journal = Journal(limit=10)
    for word in (b"aaaa", b"bbbb", b"cccc"):
        journal.append(word, len(word))
    journal.close()
    assert list(journal.follow(0, bytes.decode, missed)) == [(4, {"missed": 4}), (8, "bbbb"), (12, "cccc")]
    assert list(journal.follow(2, bytes.decode, missed)) == [(4, {"missed": 2}), (8, "bbbb"), (12, "cccc")]
    assert list(journal.follow(8, bytes.decode, missed)) == [(12, "cccc")]
    assert list(journal.follow(12, bytes.decode, missed)) == []


def test_the_newest_entry_stays_even_past_the_limit():
    journal = Journal(limit=2)
    journal.append("big", 5)
    assert [entry.key for entry in journal.entries] == [5]


def test_merging_stops_once_a_reader_took_the_entry():
    journal = Journal(limit=100)
    same = lambda last: last == "w"  # noqa: E731
    assert journal.append("w", merges=same) == journal.append("w", merges=same) == 1
    reader = journal.follow(0, str, missed, keep_alive=0.05)
    assert next(reader) == (1, "w")
    assert journal.append("w", merges=same) == 2


def test_readers_wait_for_entries_and_get_keep_alives():
    journal = Journal(limit=100)
    reader = journal.follow(0, str, missed, keep_alive=0.05)
    assert next(reader) is None
    threading.Timer(0.1, lambda: (journal.append("late"), journal.close())).start()
    assert [frame for frame in reader if frame is not None] == [(1, "late")]


@pytest.mark.parametrize("value", ["x", "-1", "1.5", "3"])
def test_a_bad_resume_point_is_refused(value):
    journal = Journal(limit=100)
    journal.append("a")
    journal.append("b")
    with pytest.raises(AgentError) as refusal:
        journal.check_key(value)
    assert refusal.value.status == 400


def test_a_resume_point_it_sent_is_taken():
    journal = Journal(limit=100)
    journal.append("a")
    assert (journal.check_key(None), journal.check_key(""), journal.check_key("1")) == (0, 0, 1)


def test_each_entry_costs_its_own_memory_too():
    # A process writing a byte at a time must not keep a million tiny entries in a 1 MiB ring.
    journal = Journal(limit=1000, entry_cost=99)
    for _ in range(50):
        journal.append(b"x", 1)
    assert len(journal.entries) == 10 and journal.kept == 1000
    journal.close()
    assert list(journal.follow(0, bytes.decode, missed))[0] == (40, {"missed": 40})
