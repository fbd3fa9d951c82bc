"""Every verifier message of the cplan, vmachine, tmachine, bindings and pplan dialects has an invalid lit
case (issue 13 item 3 must-show: "for every verifier message, one invalid case"; AB-S-1..7, AB-M-1, AB-R-6,
AB-G-1).

A *message* is the text of a diagnostic a verifier can raise on parse: ``raise VerifyException(...)`` /
``IRVerifyError`` / ``MachineVerifyError`` (or ``raise helper(op, "...")``) in a ``verify_``/``verify`` method
or a function it reaches (call graph within the dialect modules), a ``Violation(...)`` of the on-parse
construction invariants, and a ``parser.raise_error(...)`` of a custom parser. Each message becomes a regex
(literal text escaped, ``{...}`` parts ``.*?``, module-level string constants substituted) that some CHECK
line of the dialect's ``invalid.mlir`` must contain. Messages xDSL itself raises (traits, missing
properties) are not pipeplan's and are not counted.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIT = ROOT / "tests" / "filecheck" / "dialects"

DIALECTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "cplan": (("dialects/cplan.py", "dialects/cplan_invariants.py"), ("cplan/invalid.mlir", "cplan/lineage-invalid.mlir")),
    "vmachine": (("dialects/vmachine.py",), ("vmachine/invalid.mlir",)),
    "tmachine": (("dialects/triton_machine.py",), ("tmachine/invalid.mlir",)),
    "bindings": (("dialects/bindings.py",), ("pplan/invalid.mlir",)),
    "pplan": (("dialects/pplan.py",), ("pplan/invalid.mlir",)),
}
"""Dialect -> (its modules, the invalid lit files whose CHECK lines must cover its messages). The shared
carriers module (``dialects/carriers.py``) has no row: since the machine dialects are SSA no verifier calls its
string-array check (``check_strs``) any more."""

ERRORS = {"VerifyException", "IRVerifyError", "MachineVerifyError"}
"""Exception classes whose messages are verifier diagnostics."""

ROOTS = {"verify_", "verify"}
"""Method names xDSL calls when it verifies an op or an attribute (on parse)."""


@dataclass(frozen=True)
class Message:
    """One verifier message: where it is raised and the regex its diagnostic text matches."""

    module: str
    line: int
    function: str
    regex: str

    def where(self) -> str:
        return f"{self.module}:{self.line} ({self.function})"


class _Module:
    """The functions of one dialect module, by qualified name (``f``, ``Class.method``), its module-level
    string constants and the names it imports from the other dialect modules."""

    def __init__(self, rel: str):
        self.rel = rel
        self.tree = ast.parse((ROOT / rel).read_text(encoding="utf-8"), filename=rel)
        self.funcs: dict[str, ast.FunctionDef] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        self.consts: dict[str, str] = {}
        self.imports: dict[str, str] = {}  # local name -> "dialects/x.py"
        for node in self.tree.body:
            if isinstance(node, ast.FunctionDef):
                self.funcs[node.name] = node
            elif isinstance(node, ast.ClassDef):
                self.classes[node.name] = node
                for m in node.body:
                    if isinstance(m, ast.FunctionDef):
                        self.funcs[f"{node.name}.{m.name}"] = m
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                    for t in targets:
                        if isinstance(t, ast.Name):
                            self.consts[t.id] = node.value.value
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("pipeplan.dialects."):
                rel_mod = "dialects/" + node.module.rsplit(".", 1)[1] + ".py"
                for a in node.names:
                    self.imports[a.asname or a.name] = rel_mod

    def method_of(self, cls: str, name: str) -> str | None:
        """``Class.name`` defined in ``cls`` or one of its bases within this module."""
        seen: set[str] = set()
        todo = [cls]
        while todo:
            c = todo.pop()
            if c in seen or c not in self.classes:
                continue
            seen.add(c)
            if f"{c}.{name}" in self.funcs:
                return f"{c}.{name}"
            todo += [b.id for b in self.classes[c].bases if isinstance(b, ast.Name)]
        return None


_MODULES: dict[str, _Module] = {}


def _module(rel: str) -> _Module:
    if rel not in _MODULES:
        _MODULES[rel] = _Module(rel)
    return _MODULES[rel]


def _callees(mod: _Module, qual: str) -> list[tuple[str, str]]:
    """``(module, qualname)`` of the dialect functions ``qual`` calls (by plain name, ``Class.method``,
    ``self.method``; a class called is its ``__init__``)."""
    fn = mod.funcs[qual]
    cls = qual.split(".")[0] if "." in qual else None
    out: list[tuple[str, str]] = []
    for node in ast.walk(fn):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name):
            if f.id in mod.funcs:
                out.append((mod.rel, f.id))
            elif f.id in mod.imports and (ROOT / mod.imports[f.id]).exists():
                other = _module(mod.imports[f.id])
                if f.id in other.funcs:
                    out.append((other.rel, f.id))
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            if f.value.id == "self" and cls is not None:
                m = mod.method_of(cls, f.attr)
                if m:
                    out.append((mod.rel, m))
            elif f.value.id in mod.classes:
                m = mod.method_of(f.value.id, f.attr)
                if m:
                    out.append((mod.rel, m))
    return out


def _regex(node: ast.expr, mod: _Module) -> str | None:
    """The regex of a message expression (None when it has no literal text)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return re.escape(node.value)
    if isinstance(node, ast.JoinedStr):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(re.escape(str(v.value)))
            elif isinstance(v, ast.FormattedValue) and isinstance(v.value, ast.Name) and v.value.id in mod.consts:
                parts.append(re.escape(mod.consts[v.value.id]))
            else:
                parts.append(".*?")
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _regex(node.left, mod), _regex(node.right, mod)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.Name) and node.id in mod.consts:
        return re.escape(mod.consts[node.id])
    return None


def _message_arg(call: ast.Call) -> ast.expr | None:
    """The first argument of ``call`` that is a string (literal, f-string or concatenation)."""
    for a in call.args:
        if isinstance(a, ast.Constant) and isinstance(a.value, str) or isinstance(a, ast.JoinedStr | ast.BinOp):
            return a
    return None


@functools.cache
def _error_helpers(mod: _Module) -> set[str]:
    """Names of functions (nested ones too) that return one of :data:`ERRORS` (``raise fail(op, "...")``)."""
    out = set()
    for node in ast.walk(mod.tree):
        if isinstance(node, ast.FunctionDef):
            for r in ast.walk(node):
                if isinstance(r, ast.Return) and isinstance(r.value, ast.Call) and isinstance(r.value.func, ast.Name) \
                        and r.value.func.id in ERRORS:
                    out.add(node.name)
    return out


def _sites(mod: _Module, qual: str) -> list[tuple[int, str]]:
    """``(line, regex)`` of the diagnostics raised in function ``qual``. A ``Violation(inv, code, msg)``
    is matched as its on-parse text ``[inv] <invariant> (code): msg``."""
    helpers = _error_helpers(mod)
    out = []
    for node in ast.walk(mod.funcs[qual]):
        if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and isinstance(node.exc.func, ast.Name):
            name = node.exc.func.id
            arg = _message_arg(node.exc) if name in ERRORS or name in helpers else None
            r = _regex(arg, mod) if arg is not None else None
            if r is not None:
                out.append((node.lineno, r))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Violation":
            inv, code, msg = (list(node.args) + [None, None, None])[:3]
            r = _regex(msg, mod) if msg is not None else None
            rc = _regex(code, mod) if code is not None else None
            if isinstance(inv, ast.Constant) and rc is not None and r is not None:
                out.append((node.lineno, re.escape(f"[{inv.value}] ") + ".*?" + r"\(" + rc + r"\): " + r))
    return out


def _parse_errors(mod: _Module) -> list[Message]:
    """``parser.raise_error(...)`` messages of the module's custom parsers (raised on parse)."""
    out = []
    for qual, fn in mod.funcs.items():
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "raise_error" \
                    and node.args:
                r = _regex(node.args[0], mod)
                if r is not None:
                    out.append(Message(mod.rel, node.lineno, qual, r))
    return out


@functools.cache
def messages(modules: tuple[str, ...]) -> list[Message]:
    """Every verifier message of ``modules``: raise sites in them reachable from a ``verify_``/``verify``
    method of any dialect module (the call graph crosses modules: cplan -> cplan_invariants, every dialect
    -> carriers), plus their parse errors."""
    todo: list[tuple[str, str]] = []
    for rel in sorted({m for mods, _ in DIALECTS.values() for m in mods}):
        mod = _module(rel)
        todo += [(rel, q) for q in mod.funcs if q.split(".")[-1] in ROOTS and "." in q]
    reached: set[tuple[str, str]] = set()
    while todo:
        key = todo.pop()
        if key in reached:
            continue
        reached.add(key)
        todo += _callees(_module(key[0]), key[1])
    out: list[Message] = []
    for rel, qual in sorted(reached):
        if rel not in modules:
            continue
        out += [Message(rel, line, qual, r) for line, r in _sites(_module(rel), qual)]
    for rel in modules:
        out += _parse_errors(_module(rel))
    return sorted(set(out), key=lambda m: (m.module, m.line))


CHECK = re.compile(r"//\s*CHECK(?:-NEXT|-SAME)?:\s?(.*)$")


def check_lines(files: tuple[str, ...]) -> list[str]:
    """The pattern text of every CHECK / CHECK-NEXT / CHECK-SAME line of the lit ``files``."""
    out = []
    for f in files:
        path = LIT / f
        if path.exists():
            out += [m.group(1) for ln in path.read_text(encoding="utf-8").splitlines() if (m := CHECK.search(ln))]
    return out


def uncovered(dialect: str, checks: list[str] | None = None) -> tuple[list[Message], list[Message]]:
    """``(messages, those no CHECK line contains)``; ``checks`` defaults to the CHECK lines of the dialect's
    invalid files."""
    modules, files = DIALECTS[dialect]
    msgs = messages(modules)
    checks = check_lines(files) if checks is None else checks
    return msgs, [m for m in msgs if not any(re.search(m.regex, c) for c in checks)]


def test_inventory_finds_messages_of_each_kind():
    """The collector itself: it finds a plain verify_ raise, a raise in a function a verifier calls, a
    ``raise fail(...)`` helper site, a Violation of the construction invariants and a parser error."""
    cplan = {m.function for m in messages(DIALECTS["cplan"][0])}
    assert {"AllocOp.verify_", "_rintdict", "check_s5"} <= cplan
    vm = messages(DIALECTS["vmachine"][0])
    text = "kernel 'rope' reads buffer 'b.x' before it is written in step 'decode'"
    assert [m.function for m in vm if re.fullmatch(m.regex, text)] == ["check_program"]
    assert any(m.function == "linearize" for m in vm)
    pp = messages(DIALECTS["pplan"][0])
    assert any(m.function == "_parse_value" for m in pp)
    assert not any(m.function == "find_plan" for m in pp)  # a ValueError of a helper is not a verifier message


def test_constant_prefixes_are_substituted():
    """tmachine's ``{ABI_INVARIANT}: ...`` messages are matched on the invariant's text, not a wildcard."""
    tm = messages(DIALECTS["tmachine"][0])
    assert tm and all(not m.regex.startswith(".*?") for m in tm if "ABI_INVARIANT" not in m.regex)
    assert any(m.regex.startswith(re.escape("[AB-M-1] a machine program must respect its launch ABI")) for m in tm)


def test_a_message_without_its_case_is_reported():
    """Dropping the CHECK line of one message (tmachine's unknown view kind) reports exactly that message."""
    checks = [c for c in check_lines(DIALECTS["tmachine"][1]) if "unknown view kind" not in c]
    _, missing = uncovered("tmachine", checks)
    assert [m.function for m in missing] == ["ViewOp.verify_"]


XDSL_ONLY = ("is not a terminator",)
"""Texts of the xDSL diagnostics (no op location) an invalid case may check instead of a located one."""


@pytest.mark.parametrize("name", ["cplan", "vmachine", "tmachine", "pplan"])
def test_every_invalid_case_pins_the_offending_op(name):
    """Issue 13 item 3 (AB-S-1..7, AB-M-1): each case of the dialect's invalid.mlir runs under
    ``%verify-located`` and checks the diagnostic's location as the line just above its CHECK line (the
    offending op's, not the module's)."""
    text = (LIT / name / "invalid.mlir").read_text(encoding="utf-8")
    assert text.startswith("// RUN: %verify-located"), f"{name}/invalid.mlir does not run under %verify-located"
    cases = text.split("\n// -----\n")
    unpinned = [i for i, c in enumerate(cases)
                if "invalid.mlir:[[# @LINE - 1]]:" not in c and not any(x in c for x in XDSL_ONLY)]
    assert len(cases) > 10 and not unpinned, f"{name}/invalid.mlir: cases {unpinned} check no op location"


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_every_verifier_message_has_an_invalid_lit_case(dialect):
    """Issue 13 item 3 / must-show (AB-S-1..7, AB-M-1, AB-R-6, AB-G-1): each verifier message of the dialect
    appears in a CHECK line of its invalid.mlir."""
    msgs, missing = uncovered(dialect)
    assert msgs, f"{dialect}: no verifier messages found (collector broken?)"
    assert not missing, f"{dialect}: {len(missing)} of {len(msgs)} verifier messages have no invalid lit case:\n" + \
        "\n".join(f"  {m.where()}: /{m.regex}/" for m in missing)
