"""A host's folder belongs to one running host (#34 item 15): the lock names its holder and dies with it."""
import os
import signal
import subprocess
import sys

import pytest

from browserhost import host_folder
from tests.live_server import ROOT

HOLDER = "import sys, time; from browserhost import host_folder; host_folder.hold(sys.argv[1]); print('held', " \
         "flush=True); time.sleep(60)"


def test_a_folder_held_by_a_running_host_is_refused_naming_it_and_free_once_it_is_killed(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "local")], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(host_folder.FolderInUse) as refused:
            host_folder.hold(tmp_path / "local")
        assert refused.value.pid == holder.pid
        os.close(host_folder.hold(tmp_path / "other"))  # another host's folder in the same BROWSER_HOST_DIR
    finally:
        holder.send_signal(signal.SIGKILL)  # the kernel lets go of the lock however the holder ends
        holder.wait()
        holder.stdout.close()
    descriptor = host_folder.hold(tmp_path / "local")
    try:
        assert (tmp_path / "local" / host_folder.LOCK_FILE).read_text().strip() == str(os.getpid())
    finally:
        os.close(descriptor)


def test_a_credential_is_held_once_in_a_lock_named_by_its_hash_never_by_itself(tmp_path):
    descriptor = host_folder.hold_credential(tmp_path, "lbh_secret")
    try:
        with pytest.raises(host_folder.FolderInUse) as refused:
            host_folder.hold_credential(tmp_path, "lbh_secret")
        assert refused.value.pid == os.getpid() and refused.value.lock.parent == tmp_path
        assert [path.name for path in tmp_path.iterdir()] == [refused.value.lock.name]
        assert "secret" not in refused.value.lock.name
        os.close(host_folder.hold_credential(tmp_path, "lbh_other"))  # another host's, in the same BROWSER_HOST_DIR
    finally:
        os.close(descriptor)
