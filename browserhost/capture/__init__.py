"""Telemetry captured from a real Chromium over CDP, and a tail of Chromium's log file.

    capture = Capture(browser.ws_url, categories=lambda: session_categories(), sink=ingest)
    capture.start()
    ... capture.client_connected("c1"); capture.browser_exited(-9, pid=browser.pid) ...
    capture.stop()

`Capture` holds its own browser-level CDP connection. CDP events become the SDK's telemetry events
(lantern_wire/telemetry.py: nothing else is made), each a dict `validate_event` accepts: type,
category, ts (Unix microseconds, when the event was read), source `{kind: "cdp", event: <CDP method>,
metadata: {session_id, target_id}}`, data, and `truncated: true` when a string, a header list or a
body was cut. A category's events are made only while it is enabled (the check comes first). A CDP
message past `max_message` bytes is skipped while read (browserhost/cdp_frames.py) and counted dropped.

    core.py          Capture: wires the rest, starts and stops; monitor, system and connection events
    connection.py    the CDP connection: auto-attach, targets, sessions; the thread making calls
    target.py        one attached session and what its events need
    flusher.py       the queue and the flusher thread (batches, drops, the sink); the categories
    console.py       console_log, console_error
    network.py       network_request, network_response, network_loading_failed
    page.py          page_tab_opened, page_navigation, page_dom_content_loaded, page_load, page_crashed
    interaction.py   interaction_click, interaction_key, interaction_scroll_settled
    text.py          Cut (bounded strings) and the limits several categories share
    process.py       LogTail (Chromium's log file) and exit_metadata

Not filled here: `control` (cdp_command: the relay sees the client's commands, not this connection;
api_call), `platform`, `captcha` (Lantern solves none), `screenshot` (monitor_screenshot), and the
computed events network_idle, page_layout_settled,
page_navigation_settled, page_layout_shift and page_lcp.
"""
from browserhost.capture.core import Capture
from browserhost.capture.network import MAX_BODY
from browserhost.capture.process import LogTail, exit_metadata

__all__ = ["MAX_BODY", "Capture", "LogTail", "exit_metadata"]
