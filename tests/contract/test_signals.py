"""Signals, leftovers and liveness of ``pipeplan run --backend local`` (issue 11 items 6 and 11).

Each test runs the real command as a subprocess in its own session (process group) and waits for a
readiness marker instead of sleeping: the run's control block (``/dev/shm/pipeplan-<pid>-ctl-<hex>``,
:func:`pipeplan.runtime.shm_ring.read_control`) shows the last stage has served 3 DATA frames, i.e. the
first token was sampled and decoding is under way. The run asks for far more tokens than it can make
before the signal lands. Every wait is bounded.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from pipeplan.errors import StageFault
from pipeplan.runtime.shm_ring import SHM_DIR, read_control

from tests.conftest import REPO, STORIES

MAX_SEQ_LEN = 1024
MAX_TOKENS = 1000  # stories260K greedy makes 1000 tokens without EOS: seconds of decoding after the marker
START_S = 180.0  # bound on reaching the marker (a cold package compile on a busy 2-core host included)


def _cmd(*argv: str) -> list[str]:
    exe = REPO / ".venv" / "bin" / "pipeplan"
    return [str(exe), *argv] if exe.exists() else [sys.executable, "-m", "pipeplan.tools.cli", *argv]


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """A package cache for this module, with the 3-stage package compiled once."""
    d = tmp_path_factory.mktemp("signals-cache")
    p = subprocess.run(_run_argv(1), capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, PIPEPLAN_CACHE=str(d)))
    assert p.returncode == 0, p.stderr
    return d


def _run_argv(max_tokens: int = MAX_TOKENS) -> list[str]:
    return _cmd("run", str(STORIES), "--prompt", "Once upon a time", "--stages", "3", "--backend", "local",
                "--max-tokens", str(max_tokens), "--max-seq-len", str(MAX_SEQ_LEN))


def _entries(pid: int) -> set[str]:
    """The /dev/shm entries named after orchestrator ``pid`` (segments and semaphores)."""
    return {n for n in os.listdir(SHM_DIR) if n.startswith((f"pipeplan-{pid}-", f"sem.pipeplan-{pid}-"))}


def _mapped_shm(pids: set[int]) -> set[str]:
    """Every /dev/shm file mapped by ``pids`` (whatever its name): nothing of the run can hide from this."""
    out = set()
    for pid in pids:
        try:
            maps = Path(f"/proc/{pid}/maps").read_text()
        except OSError:
            continue
        for line in maps.splitlines():
            path = line.split(None, 5)[5] if len(line.split(None, 5)) == 6 else ""
            if path.startswith(str(SHM_DIR) + "/") and not path.endswith("(deleted)"):
                out.add(path[len(str(SHM_DIR)) + 1:])
    return out


def _state(pid: int) -> str | None:
    """The /proc state letter of ``pid``; None when it no longer exists."""
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return None


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                ppid = int(Path(f"/proc/{d}/stat").read_bytes().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d))
    out, todo = set(), [root]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def _alive(pids: set[int]) -> set[int]:
    return {p for p in pids if _state(p) not in (None, "Z", "X")}


def _wait_gone(pids: set[int], bound_s: float = 30.0) -> set[int]:
    end = time.monotonic() + bound_s
    while _alive(pids) and time.monotonic() < end:
        time.sleep(0.02)
    return _alive(pids)


def _launch(cache: Path, tmp_path: Path, **env: str) -> tuple[subprocess.Popen, Path, Path]:
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    proc = subprocess.Popen(_run_argv(), stdout=out.open("wb"), stderr=err.open("wb"), start_new_session=True,
                            env=dict(os.environ, PIPEPLAN_CACHE=str(cache), **env))
    return proc, out, err


def _wait_decoding(proc: subprocess.Popen, err: Path) -> set[int]:
    """Wait (bounded) until the last stage served 3 frames; returns the run's processes at that moment."""
    end = time.monotonic() + START_S
    while time.monotonic() < end:
        assert proc.poll() is None, f"the run ended before decoding was under way: {err.read_text()}"
        for name in [n for n in _entries(proc.pid) if "-ctl-" in n]:
            try:
                served = read_control(SHM_DIR / name)["served"]
            except (OSError, ValueError):
                continue
            if isinstance(served, list) and len(served) == 3 and served[-1] >= 3:
                return _descendants(proc.pid)
        time.sleep(0.01)
    proc.kill()
    raise AssertionError(f"no decoding within {START_S} s: {err.read_text()}")


@pytest.mark.parametrize(("sig", "status", "group"), [(signal.SIGTERM, 143, False), (signal.SIGINT, 130, False),
                                                      (signal.SIGINT, 130, True)],
                         ids=["sigterm", "sigint", "sigint-to-group"])
def test_signal_mid_generation_stops_everything(cache, tmp_path, sig, status, group):
    """SIGTERM / SIGINT (to the command, or Ctrl-C style to its whole process group) mid-generation on
    ``--backend local --stages 3``: exit status 143 / 130 and exactly one ``error[interrupted]`` line on
    stderr, no traceback and no resource-tracker "leaked" warning; afterwards no stage process (nor stage
    host or resource tracker) is alive and no /dev/shm entry of the run exists (by name, and every file the
    run's processes had mapped)."""
    proc, _, err = _launch(cache, tmp_path)
    try:
        procs = _wait_decoding(proc, err)
        entries = _entries(proc.pid)
        mapped = _mapped_shm(procs | {proc.pid})
        assert len(procs) >= 5 and len([e for e in entries if e.startswith("sem.")]) == 8  # 3 stages, 4 rings
        (os.killpg if group else os.kill)(proc.pid, sig)
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    text = err.read_text()
    assert rc == status, text
    lines = text.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error[interrupted]: ") and signal.Signals(sig).name in lines[0]
    assert "leaked" not in text and "Traceback" not in text
    assert _wait_gone(procs) == set()
    assert mapped >= entries - {e for e in entries if e.startswith("sem.")}
    left = set(os.listdir(SHM_DIR))
    assert not (entries | mapped) & left


def test_sigkill_of_the_group_leaves_orphans_that_clean_removes(cache, tmp_path):
    """After SIGKILL of the whole process group (resource tracker included, so nothing cleans up), the run's
    segments and semaphores stay in /dev/shm; ``pipeplan clean --dry-run`` lists them, ``pipeplan clean``
    removes exactly them (one line each, then a summary) and a second ``clean`` finds nothing. (On a shared
    machine another pipeplan run may remove a leftover first: an entry is then either reported or gone.)"""
    proc, _, err = _launch(cache, tmp_path)
    try:
        procs = _wait_decoding(proc, err)
        entries = _entries(proc.pid)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        present = entries & set(os.listdir(SHM_DIR))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert len(entries) == 13 and present == entries  # 4 rings + 8 semaphores + the control block stay behind
    assert _wait_gone(procs) == set()

    def reported_or_gone(out: str, verb: str) -> bool:
        left = set(os.listdir(SHM_DIR))
        return all(f"{verb} {SHM_DIR}/{e} (" in out or e not in left for e in entries)

    dry = subprocess.run(_cmd("clean", "--dry-run"), capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0 and reported_or_gone(dry.stdout, "would remove")
    done = subprocess.run(_cmd("clean"), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert reported_or_gone(done.stdout, "removed") and "of dead runs" in done.stdout.splitlines()[-1]
    assert not entries & set(os.listdir(SHM_DIR))
    again = subprocess.run(_cmd("clean"), capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and all(e not in again.stdout for e in entries)


def test_next_local_run_removes_orphans_of_dead_runs(tmp_path):
    """A local run first removes /dev/shm entries named after a process that no longer exists (as a SIGKILLed
    run leaves them), and never those of a live process (this one's, or a sleeping child's)."""
    from pipeplan.runtime.backends import LocalBackend
    from pipeplan.runtime.orchestrator import Pipeline

    from tests.unit.test_shm_ring import _provisions

    dead = subprocess.Popen(["true"])
    dead.wait()
    live = subprocess.Popen(["sleep", "60"])
    names = [f"pipeplan-{dead.pid}-0123456789ab", f"sem.pipeplan-{dead.pid}-ba9876543210",
             f"pipeplan-{dead.pid}-ctl-00aa11bb22cc", f"pipeplan-{live.pid}-0123456789ab"]
    try:
        b = LocalBackend()  # starts the stage host: the fakes below live for a moment only before start()
        pipe = Pipeline(_provisions(1), backend=b)
        for n in names:
            (SHM_DIR / n).write_bytes(b"\0" * 64)
        with pipe:
            out, _ = pipe.generate_ids([1, 403, 407], 2)
        assert len(out) == 2
        assert sorted(n for n, _ in b.removed_orphans if str(dead.pid) in n) == sorted(names[:3])
        left = set(os.listdir(SHM_DIR))
        assert not set(names[:3]) & left and names[3] in left
    finally:
        live.kill()
        live.wait()
        for n in names:
            (SHM_DIR / n).unlink(missing_ok=True)


def test_sigstopped_stage_is_a_runtime_fault_within_the_liveness_limit():
    """Issue 11: a stage process stopped with SIGSTOP mid-generation (alive, not exiting) makes the run a
    ``StageFault(runtime)`` naming that stage within the liveness limit (1 s here) plus polling, instead of a
    wait forever; the stopped process is killed and the run's /dev/shm entries are unlinked."""
    from pipeplan.runtime.orchestrator import Pipeline

    from tests.unit.test_shm_ring import _provisions

    ps = _provisions(3)
    pipe = Pipeline(ps, backend="local", liveness_s=1.0)
    pipe.start()
    stopped_at: list[float] = []
    try:
        victim = pipe.backend.pids[1]
        entries = set(pipe.backend.shm_entries())

        def stop():
            stopped_at.append(time.monotonic())
            os.kill(victim, signal.SIGSTOP)

        timer = threading.Timer(0.05, stop)
        timer.start()
        with pytest.raises(StageFault) as e:
            for _ in range(400):  # keeps generating until the stop lands
                pipe.generate_ids([1, 403, 407, 261, 378], 50)
        timer.join()
        took = time.monotonic() - stopped_at[0]
        assert 1.0 <= took < 1.0 + 4.0, took
        assert (e.value.kind, e.value.stage) == ("runtime", 1)
        assert "no heartbeat" in e.value.detail and "stopped" in e.value.detail and str(victim) in e.value.detail
    finally:
        pipe.close()
    assert _state(victim) in (None, "Z", "X")
    assert not entries & set(os.listdir(SHM_DIR))


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_sigterm_during_start_up_stops_the_stage_host_too(cache, tmp_path):
    """SIGTERM as soon as the stage host (forkserver) is started, while the command plans, loads its package
    or waits for the host's imports: exit status 143, one ``error[interrupted]`` line, and the host, the
    resource tracker and any stage are gone at once (nothing keeps importing after the command ended)."""
    proc, _, err = _launch(cache, tmp_path)
    try:
        end = time.monotonic() + START_S
        while not any("forkserver" in _cmdline(c) for c in _descendants(proc.pid)):
            assert proc.poll() is None and time.monotonic() < end, err.read_text()
            time.sleep(0.005)
        procs = _descendants(proc.pid)
        os.kill(proc.pid, signal.SIGTERM)
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    text = err.read_text()
    assert rc == 143 and text.startswith("error[interrupted]: ") and len(text.strip().splitlines()) == 1, text
    assert _wait_gone(procs | _descendants(proc.pid), 5.0) == set()
    assert not _entries(proc.pid)


def test_stage_fault_exit_leaves_nothing_and_warns_nothing(cache, tmp_path):
    """A run whose stage faults (injected download failure of stage 2) prints one
    ``error[stage_fault:download]`` line, exits 3, leaves no /dev/shm entry and no resource-tracker warning."""
    p = subprocess.Popen(_run_argv(4) + ["--inject-fault", "2:download"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=dict(os.environ, PIPEPLAN_CACHE=str(cache)))
    _, err = p.communicate(timeout=300)
    assert p.returncode == 3
    assert err.startswith("error[stage_fault:download]: stage 2: ") and len(err.strip().splitlines()) == 1
    assert "leaked" not in err and not _entries(p.pid)


def test_silence_counts_only_while_the_orchestrator_watches():
    """A stage's silence is measured while the orchestrator polls: after the orchestrator itself was away
    (stopped with its whole job by Ctrl-Z, say) longer than WATCH_GAP_S, the clock restarts, so resuming
    is not a false fault; a stage that stays stopped is still reported one liveness limit later."""
    from pipeplan.runtime.backends import WATCH_GAP_S
    from pipeplan.runtime.orchestrator import Pipeline

    from tests.unit.test_shm_ring import _provisions

    with Pipeline(_provisions(2), backend="local", liveness_s=1.0) as pipe:
        b = pipe.backend
        victim = b.pids[0]
        assert b.stalled_stage(1.0) is None
        os.kill(victim, signal.SIGSTOP)
        try:
            time.sleep(WATCH_GAP_S + 1.5)  # nobody watching: beats age past the limit
            t0 = time.monotonic()
            assert b.stalled_stage(1.0) is None  # the orchestrator was away: silence counts from now
            got = None
            while got is None and time.monotonic() - t0 < 10:
                time.sleep(0.05)
                got = b.stalled_stage(1.0)
            assert got is not None and got[0] == 0 and 1.0 <= time.monotonic() - t0 < 5.0
        finally:
            os.kill(victim, signal.SIGCONT)
        time.sleep(0.3)
        assert b.stalled_stage(1.0) is None  # beating again
        out, _ = pipe.generate_ids([1, 403, 407], 3)
        assert len(out) == 3
