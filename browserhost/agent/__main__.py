"""Starts the session agent: its log, its user namespace and Landlock domain (confine.py), then the server on the
listening socket it was given as stdin (fd 0)."""
import logging
import os
import socket
import sys
from logging.handlers import RotatingFileHandler

from .confine import confine
from .server import serve

LOG_FOLDER = "/run/lantern"
LOG_BYTES = 128 * 1024  # /run/lantern is a small tmpfs the DevTools and display logs share: two files at most


def main() -> None:
    start_log()
    confine()
    serve(socket.socket(fileno=0))


def start_log() -> None:
    """The agent's log goes to the session's /run/lantern/agent.log, for an operator to read in the sandbox's run/
    folder while the session lives (the host does not read it: the tenant can write it too); to stderr without it."""
    options = {"format": "%(asctime)s %(levelname)s %(message)s", "level": logging.INFO}
    try:
        handler = RotatingFileHandler(os.path.join(LOG_FOLDER, "agent.log"), maxBytes=LOG_BYTES, backupCount=1)
    except OSError:  # no such folder (tests) or not writable: a log is no reason not to serve
        handler = logging.StreamHandler(sys.stderr)
    logging.basicConfig(handlers=[handler], **options)


if __name__ == "__main__":
    main()
