"""Lantern: the application factory reads as the table of contents."""
import inspect
import os

from flask import Flask

from app import streams
from app.core import api as core_api
from app.core import blobs, crypto, db, docs, errors, jsonprovider, periodic, requestlog, settings
from app.orgs import auth


class Lantern(Flask):
    json_provider_class = jsonprovider.JsonProvider
    config_class = settings.Config

    def ensure_sync(self, func):
        # Flask asks inspect whether each handler is a coroutine function, seven times a
        # request; a plain function's code says so in one flag.
        code = getattr(getattr(func, "__func__", func), "__code__", None)
        if code is not None and not code.co_flags & inspect.CO_COROUTINE:
            return func
        return super().ensure_sync(func)


def create_app(test_config=None):
    app = Lantern(__name__, instance_relative_config=True, static_folder=None)
    os.makedirs(app.instance_path, exist_ok=True)
    settings.init_app(app, test_config)

    db.init_app(app)
    crypto.init_app(app)
    blobs.init_app(app)
    streams.init_app(app)
    requestlog.init_app(app)
    auth.init_app(app)
    api = core_api.Api(app)
    register_blueprints(api)
    register_internal_blueprints(app)
    docs.init_app(app)
    errors.register_error_handlers(app)
    register_commands(app)
    register_periodic_tasks(app)
    return app


def register_blueprints(api):
    from app.auth_connections.hosted import blp as hosted_blp
    from app.auth_connections.views import blp as auth_connections_blp
    from app.browsers.computer_views import blp as computer_blp
    from app.browsers.fs_views import blp as fs_blp
    from app.browsers.invocation_views import blp as invocation_browsers_blp
    from app.browsers.process_views import blp as process_blp
    from app.browsers.views import blp as browsers_blp
    from app.core.home import blp as home_blp
    from app.credentials.views import credentials_blp, providers_blp
    from app.extensions.views import blp as extensions_blp
    from app.invocations.views import blp as invocations_blp
    from app.orgs.project_views import legacy_blp, projects_blp
    from app.orgs.views import api_keys_blp, org_limits_blp
    from app.profiles.views import blp as profiles_blp

    for blueprint in (home_blp, api_keys_blp, projects_blp, legacy_blp, org_limits_blp, providers_blp, credentials_blp,
                      profiles_blp, extensions_blp, invocations_blp, invocation_browsers_blp, browsers_blp,
                      computer_blp, fs_blp, process_blp, auth_connections_blp, hosted_blp):
        api.register_blueprint(blueprint)


def register_internal_blueprints(app):
    """Routes outside the public API and its OpenAPI document."""
    from app.browsers.host_api import blp as host_api_blp

    app.register_blueprint(host_api_blp)


def register_periodic_tasks(app):
    """What each worker does on a timer (wsgi.py starts the loop), by the setting of its interval (0 or None: never)."""
    from app.auth_connections.health import run_due_checks
    from app.browsers.lifecycle import end_idle_sessions
    from app.browsers.lost_hosts import end_sessions_of_lost_hosts
    from app.browsers.telemetry import prune_archive

    periodic.init_app(app, [("browser_idle_sweep_seconds", end_idle_sessions),
                            ("telemetry_prune_interval_seconds", prune_archive),
                            ("browser_host_heartbeat_seconds", end_sessions_of_lost_hosts),
                            ("auth_health_check_poll_seconds", run_due_checks)])


def register_commands(app):
    from app.auth_connections.cli import auth_cli
    from app.browsers.cli import browsers_cli
    from app.core.cli import blobs_cli, db_cli, secrets_cli
    from app.orgs.cli import orgs_cli

    app.cli.add_command(db_cli)
    app.cli.add_command(secrets_cli)
    app.cli.add_command(blobs_cli)
    app.cli.add_command(orgs_cli)
    app.cli.add_command(browsers_cli)
    app.cli.add_command(auth_cli)
