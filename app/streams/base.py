"""The interface every channel backend implements."""
from typing import Any, Protocol


class ChannelBackend(Protocol):
    """Per subject: a bounded, ordered log of items with sequence numbers 1, 2, 3, ...

    Sequence numbers are monotonic per subject and never reused while the
    subject exists; when the bound is reached the oldest items are evicted.
    """

    def ensure(self, subject: str) -> None:
        """Create the subject now if it does not exist (a follower does, before its first read)."""

    def __contains__(self, subject: str) -> bool:
        """Whether the subject exists here (someone followed or announced it, and it was not discarded)."""

    def append(self, subject: str, item: Any) -> int:
        """Add `item`; returns its sequence number and wakes every waiter of the subject."""

    def extend(self, subject: str, entries: list[tuple[int, Any]]) -> int:
        """Add items whose sequence numbers were assigned elsewhere (e.g. by the database).

        `entries` are (seq, item) in ascending order; those at or below the newest
        seq are ignored, so the same entries may be offered twice. Returns the newest seq.
        """

    def read_after(self, subject: str, seq: int, limit: int | None = None) -> list[tuple[int, Any]]:
        """Retained items with a sequence number above `seq`, oldest first.

        If `seq` was evicted, reading starts at the oldest retained item.
        """

    def wait(self, subject: str, after_seq: int, timeout: float) -> bool:
        """Block until an item above `after_seq` exists (True) or `timeout` passes (False)."""

    def latest_seq(self, subject: str) -> int:
        """The newest sequence number (0 when nothing was appended)."""

    def oldest_seq(self, subject: str) -> int:
        """The oldest retained sequence number (0 when empty)."""

    def discard_idle(self, idle_seconds: float) -> int:
        """Forget subjects nobody appended to or read for `idle_seconds`; returns how many."""

    def discard(self, subject: str) -> None:
        """Forget the subject and wake its waiters (they then re-check their source)."""
