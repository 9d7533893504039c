"""Starts the session agent: its log, its Landlock domain, then the server on the listening socket it was given
as stdin (fd 0)."""
import logging
import os
import socket
import sys

from .confine import confine
from .server import serve

LOG_FOLDER = "/run/lantern"


def main() -> None:
    start_log()
    confine()
    serve(socket.socket(fileno=0))


def start_log() -> None:
    """The agent's log goes to the session's /run/lantern/agent.log (the host reads it); to stderr without it."""
    options = {"format": "%(asctime)s %(levelname)s %(message)s", "level": logging.INFO}
    if os.path.isdir(LOG_FOLDER):
        logging.basicConfig(filename=os.path.join(LOG_FOLDER, "agent.log"), **options)
    else:
        logging.basicConfig(stream=sys.stderr, **options)


if __name__ == "__main__":
    main()
