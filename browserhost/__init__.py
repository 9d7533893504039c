"""Lantern's browser host: a program of its own (`python -m browserhost`) that starts, sandboxes, relays,
captures and stops the Chromium of the sessions the app places on it. It imports nothing of the app,
Flask or the database layer; it talks to the app over HTTP (uplink.py) in the shapes of lantern_wire/."""
