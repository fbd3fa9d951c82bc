"""pytest imports each test module as ``tests.<dir>.<file>``, whatever the checkout folder is named.

The repo root is the package ``pipeplan`` (it holds ``__init__.py``), so pytest's importlib mode names a test
module after the checkout folder when that name is an identifier: ``main.tests.unit.test_shm_ring`` in a
clone named ``main``. A spawned child process cannot import that name, so a test function handed to it
fails to unpickle there. :class:`RepoRootModule` imports the module by its path relative to the repo root,
which ``pythonpath = ["."]`` (pyproject.toml) makes importable in the test process and in its children.
Registered by ``tests/conftest.py`` (``pytest_pycollect_makemodule``).
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def repo_module_name(path: Path) -> str | None:
    """``tests/unit/test_x.py`` -> ``"tests.unit.test_x"``; None outside the repo or for a non-identifier part."""
    try:
        parts = path.resolve().relative_to(REPO).with_suffix("").parts
    except ValueError:
        return None
    return ".".join(parts) if parts and all(p.isidentifier() for p in parts) else None


class RepoRootModule(pytest.Module):
    """A test module imported by its repo-relative name (assertion rewriting applies: it matches test_*.py)."""

    def _getobj(self):
        name = repo_module_name(self.path)
        if name is None:
            return super()._getobj()
        return importlib.import_module(name)


def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> pytest.Module | None:
    """Collect ``test_*.py`` files under the repo as :class:`RepoRootModule` (others: pytest's default)."""
    if repo_module_name(module_path) is None:
        return None
    return RepoRootModule.from_parent(parent, path=module_path)
