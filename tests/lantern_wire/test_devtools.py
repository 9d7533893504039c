"""What a worker takes from a host's answer before it connects there and writes a request line."""
import pytest

from lantern_wire.devtools import DevTools

PATH = "/devtools/browser/0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0"


@pytest.mark.parametrize("endpoint", [
    {"browser_path": PATH, "socket": "/srv/hosts/s1/devtools.sock", "owner": 990},
    {"browser_path": PATH, "port": 41234},
])
def test_a_hosts_endpoint_is_taken_as_it_is(endpoint):
    devtools = DevTools.from_json(endpoint)
    assert devtools.as_json() == {"socket": None, "owner": None, "port": None, **endpoint}


@pytest.mark.parametrize("endpoint", [
    ["not an object"],
    {"browser_path": PATH + "\r\nSET pwned 1\r\n", "port": 41234},  # a request smuggled into the request line
    {"browser_path": "/json/version", "port": 41234},
    {"browser_path": PATH, "port": 6379 - 6000},  # below 1024: a system service, never Chromium's
    {"browser_path": PATH, "port": "41234"},
    {"browser_path": PATH, "port": 41234, "socket": "/srv/hosts/s1/devtools.sock"},
    {"browser_path": PATH},
])
def test_an_endpoint_no_host_makes_is_refused(endpoint):
    with pytest.raises(ValueError):
        DevTools.from_json(endpoint)
