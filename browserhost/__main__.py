"""`python -m browserhost` (or `lantern-browser-host`): run a browser host. Settings: browserhost/settings.py."""
import argparse
import errno
import logging
import sys

from browserhost import settings as host_settings
from browserhost.server import BrowserHostServer
from browserhost.uplink import AppClient

# The exit status when the port is taken (make run then does not start it again).
PORT_TAKEN = 3


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m browserhost", description="Run a Lantern browser host: it "
                                     "starts, relays and stops the Chromium of the sessions the app places on it.")
    parser.add_argument("--bind", default="127.0.0.1:8790", help="ADDRESS:PORT of the host's control API "
                        "(default: %(default)s)")
    parser.add_argument("--advertise", help="URL the app's workers reach this host at (default: http://<bind>; set "
                        "it when binding 0.0.0.0)")
    parser.add_argument("--capacity", type=int, help="most browsers at once (default: BROWSER_HOST_CAPACITY, else "
                        "from the machine's memory)")
    parser.add_argument("--app-url", help="the app's base URL as this host reaches it (default: LANTERN_APP_URL, "
                        "else http://127.0.0.1:8000)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    address, _, port = args.bind.rpartition(":")
    if not address or not port.isdigit():
        parser.error("--bind: give ADDRESS:PORT, e.g. 127.0.0.1:8790")
    # A wrong setting raises SettingsError: its one line is all the host prints as it exits (status 1).
    settings = host_settings.load(APP_URL=args.app_url, BROWSER_HOST_CAPACITY=args.capacity)
    credential = host_settings.credential(settings)
    if not credential:
        parser.error("no credential: set LANTERN_BROWSER_HOST_CREDENTIAL (or LANTERN_BROWSER_HOST_CREDENTIAL_FILE) "
                     "to what `flask --app app browsers hosts add NAME` printed")
    capacity = (settings.browser_host_capacity
                or host_settings.memory_capacity(settings.browser_host_memory_per_browser_mb))
    server = BrowserHostServer(settings, AppClient(settings.app_url, credential), bind=(address, int(port)),
                               advertise=args.advertise or f"http://{args.bind}", capacity=capacity)
    if not server.starts.binary:
        print("Chromium is missing: install Debian's chromium (apt-get install chromium); until then this host "
              "takes no browser and creates answer 503 no_browser_host.", file=sys.stderr)
    try:
        return server.run()
    except OSError as error:
        if error.errno != errno.EADDRINUSE:
            raise
        print(f"The browser host cannot listen on {args.bind}: the port is taken. Stop what uses it, or choose "
              f"another port: make run BROWSER_HOST_PORT={int(port) + 1} (or --bind).", file=sys.stderr)
        return PORT_TAKEN


if __name__ == "__main__":
    sys.exit(main())
