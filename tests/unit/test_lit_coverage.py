"""Issue 13 must-show: for every op, custom + generic round trip; mlir-opt interop for every dialect.

For each dialect of :data:`pipeplan.universe.PIPEPLAN_UNIVERSE` (``all_dialects``), ``tests/filecheck/dialects/
<dialect>/`` must hold

* ``ops.mlir`` with a ``%roundtrip | filecheck`` and a ``%generic-roundtrip | filecheck`` RUN line, whose IR (parsed,
  not verified) holds an op of every ``Dialect.operations`` of the dialect;
* ``mlir-interop.mlir`` with ``REQUIRES: mlir-opt``, whose mlir-opt round trip reaches every op too: it runs
  ``%S/ops.mlir`` through ``mlir-opt-19``, or its own IR holds every op.

:func:`lit_gaps` lists what is missing (one line each); the test fails on any line.
"""

from __future__ import annotations

import re
import shutil
from functools import cache
from pathlib import Path

from pipeplan.api import register_pipeplan
from pipeplan.universe import PIPEPLAN_UNIVERSE
from xdsl.context import Context
from xdsl.parser import Parser

ROOT = Path(__file__).resolve().parents[2]
LIT = ROOT / "tests" / "filecheck" / "dialects"

ROUNDTRIP = re.compile(r"^//\s*RUN:\s*%roundtrip\s*\|\s*filecheck\b", re.M)
"""A RUN line printing the custom form, parsing it back and checking it (``%roundtrip``: lit.cfg.py)."""
GENERIC_ROUNDTRIP = re.compile(r"^//\s*RUN:\s*%generic-roundtrip\s*\|\s*filecheck\b", re.M)
"""A RUN line printing the generic form, parsing it back and checking its custom print."""
REQUIRES_MLIR_OPT = re.compile(r"^//\s*REQUIRES:.*\bmlir-opt\b", re.M)
"""The lit feature lit.cfg.py sets when ``mlir-opt-19`` is on PATH."""
INTEROP_OF_OPS = re.compile(r"^//\s*RUN:.*%S/ops\.mlir.*\bmlir-opt-19\b", re.M)
"""An interop RUN line taking the dialect's ``ops.mlir`` through ``mlir-opt-19``."""


@cache
def dialect_ops() -> dict[str, tuple[str, ...]]:
    """Dialect name -> the names of its ops (``Dialect.operations``), for every dialect of the universe."""
    return {name: tuple(op.name for op in factory().operations)
            for name, factory in sorted(PIPEPLAN_UNIVERSE.all_dialects.items())}


def ops_in(path: Path) -> set[str]:
    """Names of the ops of the IR in ``path`` (parsed with pipeplan's dialects, not verified)."""
    module = Parser(register_pipeplan(Context()), path.read_text(encoding="utf-8"), str(path)).parse_module()
    return {op.name for op in module.walk()}


def lit_gaps(lit: Path = LIT) -> list[str]:
    """What the lit folder ``lit`` (``tests/filecheck/dialects``) lacks for the must-show, one line per gap:
    ``<dialect>: <what>``; [] when nothing."""
    gaps: list[str] = []
    for dialect, names in dialect_ops().items():
        ops_file, interop = lit / dialect / "ops.mlir", lit / dialect / "mlir-interop.mlir"
        if not ops_file.is_file():
            gaps.append(f"{dialect}: no {dialect}/ops.mlir")
            covered: set[str] = set()
        else:
            text = ops_file.read_text(encoding="utf-8")
            if not ROUNDTRIP.search(text):
                gaps.append(f"{dialect}: ops.mlir has no '// RUN: %roundtrip | filecheck' line")
            if not GENERIC_ROUNDTRIP.search(text):
                gaps.append(f"{dialect}: ops.mlir has no '// RUN: %generic-roundtrip | filecheck' line")
            covered = ops_in(ops_file)
            gaps += [f"{dialect}: op {n} does not appear in ops.mlir" for n in names if n not in covered]
        if not interop.is_file():
            gaps.append(f"{dialect}: no {dialect}/mlir-interop.mlir")
            continue
        text = interop.read_text(encoding="utf-8")
        if not REQUIRES_MLIR_OPT.search(text):
            gaps.append(f"{dialect}: mlir-interop.mlir lacks 'REQUIRES: mlir-opt'")
        through = covered if INTEROP_OF_OPS.search(text) else ops_in(interop)
        gaps += [f"{dialect}: op {n} does not go through mlir-opt in mlir-interop.mlir" for n in names
                 if n not in through]
    return gaps


def test_every_op_round_trips_and_every_dialect_has_mlir_interop():
    """Issue 13 must-show: for every op, custom + generic round trip; mlir-opt interop for every dialect."""
    assert set(dialect_ops()) >= {"runplan", "pplan", "cplan", "vmachine", "tmachine"}
    gaps = lit_gaps()
    assert not gaps, "lit coverage gaps (issue 13 must-show):\n" + "\n".join(f"  {g}" for g in gaps)


def test_a_gap_is_reported(tmp_path):
    """Issue 13 must-show: for every op, custom + generic round trip; mlir-opt interop for every dialect. A copy of
    the lit folder with one gap of each kind reports exactly those gaps: an op left out of ops.mlir (cplan.sync),
    a missing RUN line of each round trip, a missing interop file, an interop file without its REQUIRES line."""
    lit = tmp_path / "dialects"
    shutil.copytree(LIT, lit, ignore=shutil.ignore_patterns("Output"))

    def edit(rel: str, keep) -> None:
        p = lit / rel
        p.write_text("".join(ln for ln in p.read_text(encoding="utf-8").splitlines(keepends=True) if keep(ln)),
                     encoding="utf-8")

    edit("cplan/ops.mlir", lambda ln: not ln.lstrip().startswith("cplan.sync "))
    edit("vmachine/ops.mlir", lambda ln: not ln.startswith("// RUN: %generic-roundtrip"))
    edit("runplan/ops.mlir", lambda ln: not ln.startswith("// RUN: %roundtrip"))
    edit("pplan/mlir-interop.mlir", lambda ln: not ln.startswith("// REQUIRES:"))
    (lit / "tmachine" / "mlir-interop.mlir").unlink()
    assert lit_gaps(lit) == [
        "cplan: op cplan.sync does not appear in ops.mlir",
        "cplan: op cplan.sync does not go through mlir-opt in mlir-interop.mlir",
        "pplan: mlir-interop.mlir lacks 'REQUIRES: mlir-opt'",
        "runplan: ops.mlir has no '// RUN: %roundtrip | filecheck' line",
        "tmachine: no tmachine/mlir-interop.mlir",
        "vmachine: ops.mlir has no '// RUN: %generic-roundtrip | filecheck' line",
    ]
