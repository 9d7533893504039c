"""A profile's state (cookies and localStorage, storage.py's CDP) given to a session's running browser and read back
from it: the origins given are read back at the end, and what was given for an origin the browser cannot open is kept.
`note(hosted, message, level)` writes the session's log (registry.Registry.note).
"""
import logging

from browserhost import storage
from browserhost.cdp import CdpClient


def load(hosted, state, timeout, note):
    """A profile's cookies and localStorage into the running browser."""
    hosted.origins |= {entry["origin"] for entry in state.get("origins") or ()}
    hosted.loaded_storage.update({storage.web_origin(entry["origin"]): entry for entry in state.get("origins") or ()})
    with CdpClient(hosted.browser.devtools, timeout=timeout) as cdp:
        skipped = storage.load_state(cdp, state)
    if skipped:
        note(hosted, f"localStorage of {', '.join(skipped)} not loaded: the browser cannot open (its policies block "
                     "it); the profile keeps what it had there", level=logging.WARNING)


def read(hosted, cdp, note):
    """The browser's cookies and localStorage; an origin it cannot open or read keeps what was loaded for it."""
    unread = []
    state = storage.read_state(cdp, extra_origins=hosted.origins, unread=unread)
    kept = [hosted.loaded_storage[origin] for origin in unread if origin in hosted.loaded_storage]
    if unread:
        note(hosted, f"localStorage of {', '.join(unread)} not read: the browser cannot open it; the profile keeps "
                     "what it had there", level=logging.WARNING)
    state["origins"] += kept
    return state
