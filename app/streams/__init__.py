"""Ordered event channels keyed by subject, shared by every stream.

`channels()` is the backend of this process. The in-memory backend (the default)
wakes followers in the same worker at once; code that must also see events from
other workers keeps a durable copy (the database) and uses the channel as the
wake-up signal, waiting at most a poll interval. A Redis Streams backend can
implement the same interface (`ChannelBackend`) without changing callers.
"""
from app.streams.base import ChannelBackend
from app.streams.memory import MemoryChannels

_backend = None
_telemetry = None


def init_app(app):
    global _backend, _telemetry
    _backend = MemoryChannels(capacity=app.config["STREAM_CHANNEL_CAPACITY"])
    _telemetry = MemoryChannels(capacity=app.config["TELEMETRY_BUFFER_EVENTS"])
    app.extensions["channels"] = _backend
    app.extensions["telemetry_buffers"] = _telemetry


def channels() -> ChannelBackend:
    return _backend


def telemetry_buffers() -> ChannelBackend:
    """The live telemetry ring buffers: per browser session, items under their database seq."""
    return _telemetry


__all__ = ["ChannelBackend", "MemoryChannels", "channels", "init_app", "telemetry_buffers"]
