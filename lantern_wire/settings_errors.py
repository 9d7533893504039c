"""The one line a program stops with when its settings cannot be used, for the app (app/core/settings.py) and the
browser host (browserhost/settings.py) alike: each wrong setting, where it was set, its value and what it takes.

    Lantern cannot start: DB_POOL_SIZE='many' (from LANTERN_DB_POOL_SIZE): should be a valid integer, ...
"""
import re

from pydantic import ValidationError


class SettingsError(SystemExit):
    """Settings a program cannot start with; the message is one line, all that the stopping program prints (a
    SystemExit: `flask`, `python wsgi.py`, gunicorn and `python -m browserhost` show no traceback)."""


def validated(model, values, origins, *, program, secrets=()):
    """`model` made from `values` (settings by name), else SettingsError naming each wrong one; `origins` says
    where each was set, and the values of `secrets` are never repeated."""
    try:
        return model.model_validate(values)
    except ValidationError as error:
        raise SettingsError(describe(error, values, origins, program=program, secrets=secrets)) from None


def describe(error, values, origins, *, program, secrets=()):
    """One line naming each wrong setting, where it was set, its value and what it takes."""
    problems = {}
    for item in error.errors(include_url=False):
        name = str(item["loc"][0]) if item["loc"] else None
        if name in problems:
            continue  # one reason per setting (a union tries several)
        takes = re.sub(r"^(Input |Value error, |Value )", "", item["msg"])
        if name is None:  # a check of several settings together names them itself
            problems[name] = takes
            continue
        where = "".join(f"[{key!r}]" for key in item["loc"][1:])  # a key of a mapping
        shown = "(hidden)" if name in secrets else hide_password(repr(values.get(name)))
        problems[name] = f"{name}{where}={shown} (from {origins.get(name, 'the default')}): {takes}"
    return f"{program} cannot start: " + "; ".join(problems.values())


def hide_password(text):
    """`text` with the password of any URL in it (scheme://user:password@) as ***."""
    return re.sub(r"(://[^:/@\s]*:)[^@\s]*@", r"\1***@", text)
