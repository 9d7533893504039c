"""The OpenAPI document describes every route of the public API (the internal one for browser hosts is
described in docs/operations.md and lantern_wire/hosts.py: no client of the API calls it)."""


def test_every_route_is_documented(app, anonymous):
    spec = anonymous.get("/openapi.json").get_json()
    documented = {(path, method.upper()) for path, ops in spec["paths"].items() for method in ops}
    for rule in app.url_map.iter_rules():
        if rule.endpoint.startswith(("api-docs.", "api-docs-assets.", "browser_hosts.")):  # docs page, its files
            continue
        path = rule.rule.replace("<", "{").replace(">", "}")
        for method in rule.methods - {"HEAD", "OPTIONS"}:
            assert (path, method) in documented, (path, method)


def test_bearer_auth_errors_and_paging_are_described(anonymous):
    spec = anonymous.get("/openapi.json").get_json()
    assert spec["components"]["securitySchemes"]["bearerAuth"] == {"type": "http", "scheme": "bearer"}
    assert spec["security"] == [{"bearerAuth": []}]
    assert set(spec["components"]["schemas"]["Error"]["properties"]) == {"code", "message", "details", "inner_error"}
    listing = spec["paths"]["/org/projects"]["get"]
    assert set(listing["responses"]["200"]["headers"]) == {"X-Has-More", "X-Next-Offset"}
    assert {p["name"] for p in listing["parameters"]} == {"limit", "offset", "name", "query"}
    assert spec["paths"]["/projects"]["get"]["deprecated"] is True
    assert "deprecated" not in spec["paths"]["/org/projects"]["get"]


def test_the_root_points_to_the_docs_without_a_key(anonymous, caplog):
    home = anonymous.get("/")
    assert home.status_code == 200
    assert home.get_json()["docs"] == "/docs" and home.get_json()["openapi"] == "/openapi.json"
    for link in ("/docs", "/openapi.json"):
        assert anonymous.get(home.get_json()[link.strip("/").split(".")[0]]).status_code == 200
    caplog.set_level("INFO", logger="app.requests")
    icon = anonymous.get("/favicon.ico")
    assert icon.status_code == 204 and "max-age" in icon.headers["Cache-Control"]
    assert not [r for r in caplog.records if " 401 " in r.getMessage()]
