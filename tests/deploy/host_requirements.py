"""What setup.cfg asks for the browser host (the package alone) and for the app (its `server` extra), and the
distributions those requirements pull in, as installed in this venv (the suite's, at constraints.txt's versions)."""
import configparser
import functools
from importlib import metadata

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.live_server import ROOT


def setup_cfg_requirements(extra=None):
    """install_requires (extra None) or one extra's requirements, as written in setup.cfg."""
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    text = config["options"]["install_requires"] if extra is None else config["options.extras_require"][extra]
    lines = (line.split("#")[0].strip() for line in text.splitlines())
    return [Requirement(line) for line in lines if line]


def names(requirements):
    return {canonicalize_name(requirement.name) for requirement in requirements}


def with_dependencies(requirements):
    """The canonical names of `requirements` and of every distribution they need in turn, as installed here."""
    seen = set()
    pending = [(requirement, ("",)) for requirement in requirements]
    while pending:
        requirement, extras_asked = pending.pop()  # the extras the requiring distribution was installed with
        if requirement.marker and not any(requirement.marker.evaluate({"extra": extra}) for extra in extras_asked):
            continue
        name, extras = canonicalize_name(requirement.name), ("", *sorted(requirement.extras))
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        pending.extend((needed, extras) for needed in map(Requirement, requires_of(name)))
    return {name for name, _ in seen}


@functools.cache
def requires_of(name):
    return tuple(metadata.requires(name) or ())
