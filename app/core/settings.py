"""The app's settings (app/config.py), read and checked once when the app is made: `settings().db_pool_size`.

A wrong value stops the start with one line (SettingsError, a SystemExit: `flask`, `python wsgi.py` and gunicorn
print the line, no traceback), naming the setting, where it came from, its value and what it takes:

    Lantern cannot start: DB_POOL_SIZE='many' (from LANTERN_DB_POOL_SIZE): should be a valid integer, ...
"""
import copy
import json
import os

import flask
from flask import current_app
from pydantic import TypeAdapter, ValidationError

from app.config import Settings
from lantern_wire import settings_errors

PREFIX = "LANTERN_"
ATTRIBUTES = {field.alias: name for name, field in Settings.model_fields.items()}  # DB_POOL_SIZE -> db_pool_size
# Settings whose value an error line must not repeat.
SECRETS = {"ENCRYPTION_KEYS"}


class Config(flask.Config):
    """app.config, which refuses to write a Lantern setting (`app.config["DB_POOL_SIZE"] = ...`, update(),
    setdefault(), |=): the code reads settings(), which that would not change. install() writes the checked values
    with dict.update, around this."""

    def __setitem__(self, name, value):
        refuse_settings([name])
        super().__setitem__(name, value)

    def update(self, *mapping, **values):
        values = dict(*mapping, **values)
        refuse_settings(values)
        super().update(values)

    def setdefault(self, name, default=None):
        if name not in self:
            self[name] = default
        return self[name]

    def __ior__(self, values):
        self.update(values)
        return self


def refuse_settings(names):
    for name in names:
        if name in ATTRIBUTES:
            raise TypeError(f"{name} is a setting, read once at start: change it with "
                            f"app.core.settings.change(app, {name}=...)")


def settings(app=None):
    """The app's frozen settings (the current app's unless `app` is given)."""
    return (app or current_app).extensions["settings"]


def init_app(app, overrides=None):
    """Read the settings (defaults, instance/config.py, LANTERN_* variables, `overrides`) into `app`; the names that
    are not Lantern's (Flask's own: TESTING, SECRET_KEY) go to app.config as they are."""
    checked, other = load(app.instance_path, overrides)
    app.config.update(other)
    install(app, checked)


def change(app, **values):
    """Change some settings of a made app (tests: `change(app, BLOB_GRACE_SECONDS=0)`), checked as at start."""
    current = settings(app).model_dump(by_alias=True)
    install(app, validated({**current, **values}, {name: "change()" for name in values}))


def install(app, checked):
    app.extensions["settings"] = checked
    # Flask and its extensions read their own (MAX_CONTENT_LENGTH, API_TITLE...) from app.config.
    dict.update(app.config, checked.model_dump(by_alias=True))


def load(instance_path, overrides=None, environ=None):
    """(Settings, other names) from instance/config.py, then LANTERN_* variables, then `overrides`."""
    instance = flask.Config(instance_path)
    instance.from_pyfile("config.py", silent=True)
    values, origins, other = {}, {}, {}

    def take(layer, origin):
        for name, value in layer.items():
            if name in ATTRIBUTES:
                values[name], origins[name] = value, origin
            else:
                other[name] = value

    take(instance, "instance/config.py")
    from_environment(os.environ if environ is None else environ, values, origins, other)
    take(overrides or {}, "create_app()")
    values["DATABASE_URL"] = values.get("DATABASE_URL") or f"sqlite:///{os.path.join(instance_path, 'lantern.db')}"
    values["BLOB_DIR"] = values.get("BLOB_DIR") or os.path.join(instance_path, "blobs")
    return validated(values, origins), other


def from_environment(environ, values, origins, other):
    """LANTERN_<NAME> variables into `values` (JSON when it parses as what the setting takes, else the text;
    LANTERN_<NAME>__<KEY> sets one key of a setting that is a mapping), as Flask's from_prefixed_env did."""
    for key in sorted(name for name in environ if name.startswith(PREFIX)):
        name, *path = key[len(PREFIX):].split("__")
        if name not in ATTRIBUTES:
            other[key[len(PREFIX):]] = decoded(environ[key])
        elif path:
            base = values.get(name, Settings.model_fields[ATTRIBUTES[name]].default)
            values[name] = nested(copy.deepcopy(base or {}), path, decoded(environ[key]))
            origins[name] = key
        else:
            values[name], origins[name] = typed(name, environ[key]), key


def typed(name, text):
    field = Settings.model_fields[ATTRIBUTES[name]]
    value = None if text == "" else decoded(text)
    # The JSON value when it has the setting's type (a bound aside: SSE_HEARTBEAT_SECONDS=0 is refused as 0) or
    # passes the setting's own validators (LOG_LEVEL=10 is logging.DEBUG).
    for annotation in (field.annotation, field.rebuild_annotation()):
        try:
            TypeAdapter(annotation).validate_python(value)
            return value
        except ValidationError:
            pass
    return text  # checked as text, so a wrong value is named as it was written


def decoded(text):
    try:
        return json.loads(text)
    except ValueError:
        return text


def nested(mapping, path, value):
    inner = mapping
    for key in path[:-1]:
        inner = inner.setdefault(key, {})
    inner[path[-1]] = value
    return mapping


def validated(values, origins):
    return settings_errors.validated(Settings, values, origins, program="Lantern", secrets=SECRETS)
