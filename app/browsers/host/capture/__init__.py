"""Telemetry captured from a real Chromium over CDP (core.py), and a tail of Chromium's log file (process.py)."""
from app.browsers.host.capture.core import MAX_BODY, Capture
from app.browsers.host.capture.process import LogTail, exit_metadata

__all__ = ["MAX_BODY", "Capture", "LogTail", "exit_metadata"]
