"""Cleanup of Ray channel semaphores an embedded Ray instance leaves in /dev/shm (issue 14 item 3)."""

from __future__ import annotations

import _multiprocessing
import os
import subprocess
import sys

import pytest
from pipeplan.runtime.ray_backend import unlink_channel_semaphores
from pipeplan.runtime.shm_ring import SHM_DIR

pytestmark = pytest.mark.skipif(not os.path.isdir(SHM_DIR), reason="named semaphores are not files here")


def _sem(name: str) -> None:
    _multiprocessing.SemLock(1, 1, 1, "/" + name, False)  # kind SEMAPHORE, value 1, kept after this handle


def test_only_the_semaphores_of_exited_raylets_are_unlinked():
    """A raylet that has exited (here: a finished child's pid) has its ``hdr<pid>-<n>`` / ``obj<pid>-<n>``
    semaphores unlinked; those of a running process (this one), and names that only look alike
    (``hdr<pid>x-1``, ``hdr<pid>1-1``: another pid), are kept."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True).stdout.strip()
    live = str(os.getpid())
    mine = [f"hdr{dead}-17", f"obj{dead}-17", f"hdr{dead}-42"]
    kept = [f"hdr{live}-17", f"obj{live}-17", f"hdr{dead}x-1", f"hdr{dead}1-1"]
    for n in mine + kept:
        _sem(n)
    try:
        assert unlink_channel_semaphores([int(dead), int(live)], wait_s=0.2) == len(mine)
        left = set(os.listdir(SHM_DIR))
        assert not any(f"sem.{n}" in left for n in mine)
        assert all(f"sem.{n}" in left for n in kept)
        assert unlink_channel_semaphores([], wait_s=0.2) == 0
    finally:
        for n in mine + kept:
            try:
                _multiprocessing.sem_unlink("/" + n)
            except OSError:
                pass
