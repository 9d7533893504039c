"""The deprecated /projects routes: headers until the sunset, then 410 (spec part 9)."""
import pytest

from app.core import clock, settings

SUNSET = "2026-11-24T00:00:00Z"


@pytest.fixture
def project(client):
    return client.post("/org/projects", json={"name": "legacy"}).get_json()


def routes(project):
    return [("get", "/projects", None, "/org/projects"),
            ("post", "/projects", {"name": "via legacy"}, "/org/projects"),
            ("get", f"/projects/{project['id']}/limits", None, f"/org/projects/{project['id']}/limits")]


def test_before_sunset_they_work_like_the_org_routes_and_say_so(client, project):
    clock.freeze(clock.parse_rfc3339(SUNSET))
    clock.advance(microseconds=-1)
    for method, path, body, successor in routes(project):
        response = getattr(client, method)(path, json=body)
        assert response.status_code in (200, 201), (path, response.get_json())
        assert response.headers["Deprecation"] == "@1779580800"  # 2026-05-24T00:00:00Z
        assert response.headers["Sunset"] == "Tue, 24 Nov 2026 00:00:00 GMT"
        assert response.headers["Link"] == f'<{successor}>; rel="successor-version"'
    assert client.get("/org/projects?name=via%20legacy").get_json()[0]["name"] == "via legacy"
    listed = client.get("/projects?limit=1")
    assert listed.headers["X-Has-More"] == "true"
    assert client.get(f"/projects/{project['id']}/limits").get_json()["max_concurrent_sessions"] is None


def test_from_the_sunset_instant_they_answer_410(client, project):
    clock.freeze(clock.parse_rfc3339(SUNSET))
    for method, path, body, successor in routes(project):
        response = getattr(client, method)(path, json=body)
        assert response.status_code == 410, path
        error = response.get_json()
        assert error["code"] == "route_removed"
        assert successor in error["message"]
        assert response.headers["Link"] == f'<{successor}>; rel="successor-version"'
    assert client.get("/org/projects").status_code == 200


def test_org_routes_carry_no_deprecation_headers(client):
    assert "Deprecation" not in client.get("/org/projects").headers


def test_sunset_instant_is_configuration(app, client, project):
    settings.change(app, PROJECTS_ROUTES_DEPRECATED_AT="2019-06-01T00:00:00Z",
                    PROJECTS_ROUTES_SUNSET_AT="2020-01-01T00:00:00Z")
    assert client.get("/projects").status_code == 410


def test_successor_link_is_quoted(client):
    clock.freeze(clock.parse_rfc3339("2026-01-01T00:00:00Z"))
    response = client.get('/projects/日本>; rel="x/limits')
    assert response.status_code == 404
    quoted = "/org/projects/%E6%97%A5%E6%9C%AC%3E%3B%20rel%3D%22x/limits"
    assert response.headers["Link"] == f'<{quoted}>; rel="successor-version"'
