"""Helpers of the live tests of a session's files and processes (test_files.py, test_processes.py,
test_session_security.py): the SDK as an organization of a test module's own, whose error bodies may not name the
host, and the refusals it gets."""
import re
import secrets
from contextlib import contextmanager

import httpx
import kernel
import pytest

from browserhost.settings import HostSettings


def leaks(lantern):
    """What of its host no error body may name. (The session's own /tmp, /run and /proc may be named, as may the
    server's folder, which a test names in a path it sends: they are the paths a caller sent.)"""
    words = [str(lantern.workdir), HostSettings().browser_sandbox_dir, "/var/lib/lantern"]
    return re.compile("|".join([*map(re.escape, words), r"\.sock\b", r"127\.0\.0\.1", r"Errno", r"Traceback",
                                "bwrap", "slirp4netns", "setpriv"]), re.IGNORECASE)


@contextmanager
def tenant(lantern, name):
    """The SDK as a new organization `name` (its own, so that the `sdk` fixture, which deletes its organization's
    browsers after each test, leaves a module's session alone); no error body it got may name its host."""
    bodies = []

    def keep(response):
        if response.status_code >= 400:
            response.read()
            bodies.append(response.text)

    client = lantern.client(api_key=lantern.new_org(f"{name}-{secrets.token_hex(3)}"),
                            http_client=httpx.Client(event_hooks={"response": [keep]}))
    try:
        yield client
    finally:
        for browser in client.browsers.list():
            client.browsers.delete_by_id(browser.session_id)
        client.close()
    words = leaks(lantern)
    assert [body for body in bodies if words.search(body)] == []


def refusal(call):
    """(status, code) of a call's error answer, checked for the API's error shape; (200, None) when it passed."""
    try:
        call()
    except kernel.APIStatusError as error:
        body = error.body
        assert isinstance(body, dict) and body.get("code") and body.get("message"), (error.status_code, body)
        return error.status_code, body["code"]
    return 200, None


def refused(call, status=400):
    """The error body of a call that must be refused with `status`."""
    with pytest.raises(kernel.APIStatusError) as error:
        call()
    assert error.value.status_code == status, error.value.body
    assert error.value.body["code"] and error.value.body["message"]
    return error.value.body
