"""A host machine made once per test session: deploy/install-browser-host run with `--root` on an empty folder
(a copy of the checkout at srv/lantern, its venv at srv/lantern/.venv with the host's install alone). About 10 s
with pip's cache warm (the venv, the host's few wheels, setuptools for the build); the tests of what it wrote and
the host started from that venv share it."""
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.live_server import ROOT

EXAMPLE = ["--app-url", "http://10.0.0.5:8000", "--bind", "10.0.0.12:8790", "--advertise", "http://10.0.0.12:8790"]
CREDENTIAL = "lbh_example-credential"


@dataclass
class HostMachine:
    root: Path  # the folder standing for the machine's /
    output: str  # what the installer printed

    @property
    def venv(self):
        return self.root / "srv" / "lantern" / ".venv"


@pytest.fixture(scope="session")
def host_machine(tmp_path_factory):
    root = tmp_path_factory.mktemp("host-machine")
    checkout = root / "srv" / "lantern"
    shutil.copytree(ROOT, checkout, ignore=shutil.ignore_patterns(
        ".git", ".venv", "instance", "__pycache__", "build", "*.egg-info", ".pytest_cache", "tests", "bench"))
    result = subprocess.run([checkout / "deploy" / "install-browser-host", "--root", root, *EXAMPLE],
                            input=CREDENTIAL + "\n", capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return HostMachine(root, result.stdout)
