"""deploy/install-browser-host, the host recipe of docs/operations.md, run on an empty folder (`--root`): a copy of
the checkout at srv/lantern, what it writes compared with the docs, and the host it installs able to start
with nothing of the app's dependencies. The steps that change the machine itself (packages, the sandbox user,
systemctl) are printed, not run."""
import re
import shutil
import stat
import subprocess
import sys

import pytest
from packaging.utils import canonicalize_name

from tests.deploy.conftest import CREDENTIAL, EXAMPLE
from tests.deploy.host_requirements import names, setup_cfg_requirements, with_dependencies
from tests.live_server import ROOT

DOCS = (ROOT / "docs" / "operations.md").read_text()
UNIT = "etc/systemd/system/lantern-browser-host.service"


@pytest.fixture
def installed(host_machine):
    return host_machine.root, host_machine.output


def docs_block(language, after):
    return re.search(rf"{re.escape(after)}.*?```{language}\n(.*?)```", DOCS, flags=re.S).group(1)


def test_it_writes_the_docs_unit_with_the_folders_systemd_makes_and_the_network_it_waits_for(installed):
    root, _ = installed
    unit = (root / UNIT).read_text()
    assert unit == docs_block("ini", "## Browser hosts on other machines")
    assert "\nStateDirectory=lantern\nWorkingDirectory=/var/lib/lantern\n" in unit
    assert "\nWants=network-online.target\nAfter=network-online.target\n" in unit


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_systemd_takes_the_unit_as_it_is(installed, tmp_path):
    root, _ = installed
    # The unit's own paths, moved into the folder the installer wrote to: systemd checks ExecStart's program.
    unit = tmp_path / "lantern-browser-host.service"
    unit.write_text((root / UNIT).read_text().replace("/srv/lantern/", f"{root}/srv/lantern/"))
    verified = subprocess.run(["systemd-analyze", "verify", unit], capture_output=True, text=True, timeout=60)
    assert verified.returncode == 0 and verified.stderr == "", verified.stderr  # no unknown key, no warning


def test_the_credential_is_roots_alone_in_a_folder_the_installer_made(installed):
    root, _ = installed
    folder, credential = root / "etc" / "lantern", root / "etc" / "lantern" / "browser-host.credential"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(credential.stat().st_mode) == 0o600
    assert credential.read_text() == CREDENTIAL + "\n"


def test_the_host_installed_runs_without_the_apps_dependencies(installed):
    root, _ = installed
    venv = root / "srv" / "lantern" / ".venv"
    packages = subprocess.run([venv / "bin" / "python", "-m", "pip", "list", "--format=freeze"],
                              capture_output=True, text=True, timeout=60, check=True).stdout
    installed = {canonicalize_name(line.split("==")[0]) for line in packages.split()} - {"pip", "setuptools"}
    # The package and what setup.cfg's install_requires pull in, nothing else: no package of the app's extra.
    assert installed == {"lantern", *with_dependencies(setup_cfg_requirements())}, installed
    assert not installed & names(setup_cfg_requirements("server")) and "flask" not in installed
    # Its --help imports the whole host (browserhost.server and what it uses).
    helped = subprocess.run([venv / "bin" / "lantern-browser-host", "--help"], capture_output=True, text=True,
                            timeout=60, cwd=root)
    assert helped.returncode == 0 and "--advertise" in helped.stdout, helped.stderr


def test_the_docs_install_the_host_as_the_installer_does():
    script = (ROOT / "deploy" / "install-browser-host").read_text()
    step = script[script.index('echo "3/5'):script.index('echo "4/5')].splitlines()[1:]
    # The installer's commands with its variables as the docs' example has them, quiet flags aside.
    commands = [line.replace('"', "").replace("$root", "").replace("$venv", "/srv/lantern/.venv")
                .replace("$checkout", "/srv/lantern").replace(" -q --disable-pip-version-check", "")
                for line in step if line and not line.startswith("#") and "--help" not in line]
    documented = docs_block("sh", "3. The host in a virtualenv").splitlines()
    assert commands == [line.strip() for line in documented if line.strip()]
    assert "server" not in commands[-1] and "--no-deps" not in commands[-1]


def test_only_the_machines_own_steps_are_left_out_and_the_packages_are_the_docs_and_the_makefiles(installed):
    root, output = installed
    skipped = [line.removeprefix("skipped (--root): ") for line in output.splitlines() if line.startswith("skipped")]
    apt = next(line for line in skipped if line.startswith("apt-get install"))
    assert [line for line in skipped if line.startswith("systemctl")] == [
        "systemctl daemon-reload", "systemctl enable lantern-browser-host.service",
        "systemctl restart lantern-browser-host.service"]
    packages = apt.removeprefix("apt-get install -y -q ").split()
    docs = docs_block("sh", "1. Debian's packages").strip().removeprefix("apt-get install ").split()
    makefile = re.search(r"^BROWSER_PACKAGES := (.*?[^\\])$", (ROOT / "Makefile").read_text(), flags=re.M | re.S)
    # The Makefile's list has nginx too, which only the tests use.
    assert packages == docs == [p for p in makefile.group(1).replace("\\\n", " ").split() if p != "nginx"]
    assert not any(root.glob("var/*")), "systemd makes /var/lib/lantern (StateDirectory=), not the installer"


def test_it_refuses_to_run_without_a_credential(tmp_path):
    result = subprocess.run([ROOT / "deploy" / "install-browser-host", "--root", tmp_path, *EXAMPLE], input="",
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and "no credential" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_it_needs_root_to_change_the_machine():
    if sys.platform != "linux":
        pytest.skip("Linux only")
    result = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                             ROOT / "deploy" / "install-browser-host", *EXAMPLE], input=CREDENTIAL,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "run it as root" in result.stderr, result.stderr
