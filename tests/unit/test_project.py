"""The project's own packaging promises: README commands, CI script, entry points."""

from __future__ import annotations

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
