"""browserhost/ and lantern_wire/ import nothing of the app's (#36): every module of both, imported in a fresh
interpreter, brings in the standard library and the distributions setup.cfg's install_requires pull in, never
`app` or a package of the `server` extra; so the host's install alone (the package without the extra) runs every
module, not only those `lantern-browser-host` starts with."""
import json
import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

from packaging.utils import canonicalize_name

from tests.deploy.host_requirements import names, setup_cfg_requirements, with_dependencies
from tests.live_server import ROOT

# Imports every module of both packages; prints the top-level names each brought in (beside the interpreter's own)
# and where each name's module lies (None: built in).
IMPORT_ALL = """
import importlib, json, pkgutil, sys
before = set(sys.modules)
imported = {}
for package in ("browserhost", "lantern_wire"):
    for module in [package, *(m.name for m in pkgutil.walk_packages(importlib.import_module(package).__path__,
                                                                      package + "."))]:
        importlib.import_module(module)
        imported[module] = sorted({name.split(".")[0] for name in set(sys.modules) - before})
files = {name: getattr(sys.modules[name], "__file__", None) for names in imported.values() for name in names}
print(json.dumps({"imported": imported, "files": files}))
"""


def imported_by_each_module():
    # -I: no PYTHON* variables, no user site; the checkout is on the path as the folder run from.
    result = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
                             + IMPORT_ALL], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def in_the_stdlib(name, file):
    if name in sys.stdlib_module_names or file is None:  # None: built in
        return True
    # Also the interpreter's modules that list omits (_sysconfigdata_*); a venv's platstdlib holds site-packages.
    path = Path(file)
    return path.is_relative_to(sysconfig.get_path("stdlib")) and not {"site-packages", "dist-packages"} & {*path.parts}


def distributions_of(top_level_names, files):
    """{top-level module: canonical names of the distributions installing it} for modules outside the stdlib."""
    installed_by = metadata.packages_distributions()
    return {name: {canonicalize_name(dist) for dist in installed_by.get(name, ["?"])} for name in top_level_names
            if not in_the_stdlib(name, files[name])}


def test_the_host_and_the_wire_import_only_the_hosts_dependencies():
    found = imported_by_each_module()
    imported, files = found["imported"], found["files"]
    assert "browserhost.__main__" in imported and "lantern_wire.hosts" in imported  # it walked both packages
    allowed = with_dependencies(setup_cfg_requirements()) | {"lantern"}
    server = names(setup_cfg_requirements("server")) - allowed  # werkzeug, for one, is both's
    assert server >= {"flask", "peewee", "gevent", "psycopg"}
    wrong = {}
    for module, top_level_names in imported.items():
        assert "app" not in top_level_names, f"{module} imports the app"
        outside = {name: dists for name, dists in distributions_of(top_level_names, files).items()
                   if name not in ("browserhost", "lantern_wire") and not dists <= allowed}
        if outside:
            wrong[module] = outside
    assert wrong == {}, f"modules importing what the host's install lacks: {wrong}"
