"""What Lantern's app and its browser hosts (browserhost/) both speak, and nothing else: the standard
library only, so that a host imports no part of the app, Flask or the database layer."""
