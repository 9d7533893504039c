"""What Lantern's app and its browser hosts (browserhost/) both speak, and nothing else: the standard
library only, so that a host imports no part of the app, Flask or the database layer.

hosts       the app's internal API for hosts, their credentials, the values both sides name
telemetry   the telemetry event catalogue and the check every event passes (a host's capture makes them)
devtools    where a browser's DevTools answer; splice: a byte relay between two sockets
keyboard    which text the computer API types (the app refuses the rest, a host checks again)
"""
