"""The agent runs with the system's Python inside the sandbox, where the host's virtualenv is not: every module
of browserhost/agent imports only the standard library and its own package (relatively), and imports under
`/usr/bin/python3 -I -S` as package `agent`."""
import ast
import subprocess
import sys

import pytest

from tests.browserhost.agent.conftest import AGENT_PACKAGE, SYSTEM_PYTHON

MODULES = sorted(path for path in AGENT_PACKAGE.glob("*.py"))


def imported_names(source: str) -> list[tuple[str, int]]:
    """(top-level module name, relative level) of every import of a module."""
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [(alias.name.split(".")[0], 0) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names.append(((node.module or "").split(".")[0], node.level))
    return names


@pytest.mark.parametrize("module", MODULES, ids=lambda path: path.name)
def test_imports_are_standard_library_or_relative(module):
    outside = [name for name, level in imported_names(module.read_text()) if level == 0
               and name not in sys.stdlib_module_names]
    assert outside == [], f"{module.name} imports {outside}"


def test_the_checker_sees_a_third_party_import():
    assert imported_names("import peewee\nfrom .http import x\nfrom os import path") == [
        ("peewee", 0), ("http", 1), ("os", 0)]


def test_every_module_imports_with_the_system_python(tmp_path):
    (tmp_path / "agent").symlink_to(AGENT_PACKAGE)
    names = [f"agent.{path.stem}" for path in MODULES if path.stem != "__main__"] + ["agent.__main__"]
    code = f"import sys, importlib; sys.path.insert(0, {str(tmp_path)!r})\nfor name in {names!r}: " \
           "importlib.import_module(name)"
    done = subprocess.run([SYSTEM_PYTHON, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
