"""The project's own packaging promises: README commands, CI script, entry points."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _readme_block(heading: str) -> str:
    text = (REPO / "README.md").read_text()
    m = re.search(rf"## {heading}\n\n```sh\n(.*?)\n```", text, re.S)
    assert m, f"README has no ```sh block under '## {heading}'"
    return m.group(1).strip()


def test_ci_runs_readme_install_and_test_commands():
    """.ci/run runs exactly the README's one install command and one test command."""
    ci = (REPO / ".ci" / "run").read_text()
    install = _readme_block("Install")
    test = _readme_block("Test")
    assert "\n" not in install and "\n" not in test
    ci_lines = [ln.strip() for ln in ci.splitlines()]
    assert install in ci_lines
    assert test in ci_lines
    assert ci_lines.index(install) < ci_lines.index(test)


def test_universe_lists_dialects_and_passes_lazily():
    """The xdsl.universe entry point resolves, and importing it loads no pipeplan dialect module."""
    code = (
        "import sys\n"
        "from xdsl.universe import Universe\n"
        "u = Universe.get_multiverse()\n"
        "assert 'runplan' in u.all_dialects, sorted(u.all_dialects)\n"
        "assert 'runplan-project-provisioning' in u.all_passes\n"
        "loaded = [m for m in sys.modules if m.startswith('pipeplan.dialects.')]\n"
        "assert not loaded, loaded\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_every_registered_factory_imports():
    """Every dialect and pass named in universe.py imports (a broken entry would break xdsl-opt for everyone)."""
    from pipeplan.universe import PIPEPLAN_UNIVERSE
    from xdsl.ir import Dialect
    from xdsl.passes import ModulePass

    for name, factory in PIPEPLAN_UNIVERSE.all_dialects.items():
        d = factory()
        assert isinstance(d, Dialect) and d.name == name
    for name, factory in PIPEPLAN_UNIVERSE.all_passes.items():
        p = factory()
        assert issubclass(p, ModulePass) and p.name == name


INTEROP = "tests/filecheck/dialects/runplan/mlir-interop.mlir"


def _readme_lit_command() -> list[str]:
    """The README test command's lit step, run on the interop test only."""
    step = next(s.strip() for s in _readme_block("Test").split("&&") if "/lit " in s)
    argv = step.split()
    assert argv[0] == ".venv/bin/lit" and argv[-1] == "tests/filecheck", step
    return [str(Path(sys.executable).parent / "lit"), *argv[1:-1], INTEROP]


def _run_lit(extra_env: dict[str, str], argv: list[str] | None = None) -> subprocess.CompletedProcess:
    # PATH holds only this environment's bin/: no mlir-opt-19 (pipeplan-opt is found beside sys.executable)
    env = {k: v for k, v in os.environ.items() if k != "PIPEPLAN_REQUIRE_MLIR_OPT"}
    env.update(PATH=str(Path(sys.executable).parent), **extra_env)
    return subprocess.run(argv or _readme_lit_command(), cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)


def test_lit_step_reports_an_unsupported_interop_test():
    """The README's lit step does not hide a skipped test: without mlir-opt-19 on PATH the interop test is
    counted (`Unsupported: 1`) and a note on stderr names the missing tool, even under `lit -q`."""
    r = _run_lit({})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Unsupported: 1" in r.stdout, r.stdout
    assert "mlir-opt-19 not found" in r.stderr and "UNSUPPORTED" in r.stderr, r.stderr
    r = _run_lit({}, [str(Path(sys.executable).parent / "lit"), "-q", INTEROP])
    assert r.returncode == 0 and "mlir-opt-19 not found" in r.stderr, r.stdout + r.stderr


def test_lit_fails_without_mlir_opt_when_required():
    """PIPEPLAN_REQUIRE_MLIR_OPT=1 (which .ci/run exports) turns a missing mlir-opt-19 into a lit failure."""
    r = _run_lit({"PIPEPLAN_REQUIRE_MLIR_OPT": "1"})
    assert r.returncode != 0
    assert "fatal" in r.stderr and "mlir-opt-19 not found" in r.stderr, r.stderr
    ci = (REPO / ".ci" / "run").read_text()
    assert 'export PIPEPLAN_REQUIRE_MLIR_OPT="${PIPEPLAN_REQUIRE_MLIR_OPT:-1}"' in ci
