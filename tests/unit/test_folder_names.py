"""The checks pass whatever the checkout folder is called (`git clone .../pipeplan` gives `pipeplan`).

Each test copies the tree git knows (tracked files plus untracked, unignored ones) into a temporary folder
of a given name and runs a check there with this environment's tools: ruff's import sorting, mypy's module
mapping, and pytest's test module names (see tests/module_names.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
NAMES = ["pipeplan", "main", "pipeplan-src"]


def _tree_files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                         capture_output=True)
    assert out.returncode == 0, f"{REPO} is not a git checkout (git ls-files: {out.stderr.decode().strip()})"
    return [f for f in out.stdout.decode().split("\0") if f and (REPO / f).is_file()]


@pytest.fixture(scope="module")
def clones(tmp_path_factory) -> dict[str, Path]:
    """name -> a copy of the repo tree in a folder of that name."""
    files = _tree_files()
    assert "pyproject.toml" in files and "__init__.py" in files
    out = {}
    for name in NAMES:
        root = tmp_path_factory.mktemp("clone") / name
        for f in files:
            (root / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / f, root / f)
        out[name] = root
    return out


def _tool(name: str) -> str:
    path = BIN / name
    assert path.exists(), f"{name} is not installed next to {sys.executable} (pip install -e '.[dev]')"
    return str(path)


@pytest.mark.parametrize("name", NAMES)
def test_ruff_passes_in_a_clone_named(clones, name):
    """The README's lint step (`ruff check .`) passes in a clone named `pipeplan` (ruff would call
    `pipeplan` first-party there and re-sort every import block), `main` and `pipeplan-src`."""
    r = subprocess.run([_tool("ruff"), "check", "--no-cache", "."], cwd=clones[name], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]


@pytest.mark.parametrize("name", ["pipeplan", "pipeplan-src"])
def test_mypy_maps_modules_in_a_clone_named(clones, name):
    """mypy maps the root's files to modules whatever the folder is called (without explicit package bases
    it would refuse `pipeplan-src` as a package name). Two import-free modules keep this cheap; the README's
    full `mypy` run covers the rest."""
    r = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "--cache-dir", os.devnull,
                        "errors.py", "plan_types.py"], cwd=clones[name], capture_output=True, text=True)
    assert r.returncode == 0 and "Success" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]


CHILD_TEST = '''
import multiprocessing as mp


def _child():
    pass


def test_module_name_and_spawned_child():
    assert __name__ == "tests.unit.test_zz_child", __name__
    p = mp.get_context("spawn").Process(target=_child)
    p.start()
    p.join(60)
    assert p.exitcode == 0
'''


@pytest.mark.parametrize("name", ["main"])
def test_pytest_module_names_do_not_depend_on_the_folder(clones, name):
    """In a clone named `main` a test module is still `tests.unit.test_x`, so a function of a
    test module runs in a spawned child process (pytest alone would name it `main.tests.unit.test_x`, which
    the child cannot import)."""
    test = clones[name] / "tests" / "unit" / "test_zz_child.py"
    test.write_text(CHILD_TEST)
    try:
        r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", str(test)],
                           cwd=clones[name], capture_output=True, text=True, timeout=300)
    finally:
        test.unlink()
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]


@pytest.mark.parametrize("name", ["pipeplan"])
def test_lit_runs_in_a_clone_named(clones, name):
    """The README's lit step finds its configuration (lit.cfg.py at the root) and its tools in a clone
    named `pipeplan`: one FileCheck test (cheap) passes there and lit prints the count (`-s`)."""
    r = subprocess.run([_tool("lit"), "-s", "tests/filecheck/dialects/runplan/ops.mlir"], cwd=clones[name],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "Passed: 1" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]
