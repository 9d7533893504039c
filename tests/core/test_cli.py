"""`flask --app app orgs ...` and `db upgrade`."""
from app.core.db import db
from app.orgs.models import Organization
from tests.conftest import client_for


def test_orgs_create_prints_the_key_alone_on_the_last_line(app):
    result = app.test_cli_runner().invoke(
        args=["orgs", "create", "--name", "Initech", "--owner-email", "bill@initech.test"])
    assert result.exit_code == 0, result.output
    key = result.output.strip().splitlines()[-1]
    assert key.startswith("sk_") and " " not in key
    client = client_for(app, key)
    assert [p["name"] for p in client.get("/org/projects").get_json()] == ["Default"]
    me = client.get("/org/api_keys").get_json()[0]
    assert me["created_by"]["email"] == "bill@initech.test"


def test_orgs_init_creates_a_first_org_only_once(app):
    runner = app.test_cli_runner()
    first = runner.invoke(args=["orgs", "init"])
    assert first.output.strip().splitlines()[-1].startswith("sk_")
    second = runner.invoke(args=["orgs", "init"])
    assert "sk_" not in second.output
    with app.app_context(), db.connection_context():
        assert Organization.select().count() == 1


def test_orgs_set_limit(app, owner_key):
    runner = app.test_cli_runner()
    result = runner.invoke(args=["orgs", "set-limit", "--max-concurrent-sessions", "3", "--default-project-cap", "2"])
    assert result.exit_code == 0, result.output
    limits = client_for(app, owner_key.plaintext).get("/org/limits").get_json()
    assert (limits["max_concurrent_sessions"], limits["default_project_max_concurrent_sessions"]) == (3, 2)
    refused = runner.invoke(args=["orgs", "set-limit", "--org", "Acme", "--max-concurrent-sessions", "1"])
    assert refused.exit_code != 0 and "may not exceed" in refused.output
    unknown = runner.invoke(args=["orgs", "set-limit", "--org", "nope", "--max-concurrent-sessions", "1"])
    assert unknown.exit_code != 0


def test_db_upgrade_command(app):
    result = app.test_cli_runner().invoke(args=["db", "upgrade"])
    assert result.exit_code == 0 and "applied 0 migration(s)" in result.output


def test_orgs_issue_key_recovers_access(app, owner_key):
    runner = app.test_cli_runner()
    result = runner.invoke(args=["orgs", "issue-key", "--org", owner_key.org_id])
    assert result.exit_code == 0, result.output
    key = result.output.strip().splitlines()[-1]
    listed = client_for(app, key).get("/org/api_keys?query=command").get_json()
    assert listed[0]["created_by"]["email"] == "owner@acme.test"


def test_orgs_create_validates_its_input(app):
    runner = app.test_cli_runner()
    assert runner.invoke(args=["orgs", "create", "--name", "X", "--owner-email", "not-an-email"]).exit_code != 0
    assert runner.invoke(args=["orgs", "create", "--name", " ", "--owner-email", "a@b.test"]).exit_code != 0


def test_orgs_create_and_init_take_the_same_owner_emails(app):
    """`orgs init` makes owner@localhost; `orgs create` takes such an address too, and both refuse the same ones."""
    runner = app.test_cli_runner()
    for email in ("other@localhost", "ops@acme.example", "a.b+c@mail-1.example.co"):
        created = runner.invoke(args=["orgs", "create", "--name", email, "--owner-email", email])
        assert created.exit_code == 0, created.output
        assert f"owner:        {email}" in created.output
    for email in ("not-an-email", "a@", "@localhost", "a b@localhost", "a@local..host", "a@-localhost", "a@b@c"):
        for command in (["orgs", "create", "--name", "X"], ["orgs", "init"]):
            refused = runner.invoke(args=[*command, "--owner-email", email])
            assert refused.exit_code != 0 and "is not an e-mail address" in refused.output, (command, email)
    with app.app_context(), db.connection_context():
        assert Organization.select().count() == 3


def test_set_limit_with_an_ambiguous_name_asks_for_the_id(app, make_org):
    make_org("Twin", "a@twin.test")
    make_org("Twin", "b@twin.test")
    result = app.test_cli_runner().invoke(args=["orgs", "set-limit", "--org", "Twin", "--max-concurrent-sessions", "2"])
    assert result.exit_code != 0 and "pass the id" in result.output
