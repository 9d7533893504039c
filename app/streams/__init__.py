"""Ordered event channels keyed by subject, shared by every stream, and the wake-ups that move them.

`channels()` is the backend of this process: followers wait on a subject's channel, and
`announce(subject)` wakes them, here at once and in every other process through the
wake-up bus (app/streams/wakeups.py). The database stays the source of truth: a follower
woken reads its events there (or from a buffer filled from there), so a wake-up that is
lost only makes it late by a poll interval. `follow.py` holds the one follow loop.
"""
from app.core.settings import settings
from app.streams import wakeups
from app.streams.base import ChannelBackend
from app.streams.memory import MemoryChannels

_backend = None
_telemetry = None
_bus = None
# Subject prefix ("telemetry" of "telemetry:<id>") -> what this process does with a wake-up from
# another one before its followers wake: handler(subject, seq, ended).
_handlers = {}


def init_app(app):
    global _backend, _telemetry, _bus
    _backend = MemoryChannels(capacity=settings(app).stream_channel_capacity)
    _telemetry = MemoryChannels(capacity=settings(app).telemetry_buffer_events)
    from app.core.db import db

    if _bus is not None:
        _bus.stop()  # an app made again in this process (tests): one listener at a time
    _bus = wakeups.make_bus(settings(app), db, _deliver)
    app.extensions["channels"] = _backend
    app.extensions["telemetry_buffers"] = _telemetry
    app.extensions["wakeups"] = _bus


def channels() -> ChannelBackend:
    return _backend


def telemetry_buffers() -> ChannelBackend:
    """The live telemetry ring buffers: per browser session, items under their database seq."""
    return _telemetry


def announce(subject, seq=0, *, ended=False):
    """After the commit that moved `subject` (to `seq`, where it has one) or ended it: wake its
    followers in every process. Published first: a follower here that ends on this wake-up finds
    the announcement's own write already done."""
    if _bus is not None:
        _bus.publish(subject, seq, ended)
    _wake(subject, seq, ended)


def on_wakeup(prefix, handler):
    """Run `handler(subject, seq, ended)` for wake-ups of `prefix:...` subjects from other processes."""
    _handlers[prefix] = handler


def listen():
    """Make sure this process hears other processes' wake-ups (called by every follower)."""
    if _bus is not None:
        _bus.listen()


def _deliver(subject, seq, ended):
    if subject not in _backend:
        return  # nobody here follows it
    handler = _handlers.get(subject.partition(":")[0])
    if handler is not None:
        handler(subject, seq, ended)
    _wake(subject, seq, ended)


def _wake(subject, seq, ended):
    if ended:
        _backend.discard(subject)
    else:
        _backend.append(subject, seq)


__all__ = ["ChannelBackend", "MemoryChannels", "announce", "channels", "init_app", "listen", "on_wakeup",
           "telemetry_buffers"]
