"""Every contract bullet of ../shared/CONTRACTS.md is cited by a test (docstring or lit comment)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.conftest import SHARED

TESTS = Path(__file__).resolve().parents[1]
CONTRACTS = SHARED / "CONTRACTS.md"
BULLET = re.compile(r"^- ([A-Z]+-[A-Z]+-\d+) ", re.M)
# "RP-LA-1" or a range "RP-LA-1..5" (RP-LA-1, ..., RP-LA-5), the form several tests use
CITATION = re.compile(r"\b([A-Z]+-[A-Z]+)-(\d+)(?:\.\.(\d+))?\b")


def contract_ids(text: str) -> list[str]:
    """The bullet IDs of a CONTRACTS.md text, in order (``- RP-F-1 planner emits ...``)."""
    return BULLET.findall(text)


def cited_ids(text: str) -> set[str]:
    """IDs cited in ``text``; a range ``P-N..M`` cites ``P-N`` to ``P-M``."""
    out: set[str] = set()
    for prefix, lo, hi in CITATION.findall(text):
        out.update(f"{prefix}-{n}" for n in range(int(lo), int(hi or lo) + 1))
    return out


def _docstrings(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef))]
    return [d for n in nodes if (d := ast.get_docstring(n))]


def _lit_comments(path: Path) -> list[str]:
    return [ln.strip()[2:] for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip().startswith("//")]


def citations(tests: Path) -> dict[str, set[str]]:
    """ID -> test files citing it, from Python test docstrings and lit (``//``) comments under ``tests``."""
    where: dict[str, set[str]] = {}
    for path in sorted(tests.rglob("test_*.py")):
        for doc in _docstrings(path):
            for cid in cited_ids(doc):
                where.setdefault(cid, set()).add(str(path.relative_to(tests)))
    for path in sorted((tests / "filecheck").rglob("*.mlir")):
        if "Inputs" in path.parts:
            continue
        for comment in _lit_comments(path):
            for cid in cited_ids(comment):
                where.setdefault(cid, set()).add(str(path.relative_to(tests)))
    return where


def test_citation_parser_expands_ranges_and_reads_only_docstrings(tmp_path):
    """The checker itself: ranges expand, a comment in Python code is not a docstring citation."""
    assert cited_ids("WL-F-1..3, RP-LA-4: x") == {"WL-F-1", "WL-F-2", "WL-F-3", "RP-LA-4"}
    assert contract_ids("## x\n- AB-G-1 binding\n- AB-G-2 digest\nnot - AB-G-3\n") == ["AB-G-1", "AB-G-2"]
    (tmp_path / "filecheck").mkdir()
    (tmp_path / "test_a.py").write_text('"""RP-F-1: module."""\n\ndef test_x():\n    """WL-R-1..2: doc."""\n'
                                        "    # RP-F-3: a comment only\n")
    (tmp_path / "filecheck" / "t.mlir").write_text("// RUN: true\n// AB-S-7: lit comment\nAB-S-6 not a comment\n")
    assert set(citations(tmp_path)) == {"RP-F-1", "WL-R-1", "WL-R-2", "AB-S-7"}


def test_every_contract_bullet_is_cited_by_a_test():
    """All contract bullets (85 today) are cited by at least one test docstring or lit comment, and every
    cited ID exists in CONTRACTS.md (a typo cites nothing)."""
    ids = contract_ids(CONTRACTS.read_text(encoding="utf-8"))
    assert len(ids) >= 85 and len(set(ids)) == len(ids), ids
    where = citations(TESTS)
    uncited = [i for i in ids if i not in where]
    assert not uncited, f"contract bullets cited by no test: {uncited}"
    unknown = {i: sorted(f) for i, f in where.items() if i not in set(ids)}
    assert not unknown, f"cited IDs that CONTRACTS.md does not define: {unknown}"
