"""/docs works with no internet: Swagger UI's files come from Lantern itself (app/core/docs.py).

The browser test opens /docs in headless Chromium (tests/chromium.py) against the live server
(gunicorn + gevent, tests/live_server.py), with every host name unresolvable, and does what a
person does: Authorize with an API key, then Try it out and Execute on GET /org/limits.
"""
import json

import pytest

from tests.chromium import Browser, find_chromium
from tests.live_server import serve_with_organization

CHROMIUM = find_chromium()
NEEDS_CHROMIUM = pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium: neither $CHROMIUM nor any of chromium, chromium-browser, google-chrome "
                             "is on PATH (`make install-test` as root on Debian installs the chromium package)")
# What the /docs page loads, and the type each must be served with.
PAGE_ASSETS = {"swagger-ui.css": "text/css; charset=utf-8",
               "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
               "swagger-ui-standalone-preset.js": "text/javascript; charset=utf-8"}
# Swagger UI's block for the operation GET /org/limits.
LIMITS = '.opblock.opblock-get:has(.opblock-summary-path[data-path="/org/limits"])'


def test_the_docs_page_loads_swagger_ui_from_lantern_with_types_and_a_cache_header(anonymous):
    page = anonymous.get("/docs")
    assert page.status_code == 200
    for name, content_type in PAGE_ASSETS.items():
        assert f'"/docs/assets/{name}"' in page.text
        with anonymous.get(f"/docs/assets/{name}") as asset:  # (closed: it is streamed from disk)
            assert asset.status_code == 200, asset.text
            assert asset.headers["Content-Type"] == content_type
            assert asset.headers["X-Content-Type-Options"] == "nosniff"
            assert set(asset.headers["Cache-Control"].split(", ")) == {"public", "max-age=86400"}
            assert len(asset.data) > 1000
        with anonymous.get(f"/docs/assets/{name}", headers={"If-None-Match": asset.headers["ETag"]}) as again:
            assert again.status_code == 304


@pytest.mark.parametrize("path", [
    "/docs/assets/LICENSE",                 # in the package, not a stylesheet, script or icon
    "/docs/assets/oauth2-redirect.html",    # no HTML page of Swagger UI's is served from our origin
    "/docs/assets/nothing.js",
    "/docs/assets/..",
    "/docs/assets/..%2f__init__.py",
    "/docs/assets/%2e%2e%2f%2e%2e%2fflask_smorest%2f__init__.py",
    "/docs/assets/swagger-ui.css/..%2f..%2fVERSION",
])
def test_nothing_but_swagger_ui_files_is_served(anonymous, path):
    response = anonymous.get(path)
    assert response.status_code == 404, (path, response.status_code, response.data[:200])
    assert response.get_json()["code"] == "not_found"


@pytest.fixture(scope="module")
def lantern(tmp_path_factory):
    """The real server (gunicorn + gevent, one worker) on a private database, and an organization's owner key."""
    with serve_with_organization(tmp_path_factory.mktemp("docs_page_server"), "Docs page") as served:
        yield served


@pytest.fixture
def offline_page():
    """A Chromium tab that can reach 127.0.0.1 and nothing else: no host name resolves (a CDN included)."""
    with Browser(CHROMIUM, extra_args=("--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",)) as browser:
        yield browser.new_page()


def wait_for_element(page, selector, what, timeout=10.0):
    page.wait_for(f"!!document.querySelector({json.dumps(selector)})", what=what, timeout=timeout)


def shown(page, selector):
    return page.evaluate(f"[...document.querySelectorAll({json.dumps(selector)})].map((e) => e.textContent)")


@NEEDS_CHROMIUM
def test_a_person_authorizes_and_runs_get_org_limits_from_the_docs_page(lantern, offline_page):
    page = offline_page
    page.navigate(f"{lantern.base_url}/docs")
    wait_for_element(page, LIMITS, "Swagger UI's GET /org/limits", timeout=20)

    page.click(".auth-wrapper button.authorize")
    wait_for_element(page, ".auth-container input", "the Authorize dialog")
    page.type(".auth-container input", lantern.api_key)
    page.click(".auth-btn-wrapper button.authorize")
    wait_for_element(page, ".auth-btn-wrapper button.btn-done", "Authorized")
    page.click(".auth-btn-wrapper button.btn-done")

    page.click(f"{LIMITS} .opblock-summary-control")
    wait_for_element(page, f"{LIMITS} .try-out__btn", "Try it out")
    page.click(f"{LIMITS} .try-out__btn")
    wait_for_element(page, f"{LIMITS} button.execute", "Execute")
    page.click(f"{LIMITS} button.execute")
    statuses = page.wait_for_value(lambda: shown(page, f"{LIMITS} .live-responses-table tbody .response-col_status"),
                                   what="the response to GET /org/limits")
    assert [s.strip() for s in statuses] == ["200"], page.diagnosis()
    bodies = [json.loads(text) for text in shown(page, f"{LIMITS} .live-responses-table pre")
              if text.startswith("{")]
    assert [body["max_concurrent_sessions"] for body in bodies] == [10], page.diagnosis()

    urls = [r.get("url", "") for r in page.requests.values()]
    elsewhere = [url for url in urls if not url.startswith((lantern.base_url, "data:"))]
    assert elsewhere == [] and page.exceptions == [], page.diagnosis()
