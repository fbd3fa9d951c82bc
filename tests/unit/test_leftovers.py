"""Shared-memory naming and leftovers, ``pipeplan clean``, interrupts as exceptions, the liveness limit
(issue 11 items 6 and 11). The end-to-end signal tests are tests/contract/test_signals.py."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import time

import pytest
from pipeplan.runtime.shm_ring import (
    RingSemaphore,
    StageControl,
    orphan_entries,
    read_control,
    remove_orphans,
    segment_prefix,
)
from pipeplan.tools.cli import main


@pytest.fixture(scope="module")
def dead_pid() -> int:
    """The pid of a process that has exited (and was reaped)."""
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


@pytest.fixture
def live_pid():
    p = subprocess.Popen(["sleep", "60"])
    yield p.pid
    p.kill()
    p.wait()


def _fill(d, names):
    for n in names:
        (d / n).write_bytes(b"\0" * 48)


def test_orphans_are_entries_of_dead_creators_only(tmp_path, dead_pid, live_pid):
    """Only regular files named ``pipeplan-<pid>-...`` / ``sem.pipeplan-<pid>-...`` whose pid is gone are orphans:
    never a live process's (another run's, this process's), a foreign name, or a directory."""
    orphans = [f"pipeplan-{dead_pid}-0123456789ab", f"sem.pipeplan-{dead_pid}-0123456789ab",
               f"pipeplan-{dead_pid}-ctl-0123456789ab"]
    kept = [f"pipeplan-{live_pid}-0123456789ab", f"{segment_prefix()}0123456789ab", f"sem.mp-{dead_pid}",
            f"pipeplan-{dead_pid}-XYZ", f"other-{dead_pid}-0123456789ab"]
    _fill(tmp_path, orphans + kept)
    (tmp_path / f"pipeplan-{dead_pid}-00000000ffff").mkdir()
    assert [p.name for p in orphan_entries(tmp_path)] == sorted(orphans)
    removed = remove_orphans(tmp_path)
    assert sorted(n for n, _ in removed) == sorted(orphans) and all(size == 48 for _, size in removed)
    assert sorted(os.listdir(tmp_path)) == sorted(kept + [f"pipeplan-{dead_pid}-00000000ffff"])
    assert orphan_entries(tmp_path / "missing") == []


def test_clean_command_lists_removes_and_reports(tmp_path, capsys, dead_pid):
    """``pipeplan clean --dry-run`` lists the orphans and removes nothing; ``pipeplan clean`` removes them, one
    line each plus a summary; with nothing left it says so. Exit status 0 each time."""
    names = [f"pipeplan-{dead_pid}-aaaaaaaaaaaa", f"sem.pipeplan-{dead_pid}-bbbbbbbbbbbb"]
    _fill(tmp_path, names)
    assert main(["clean", "--dry-run", "--shm-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [f"would remove {tmp_path}/{n} (48 bytes)" for n in sorted(names)] + [
        "would remove 2 leftover(s) of dead runs, 96 bytes"]
    assert sorted(os.listdir(tmp_path)) == sorted(names)
    assert main(["clean", "--shm-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "removed 2 leftover(s) of dead runs, 96 bytes" and len(out) == 3
    assert os.listdir(tmp_path) == []
    assert main(["clean", "--shm-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == "nothing to remove: no leftovers of dead runs"


def test_clean_failure_is_one_typed_line(tmp_path, capsys, dead_pid, monkeypatch):
    """An orphan that cannot be removed is ``error[clean_failed]`` naming it, exit status 2, no traceback.
    (Mocked EACCES: tests run as root, whom permissions do not stop.)"""
    from pathlib import Path

    name = f"pipeplan-{dead_pid}-cccccccccccc"
    _fill(tmp_path, [name])

    def denied(self, missing_ok=False):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "unlink", denied)
    assert main(["clean", "--shm-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error[clean_failed]: cannot remove {tmp_path}/{name}: Permission denied"


def test_ring_semaphores_are_named_after_their_creator_and_unlinked_by_it():
    """A ring semaphore is ``/dev/shm/sem.pipeplan-<pid>-<hex>``; a copy reopened by name shares its count;
    the owner's unlink removes the name (idempotent), a non-owner's does nothing."""
    s = RingSemaphore(1)
    path = f"/dev/shm/sem.{s.name[1:]}"
    try:
        assert s.name.startswith("/" + segment_prefix()) and os.path.exists(path)
        other = pickle.loads(pickle.dumps(s))
        assert not other.owner and other.acquire(False) and not s.acquire(True, 0.01)
        s.release()
        other.unlink()
        assert os.path.exists(path) and other.acquire(True, 0.5)
    finally:
        s.unlink()
        s.unlink()
    assert not os.path.exists(path)


def test_control_block_stop_flag_heartbeats_and_outside_reads():
    """The control block carries the stop flag and per-stage (heartbeat, served frames), seen by a copy
    attached by name and by :func:`read_control` reading the /dev/shm file; its creator unlinks it."""
    c = StageControl(3)
    path = f"/dev/shm/{c.name}"
    try:
        other = pickle.loads(pickle.dumps(c))
        assert c.name.startswith(segment_prefix() + "ctl-") and not other.is_set()
        t0 = time.monotonic_ns()
        other.beat(2, served=7)
        c.set()
        assert other.is_set() and c.last_beat(2) >= t0 and c.last_beat(0) == 0
        snap = read_control(path)
        assert snap["stop"] is True and snap["served"] == [0, 0, 7] and snap["beats"][2] == c.last_beat(2)
        other.close()
        assert not other.is_set()
    finally:
        c.unlink()
    assert not os.path.exists(path)


def test_sigterm_and_sigint_raise_interrupted_then_handlers_are_restored():
    """Under interrupts_raise SIGTERM and SIGINT raise Interrupted (exit status 143 / 130); the first signal
    disarms the handlers (a second one during cleanup is ignored); on leaving, the old handlers are back."""
    from pipeplan.runtime.interrupts import Interrupted, interrupts_raise

    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for sig, status in ((signal.SIGTERM, 143), (signal.SIGINT, 130)):
        with pytest.raises(Interrupted) as e, interrupts_raise():
            try:
                os.kill(os.getpid(), sig)
                time.sleep(5)  # interrupted at once
            finally:
                os.kill(os.getpid(), signal.SIGTERM)  # ignored: cleanup is not cut short
                time.sleep(0.01)
        assert e.value.signum == sig and e.value.exit_status == status
        assert {s: signal.getsignal(s) for s in before} == before


def test_interrupted_command_prints_one_line_and_exits_128_plus_signal(capsys):
    """A command main wrapped by exits_on_interrupt prints one ``error[interrupted]`` line naming the signal."""
    from pipeplan.runtime.interrupts import exits_on_interrupt

    @exits_on_interrupt
    def command(sig):
        os.kill(os.getpid(), sig)
        time.sleep(5)
        return 0

    assert command(signal.SIGTERM) == 143
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error[interrupted]: interrupted by SIGTERM")
    assert command(signal.SIGINT) == 130


def test_interrupt_wrapped_by_a_library_is_still_one_line(capsys):
    """A signal that lands inside code which wraps what it catches (SIGTERM during an import raised
    ``RuntimeError`` from ``Interrupted``: a CI flake printed a traceback) is still one ``error[interrupted]``
    line and 128 + signal; an unrelated exception still propagates."""
    from pipeplan.runtime.interrupts import exits_on_interrupt

    @exits_on_interrupt
    def command(sig):
        try:
            os.kill(os.getpid(), sig)
            time.sleep(5)
        except KeyboardInterrupt as e:
            raise RuntimeError("class creation failed") from e
        return 0

    @exits_on_interrupt
    def failing():
        try:
            raise ValueError("not a signal")
        except ValueError as e:
            raise RuntimeError("wrapped") from e

    assert command(signal.SIGTERM) == 143
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("error[interrupted]: interrupted by SIGTERM")
    with pytest.raises(RuntimeError, match="wrapped"):
        failing()


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon"])
def test_bad_liveness_limit_is_a_typed_error(monkeypatch, value):
    """$PIPEPLAN_LIVENESS_S (or liveness_s) must be a finite number of seconds > 0: anything else is
    RunRequestError(invalid_request) naming the variable, before any stage starts."""
    from pipeplan.errors import PipeplanError
    from pipeplan.runtime.orchestrator import DEFAULT_LIVENESS_S, liveness_limit

    monkeypatch.setenv("PIPEPLAN_LIVENESS_S", value)
    with pytest.raises(PipeplanError) as e:
        liveness_limit()
    assert e.value.code == "invalid_request" and "PIPEPLAN_LIVENESS_S" in e.value.message
    assert liveness_limit(2.5) == 2.5
    monkeypatch.setenv("PIPEPLAN_LIVENESS_S", "")
    assert liveness_limit() == DEFAULT_LIVENESS_S


def test_failed_command_stops_the_stage_host_it_started(tmp_path):
    """``pipeplan run`` starts the stage host first thing; when the command then fails (here: a missing
    model, exit 2) it stops that host again instead of leaving it to finish importing torch."""
    import sys
    import textwrap

    script = textwrap.dedent(f"""
        from pipeplan.runtime.stage_host import stage_host_pid
        from pipeplan.tools.cli import main
        rc = main(["run", {str(tmp_path / "missing.gguf")!r}, "--prompt", "hi"])
        print(rc, stage_host_pid())
    """)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PIPEPLAN_CACHE=str(tmp_path)))
    assert p.stdout.split() == ["2", "None"], p.stderr
    assert p.stderr.startswith("error[") and len(p.stderr.strip().splitlines()) == 1


def test_interrupts_deferred_keeps_the_command_handlers():
    """Interrupts around a start-up that must not be cut in half (``ray.init``): a SIGTERM inside the block is
    held until it ends; the handlers in place before come back even though the block installed its own (as
    Ray installs a SIGTERM handler that exits without cleanup), and the held signal then reaches them."""
    import os
    import signal

    from pipeplan.runtime.interrupts import Interrupted, interrupts_deferred, interrupts_raise

    def foreign(signum, frame):  # what ray.init installs
        raise AssertionError("the block's own handler ran")

    reached = []
    with interrupts_raise():
        mine = signal.getsignal(signal.SIGTERM)
        with pytest.raises(Interrupted) as e:
            with interrupts_deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                reached.append("after the signal")
                signal.signal(signal.SIGTERM, foreign)
        assert e.value.signum == signal.SIGTERM and reached == ["after the signal"]
    with interrupts_raise():
        with interrupts_deferred():
            signal.signal(signal.SIGTERM, foreign)
        assert signal.getsignal(signal.SIGTERM) is not foreign  # nothing held: handlers back, nothing raised
    assert mine is not foreign
