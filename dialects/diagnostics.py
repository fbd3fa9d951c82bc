"""Verifier diagnostics that point at the offending op (issue 13 item 3).

* :class:`IRVerifyError` -- a verifier failure carrying the op it concerns, its source location and the
  contract ID of its ``[RP-..]``/``[AB-..]`` message; a :class:`~pipeplan.errors.PipeplanError` (code
  ``invalid_ir``) and an xDSL ``VerifyException``.
* :class:`PipeplanOp` -- base of every pipeplan op: its ``emit_error`` raises an :class:`IRVerifyError`
  naming the op instead of attaching a print of the whole module to the exception (xDSL's default).
* :class:`LocatingParser` -- xDSL's ``Parser`` that records each op's ``file:line:col`` as its
  ``FileLineColLoc`` location (xDSL keeps only explicit ``loc(...)``; MLIR records them the same way),
  and reports an attribute/type verifier failure while an op is parsed as a parse error at that op.
* :func:`op_text` -- an op's first printed line, truncated.

A diagnostic is ``file.mlir:LINE:COL: error: [AB-S-3] ...`` followed by the op's one-line text
(:meth:`IRVerifyError.diagnostic`), never a dump of the module.
"""

from __future__ import annotations

import gc
import io
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import ClassVar, NoReturn, Self, cast

from pipeplan.dialects import irdl_fast
from pipeplan.dialects.parsing import FastParser
from pipeplan.errors import PipeplanError
from xdsl.context import Context
from xdsl.dialects.builtin import (
    DenseArrayBase,
    FileLineColLoc,
    IntAttr,
    LocationAttr,
    ModuleOp,
    StringAttr,
    UnknownLoc,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.irdl import IRDLOperation
from xdsl.parser import MLIRTokenKind
from xdsl.printer import Printer
from xdsl.traits import NoTerminator
from xdsl.utils.exceptions import PassFailedException, VerifyException

_xdsl_get_values = DenseArrayBase.get_values


def _dense_values(self: DenseArrayBase) -> tuple[int, ...] | tuple[float, ...]:
    """``DenseArrayBase.get_values`` decoded once per attribute (attributes are immutable; the tuple is
    kept in the instance's ``__dict__``, outside its fields, equality and hash). Every access of a variadic
    operand group of an op with ``operandSegmentSizes`` (``pplan.task``, ``cplan.command``) and every IRDL
    verification of one decodes the segment sizes: a 70B-shaped pipeline did so ~280,000 times (~2 us each)."""
    d = self.__dict__
    v = d.get("_pp_values")
    if v is None:
        v = d["_pp_values"] = _xdsl_get_values(self)  # type: ignore[arg-type]
    return v


DenseArrayBase.get_values = _dense_values  # type: ignore[method-assign, assignment]

OP_TEXT_LIMIT = 160
"""Characters of an op's text shown in a diagnostic (longer text ends with ``...``)."""

_CONTRACT_RE = re.compile(r"\[((?:RP|AB|WL)-[A-Z]{1,2}-\d+)\]")


def contract_id(message: str) -> str:
    """The first ``[RP-..]``/``[AB-..]`` contract ID in ``message`` ('' when there is none)."""
    m = _CONTRACT_RE.search(message)
    return m.group(1) if m else ""


def op_location(op: Operation | None) -> tuple[str, int, int] | None:
    """``(file, line, column)`` of ``op`` (1-based) when it was parsed by :class:`LocatingParser` or
    carries an explicit ``loc("file":line:col)``; None otherwise."""
    loc = getattr(op, "location", None)
    if isinstance(loc, FileLineColLoc):
        return loc.filename.data, loc.line.data, loc.column.data
    return None


class _Enough(Exception):
    """Raised by :class:`_Head` to stop the printer once the first line is complete."""


class _Head(io.StringIO):
    """A stream that stops the printer at the first newline or after ``limit`` characters."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit = limit

    def write(self, s: str) -> int:
        n = super().write(s)
        if "\n" in s or self.tell() > self.limit:
            raise _Enough
        return n


def op_text(op: Operation, limit: int = OP_TEXT_LIMIT) -> str:
    """The first line of ``op`` as printed (custom form), at most ``limit`` characters (``...`` marks a
    cut). Printing stops at the first line, so a region op costs no more than its header."""
    buf = _Head(limit)
    try:
        Printer(stream=buf).print_op(op)
    except _Enough:
        pass
    text = buf.getvalue().split("\n", 1)[0].rstrip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


class OpError(PipeplanError):
    """An error about one op. Attributes: ``op`` (the offending op, None when unknown), ``invariant``
    (the contract ID of the message, '' when it has none), ``location`` (``(file, line, col)`` or None).
    ``str(e)`` is the message alone; :meth:`diagnostic` the two-line form."""

    def __init__(self, message: str, *, op: Operation | None = None, code: str | None = None):
        PipeplanError.__init__(self, message, code=code)
        self.op = op
        self.invariant = contract_id(message)

    @property
    def location(self) -> tuple[str, int, int] | None:
        return op_location(self.op)

    def diagnostic(self, severity: str = "error") -> str:
        """``file:line:col: error: <message>`` and, when the op is known, its one-line text indented
        (no location: ``error: <message>``)."""
        return format_diagnostic(self.message, self.op, severity)


class IRVerifyError(OpError, VerifyException):
    """A verifier failure that names the op it concerns (the first op of a region verifier's finding);
    code ``invalid_ir``."""

    code = "invalid_ir"


def format_diagnostic(message: str, op: Operation | None, severity: str = "error") -> str:
    """The diagnostic of ``message`` about ``op`` (see :meth:`IRVerifyError.diagnostic`)."""
    first = message.split("\n")[0]
    rest = message.split("\n")[1:]
    loc = op_location(op)
    head = f"{loc[0]}:{loc[1]}:{loc[2]}: {severity}: {first}" if loc else f"{severity}: {first}"
    lines = [head, *rest]
    if op is not None:
        lines.append(f"  {op_text(op)}")
    return "\n".join(lines)


class OpPassError(OpError, PassFailedException):
    """A pass failure about one op (e.g. ``cplan-verify``'s first violation): a PassFailedException
    that carries the op, printed like :class:`IRVerifyError` (code ``pass_failed``)."""

    code = "pass_failed"


def located(err: Exception, op: Operation | None) -> IRVerifyError:
    """``err`` as an :class:`IRVerifyError` about ``op`` (an IRVerifyError that already names an op is
    returned unchanged)."""
    if isinstance(err, IRVerifyError):
        if err.op is None:
            err.op = op
        return err
    return IRVerifyError(str(err).split("\n")[0] or type(err).__name__, op=op)


_SEGMENT_SIZES = ("operandSegmentSizes", "resultSegmentSizes")
"""Segment-size properties: last, where xDSL's builders put them, so a generic print is the same after a
generic parse."""


_ORDERS: dict[tuple[type, tuple[str, ...]], list[str]] = {}
_VALUE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.$-]*$")


def value_name(text: str) -> str | None:
    """``text`` as an SSA value name (``%text``), or None when it has characters a name cannot hold."""
    return text if _VALUE_NAME.match(text) else None
"""Per op class and order of given property names: the names in declaration order (:meth:`PipeplanOp.create`)."""


class PipeplanOp(IRDLOperation):
    """Base of the pipeplan ops: a verifier failure raises :class:`IRVerifyError` naming this op (or the
    op a region verifier named), instead of xDSL's print of the whole module attached to the error.

    Properties are stored in the op definition's declaration order whatever order the text (or a
    builder) gave them in (segment sizes last), so a custom or generic print is the same after upstream MLIR,
    which sorts property dictionaries, printed the op (``mlir-opt --mlir-print-op-generic`` round trip)."""

    @classmethod
    def _declared_order(cls, props: Mapping[str, Attribute | None] | None) -> dict[str, Attribute | None] | None:
        if not props:
            return None if props is None else dict(props)
        given = tuple(props)
        keys = _ORDERS.get((cls, given))
        if keys is None:
            order = [k for k in cls.get_irdl_definition().properties if k not in _SEGMENT_SIZES]
            keys = [k for k in order if k in props]
            keys += [k for k in given if k not in keys]
            _ORDERS[(cls, given)] = keys
        return {k: props[k] for k in keys}

    @classmethod
    def create(cls, *, operands: Sequence[SSAValue] = (), result_types: Sequence[Attribute] = (),
               properties: Mapping[str, Attribute] = {}, attributes: Mapping[str, Attribute] = {},
               location: LocationAttr | None = None, successors: Sequence[Block] = (),
               regions: Sequence[Region] = ()) -> Self:
        return super().create(operands=operands, result_types=result_types,
                              properties=cast(dict[str, Attribute], cls._declared_order(properties)),
                              attributes=attributes, location=location, successors=successors,
                              regions=regions).name_result()

    @classmethod
    def build(cls, *, operands: Sequence[SSAValue | Operation | Sequence[SSAValue | Operation] | None] | None = None,
              result_types: Sequence[Attribute | Sequence[Attribute] | None] | None = None,
              attributes: Mapping[str, Attribute | None] | None = None,
              properties: Mapping[str, Attribute | None] | None = None,
              successors: Sequence[Block | Sequence[Block] | None] | None = None,
              regions: Sequence[Region | Sequence[Operation] | Sequence[Block]
                                | Sequence[Region | Sequence[Operation] | Sequence[Block]] | None] | None = None,
              ) -> Self:
        return super().build(operands=operands, result_types=result_types, attributes=attributes,
                             properties=cls._declared_order(properties), successors=successors,
                             regions=regions).name_result()

    def result_name(self) -> str | None:
        """The name of the op's first result, derived from its properties (a buffer's or a token's id), or
        None (default): the value is numbered. :meth:`name_result` gives it to a value without a name."""
        return None

    def name_result(self) -> Self:
        """Names the op's first result :meth:`result_name` when it has no name: an op parsed from text whose
        values a tool renumbered (``mlir-opt``), or built without a name, prints as the lowering named it.
        Returns the op."""
        if self.results and self.results[0].name_hint is None:
            self.results[0].name_hint = self.result_name()
        return self

    ATTRIBUTE_VERIFIER: ClassVar[bool] = False
    """True where the op's discardable attributes (``op.attributes``) are read by no verifier but the op's
    own :meth:`verify_attributes_` (not by the rest of its ``verify_``, its IRDL definition, which then
    declares no attribute, or its traits; nor by any other op's verifier): then a change of only those
    attributes re-runs :meth:`verify_attributes_` alone (:func:`verify_cached`)."""

    def verify_attributes_(self) -> None:
        """The checks of the op's discardable attributes (see :attr:`ATTRIBUTE_VERIFIER`); part of ``verify_``."""

    def verify(self, verify_nested_ops: bool = True) -> None:
        """xDSL's op verification (structure, IRDL constraints, ``verify_``), with a subtree that has not
        changed since it last verified skipped (:func:`verify_cached`)."""
        if not verify_nested_ops:
            _fast_irdl(type(self))
            super().verify(verify_nested_ops=False)
            return
        verify_cached(self)

    def emit_error(self, message: str, underlying_error: Exception) -> NoReturn:
        if isinstance(underlying_error, VerifyException):
            raise located(underlying_error, self) from None
        raise underlying_error


_FAST_SEEN: set[type[Operation]] = set()


def _fast_irdl(cls: type[Operation]) -> None:
    """Give a pipeplan op class (and ``builtin.module``) the precompiled IRDL acceptance test
    (:func:`irdl_fast.install`: the same checks and errors) the first time one of its ops is verified."""
    if cls not in _FAST_SEEN:
        _FAST_SEEN.add(cls)
        if issubclass(cls, PipeplanOp) or cls is ModuleOp:  # the module: its IsolatedFromAbove walk
            irdl_fast.install(cls)


_Memo = dict[Operation, tuple[object, ...]]


class _ClassFlag(dict[type, bool]):
    """``flag[cls]``: whether ``cls`` is a subclass of ``base``, computed once per class (``isinstance``
    against xDSL's abstract IR classes goes through ``ABCMeta.__instancecheck__``: ~1M calls a pipeline)."""

    def __init__(self, base: type):
        super().__init__()
        self.base = base

    def __missing__(self, cls: type) -> bool:
        flag = self[cls] = issubclass(cls, self.base)
        return flag


_IS_OP = _ClassFlag(Operation)
_IS_PIPEPLAN = _ClassFlag(PipeplanOp)


def _attrs(op: Operation, memo: _Memo) -> tuple[object, ...]:
    """What other ops' verification may read of ``op``'s attributes: its properties and discardable
    attributes (names and values), the properties alone for an op whose
    :attr:`PipeplanOp.ATTRIBUTE_VERIFIER` is set; computed once per verification walk."""
    t = memo.get(op)
    if t is None:
        attrs = op.attributes
        if not attrs or getattr(op, "ATTRIBUTE_VERIFIER", False):
            t = memo[op] = tuple(op.properties.values())
        else:
            t = memo[op] = (*op.properties.values(), None, *attrs, None, *attrs.values())
    return t


def _verify_key(op: Operation, memo: _Memo) -> list[object]:
    """What an op's verification reads, as a flat list: its parent block and the parent op's attributes, its
    operands, their types and defining ops' attributes, result types, attributes, successors, and per region
    the blocks, their argument types and ops, and whether it ends its block. Attributes are immutable values
    and IR objects compare by identity, so an equal key means the same verification result. (The
    discardable attributes of an op with :attr:`PipeplanOp.ATTRIBUTE_VERIFIER` are compared apart.)
    Reads xDSL 0.75's IR fields directly (``_operands``, ``_type``, ``_next_op``, ``_first_block`` ...):
    the properties that wrap them cost most of the key."""
    block = op.parent
    region = None if block is None else block.parent
    parent = None if region is None else region.parent
    key: list[object] = [block, op._next_op is None, None if parent is None else _attrs(parent, memo)]
    operands = op._operands
    if operands:
        key.append(len(operands))
        is_op = _IS_OP
        get = memo.get
        for v in operands:
            owner = v.owner
            if is_op[owner.__class__]:
                t = get(owner)  # type: ignore[call-overload, arg-type]
                key += (v, v._type, _attrs(owner, memo) if t is None else t)  # type: ignore[arg-type]
            else:
                key += (v, v._type, None)
    key.append(None)
    key.extend([r._type for r in op.results])
    key.append(_attrs(op, memo))
    if op._successors:
        key.append(len(op._successors))
        key.extend(op._successors)
    for region in op.regions:
        key.append(region)
        b = region._first_block
        while b is not None:
            args = b._args
            key += (b, len(args))
            if args:
                key.extend([a._type for a in args])
            o = b._first_op
            while o is not None:
                key.append(o)
                o = o._next_op
            key.append(None)
            b = b._next_block
    return key


_UNCHANGED, _ATTRIBUTES, _VERIFIED = 0, 1, 2


def verify_cached(op: PipeplanOp, memo: _Memo | None = None) -> bool:
    """Verify ``op`` and its nested ops as ``Operation.verify`` does, skipping each pipeplan op whose
    subtree verified before and has not changed since (same :func:`_verify_key` for it and every nested
    op). A pass pipeline verifies the whole module after each pass (``xdsl-opt``, ``mlir-opt
    -verify-each``); passes rewrite one dialect at a time, so the others re-verify in linear time without
    re-running their verifiers. An op whose :attr:`PipeplanOp.ATTRIBUTE_VERIFIER` is set and of which only
    discardable attributes changed re-runs only its :meth:`PipeplanOp.verify_attributes_`, and its
    container does not verify again for it (analysis passes annotate every task). Returns whether anything
    was verified. Raises what the verifiers raise."""
    return _verify_cached(op, {} if memo is None else memo) != _UNCHANGED


def verify_module(op: Operation) -> None:
    """``op.verify()`` for a container that is no pipeplan op (``builtin.module``), cached as
    :func:`verify_cached` caches a pipeplan op: when none of its nested ops changed, its own verifier
    (xDSL's ``IsolatedFromAbove`` walks every nested operand) is not run again either. Raises what the
    verifiers raise."""
    _verify_cached(op, {})


def _verify_cached(op: Operation, memo: _Memo) -> int:
    key = _verify_key(op, memo)
    split = getattr(op, "ATTRIBUTE_VERIFIER", False)
    own = (*op.attributes, None, *op.attributes.values()) if split else None
    prev = op.__dict__.get("_pp_verified")
    changed = prev is None or prev[0] != key  # element-wise `is` or `==`, as list equality compares
    nested = False
    is_pipeplan = _IS_PIPEPLAN
    for region in op.regions:
        block = region._first_block
        while block is not None:
            child = block._first_op
            while child is not None:
                if child.parent is not block:
                    raise ValueError("Parent pointer of operation does not refer to containing block")
                if is_pipeplan[child.__class__]:
                    level = _verify_cached(child, memo)
                    changed = changed or level == _VERIFIED
                    nested = nested or level == _ATTRIBUTES
                else:
                    child.verify()
                    changed = True
                child = child._next_op
            block = block._next_block
    if not changed and prev is not None:
        if own is None or own == prev[1]:
            return _ATTRIBUTES if nested else _UNCHANGED
        op.__dict__.pop("_pp_verified", None)
        try:
            op.verify_attributes_()  # type: ignore[attr-defined]
        except VerifyException as e:
            op.emit_error(str(e), e)
        op.__dict__["_pp_verified"] = (key, own)
        return _ATTRIBUTES
    op.__dict__.pop("_pp_verified", None)
    for region in op.regions:  # the structural checks Block.verify makes beside its ops'
        for block in region.blocks:
            if not block.ops and len(region.blocks) == 1 and not op.has_trait(NoTerminator):
                raise VerifyException(f"Operation {op.name} contains empty block in single-block region that "
                                      "expects at least a terminator")
    _fast_irdl(type(op))
    Operation.verify(op, verify_nested_ops=False)
    op.__dict__["_pp_verified"] = (key, own)
    return _VERIFIED


class LocatingParser(FastParser):
    """:class:`~pipeplan.dialects.parsing.FastParser` (xDSL's parser, faster lexer) that sets the location of every op it parses without an explicit ``loc(...)`` to
    ``FileLineColLoc(name, line, col)`` of the op's first token. ``line_offset`` is added to the line
    (``--split-input-file`` chunks). Line numbers are counted incrementally (ops are parsed in text
    order), so the cost is linear in the input."""

    def __init__(self, ctx: Context, input: str | bytes, name: str = "<unknown>", line_offset: int = 0):
        super().__init__(ctx, input, name)
        self._loc_name = StringAttr(name)
        self._loc_pos = 0
        self._loc_line = 1 + line_offset
        self._loc_text = self.lexer.input.content
        self._loc_nl: str | bytes = "\n" if isinstance(self._loc_text, str) else b"\n"

    def _location_at(self, pos: int) -> FileLineColLoc:
        text, nl = self._loc_text, self._loc_nl
        if pos >= self._loc_pos:
            self._loc_line += text.count(nl, self._loc_pos, pos)  # type: ignore[arg-type]
        else:  # not expected (ops are parsed in order); recount
            self._loc_line -= text.count(nl, pos, self._loc_pos)  # type: ignore[arg-type]
        self._loc_pos = pos
        col = pos - (text.rfind(nl, 0, pos) + 1) + 1  # type: ignore[arg-type]
        return FileLineColLoc(self._loc_name, IntAttr(self._loc_line), IntAttr(col))

    def parse_operation(self) -> Operation:
        start = self._current_token.span.start
        loc = self._location_at(start)
        try:
            op = super().parse_operation()
        except VerifyException as e:
            if isinstance(e, IRVerifyError):
                raise
            # an attribute or type verifier rejected a value while the op was parsed: a parse error at the
            # op's first line (the innermost op being parsed), not a bare message
            text, nl = self._loc_text, self._loc_nl
            end = text.find(nl, start)  # type: ignore[arg-type]
            self.raise_error(str(e).split("\n")[0] or type(e).__name__, start, end if end >= 0 else len(text))
        if isinstance(op.location, UnknownLoc):
            op.location = loc
        return op


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause CPython's cyclic garbage collector for a block, restoring its state after.

    Parsing or building thousands of (acyclic) ops triggers repeated full-heap GC scans (bench/portable_scaling.py
    and bench/plan_scaling.py measure the passes and the parse with it).
    Reference counting still frees everything; only cycle detection waits until the block ends.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def parse_located(ctx: Context, text: str | bytes, name: str = "<input>", *, line_offset: int = 0,
                  allow_implicit_module: bool = True):
    """Parse ``text`` into a ``builtin.module`` (not verified) whose ops carry their source locations. Text with no
    op (empty, or only comments) is an empty module when the module may be implicit, as in ``mlir-opt``."""
    with gc_paused():  # thousands of acyclic ops: no cyclic-GC scans while they are built
        parser = LocatingParser(ctx, text, name, line_offset)
        if allow_implicit_module and parser._current_token.kind == MLIRTokenKind.EOF:
            return ModuleOp([])
        return parser.parse_module(allow_implicit_module)


__all__ = ["IRVerifyError", "LocatingParser", "OP_TEXT_LIMIT", "OpPassError", "PipeplanOp", "contract_id",
           "format_diagnostic", "gc_paused", "located", "op_location", "op_text", "parse_located", "value_name", "verify_cached", "verify_module"]
