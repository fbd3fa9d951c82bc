"""Pieces the 1:1 machine lowerings share (``convert-cplan-to-vmachine``, ``convert-cplan-to-triton``).

Both lower in two phases (seeds/003 "Machine lowering and artifact emission", AB-M-1): a placement
builds the program's skeleton (buffers, tokens, queues/streams) and moves each ``cplan.command`` into
the container its instruction goes in, then one :class:`LowerPlacedCommand` ``RewritePattern``, driven
by a ``PatternRewriteWalker`` (:func:`lower_placed`), replaces each placed command by its one
instruction. Kernel-call attributes come from the model kernel ABI's hyper-parameters through
:func:`~pipeplan.models.stage_program.kernel_attrs` (:func:`call_attrs`): no lowering builds the
runtime's stage program.
"""

from __future__ import annotations

import re
from abc import abstractmethod
from collections.abc import Iterable, Sequence
from typing import TypeVar

from pipeplan.dialects.cplan import CommandOp
from pipeplan.errors import PipeplanError
from pipeplan.models.stage_program import (
    FrozenAttrs,
    HParams,
    ProgramError,
    check_stage_range,
    kernel_attrs,
    kernel_role,
)
from xdsl.ir import Attribute, Operation, Region, SSAValue
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

_Op = TypeVar("_Op", bound=Operation)
BLK = re.compile(r"^blk\.(\d+)\.")
"""A GGUF block's buffer or tensor name: ``blk.<N>.<rest>``."""


class UnsupportedPlanError(PipeplanError):
    """A concrete plan a machine target cannot lower: a command without a step, an allocation without a
    runtime binding name, a stage on two devices, non-contiguous blocks, a layer range the ABI has no
    program for, a buffer that is not an allocation (the message names the command and its lineage, or the
    stage)."""

    code = "unsupported_plan"


def new_op(cls: type[_Op], operands: Sequence[SSAValue], props: dict[str, Attribute],
           results: Sequence[Attribute] = ()) -> _Op:
    """An op of ``cls`` with operands, properties and result types as given, without the builder's argument
    checks and reordering: the caller lists the properties in the op's declaration order (segment sizes
    last), as ``create`` stores them. Verification is the op verifier's, as for any op."""
    op = cls.__new__(cls)
    Operation.__init__(op, operands=operands, result_types=results, properties=props)
    return op


def block_of(names: Iterable[str]) -> int | None:
    """The GGUF block of the first ``blk.<N>.`` name of ``names`` (None: no block name)."""
    for n in names:
        m = BLK.match(n)
        if m:
            return int(m.group(1))
    return None


def call_attrs(hp: HParams, kernel: str, block: int | None, output: str) -> FrozenAttrs:
    """The static attributes of the ``kernel`` call of ``block`` writing ``output`` (its role:
    :func:`~pipeplan.models.stage_program.kernel_role`), from the ABI's hyper-parameters.

    Raises UnservedKernelError (a call the model's stage program cannot hold) or
    UnsupportedArchitectureError."""
    return kernel_attrs(hp, kernel, block, kernel_role(kernel, output))


def stage_layer_range(hp: HParams, stage: int, blocks: Iterable[int], first: bool, last: bool,
                      max_seq_len: int) -> tuple[int, int]:
    """The layer range ``[start, end)`` of a stage whose commands name ``blocks`` (``(0, 0)`` for none),
    checked for the ABI (``check_stage_range``: inside ``[0, n_layer)``, not empty on a middle stage).

    Raises UnsupportedPlanError: blocks that are not a contiguous range, a range the model
    ABI has no stage program for (the message names the stage)."""
    bs = sorted(set(blocks))
    ls, le = (bs[0], bs[-1] + 1) if bs else (0, 0)
    if bs and bs != list(range(ls, le)):
        raise UnsupportedPlanError(f"stage {stage} uses blocks {bs}, not a contiguous range", where=f"stage {stage}")
    try:
        check_stage_range(hp, ls, le, first, last, max_seq_len)
    except ProgramError as err:
        raise UnsupportedPlanError(f"stage {stage}: the model ABI has no stage program for blocks [{ls}, {le}): "
                                   f"{err.message}", where=f"stage {stage}") from None
    return ls, le


class LowerPlacedCommand(RewritePattern):
    """Base of the lowerings' ``LowerCommand``: a ``cplan.command`` whose parent is a ``container`` op (placed
    there by the placement) is replaced by :meth:`lower`'s one instruction; commands elsewhere do not match.
    The command's timepoint has no uses left (the placement resolved its dependencies)."""

    container: type[Operation] = Operation

    @abstractmethod
    def lower(self, op: CommandOp) -> Operation:
        """The instruction of placed command ``op`` (raises the lowering's error)."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: CommandOp, rewriter: PatternRewriter) -> None:
        if not isinstance(op.parent_op(), self.container):
            return
        rewriter.replace(op, self.lower(op), new_results=[None])


def lower_placed(region: Region, pattern: LowerPlacedCommand) -> CommandOp | None:
    """Apply ``pattern`` to every placed command of ``region`` (one forward walk, no re-application: each
    command is lowered once, in program order); the first command left unlowered, or None."""
    PatternRewriteWalker(pattern, apply_recursively=False).rewrite_region(region)
    return next((o for o in region.walk() if isinstance(o, CommandOp)), None)
