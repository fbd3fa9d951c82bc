"""``pipeplan clean``: remove the shared-memory leftovers of local runs whose process is gone.

Usage::

    pipeplan clean [--dry-run]

A local run names every /dev/shm object after its orchestrator's pid (ring and control segments
``pipeplan-<pid>-...``, ring semaphores ``sem.pipeplan-<pid>-...``) and unlinks them when it ends,
including on SIGINT/SIGTERM. After a crash that skipped that (SIGKILL of the whole process group), the
objects stay until reboot: this command removes those whose creator process no longer exists (see
:func:`pipeplan.runtime.shm_ring.orphan_entries`; objects of live runs are never touched), printing one
line per object and a summary. Every local run does the same before creating its rings.
Exit status: 0 (also when there is nothing to remove); 2 when an object cannot be removed
(``error[clean_failed]``).
"""

from __future__ import annotations

import argparse

HELP = "remove shared-memory leftovers (rings, semaphores) of local runs whose process is gone"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register the ``clean`` options on ``p``."""
    p.add_argument("--dry-run", action="store_true", help="list what would be removed, remove nothing")
    p.add_argument("--shm-dir", default=None, help=argparse.SUPPRESS)  # tests: a directory standing for /dev/shm


def main(args: argparse.Namespace) -> int:
    """Run the command. Raises PipeplanError(clean_failed) when an entry cannot be removed."""
    from pipeplan.errors import PipeplanError
    from pipeplan.runtime.shm_ring import SHM_DIR, orphan_entries, remove_orphans

    shm_dir = args.shm_dir or SHM_DIR
    if args.dry_run:
        found = []
        for path in orphan_entries(shm_dir):
            try:
                found.append((path.name, path.stat().st_size))
            except FileNotFoundError:  # removed meanwhile
                continue
        verb = "would remove"
    else:
        try:
            found = remove_orphans(shm_dir)
        except OSError as e:
            raise PipeplanError(f"cannot remove {e.filename or shm_dir}: {e.strerror or e}", code="clean_failed",
                                where=str(e.filename or shm_dir)) from None
        verb = "removed"
    for name, size in found:
        print(f"{verb} {shm_dir}/{name} ({size} bytes)")
    if found:
        print(f"{verb} {len(found)} leftover(s) of dead runs, {sum(s for _, s in found)} bytes")
    else:
        print("nothing to remove: no leftovers of dead runs")
    return 0
