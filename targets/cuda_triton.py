"""CUDA/Triton target ``cuda-triton``: capabilities are the Triton kernels pipeplan writes.

The legality reads the same table as the kernels and the ``convert-cplan-to-triton`` lowering
(:mod:`pipeplan.targets.triton_formats`), so every task it accepts lowers (issue 11 item 8):
one rule per op of :data:`~pipeplan.targets.triton_formats.OPERANDS` whose dtypes are that op's
operand dtypes, and :class:`TritonLegality` adds the per-operand check
(:func:`~pipeplan.targets.triton_formats.unsupported`: activations f32, matmul weights and
embedding tables F32/F16/BF16/Q8_0/Q4_0/Q4_1/Q5_0/Q5_1/Q4_K/Q5_K/Q6_K with a row length that is a whole
number of blocks, norm weights and biases f32). Operands live in device memory, row-major, 16-byte
aligned (Triton's vectorized loads). Matmuls have two implementations: the dequantize-in-the-loop
GEMV/GEMM (``triton.matmul``, preferred) and, for F32/F16/BF16 weights only, a tensor-core GEMM
(``triton.matmul_tc``) that needs 128-byte alignment — offered through a requirement-only alignment
rewrite. Edge transfers use the copy engine over the link.
"""

from __future__ import annotations

from dataclasses import replace

from pipeplan.dialects.bindings import TargetBinding
from pipeplan.targets import (
    CapabilityRule,
    EngineResources,
    PreferenceSelector,
    RuleTable,
    StandardLegality,
    TargetPlugin,
    TaskRequirements,
    standard_capabilities,
)
from pipeplan.targets.triton_formats import (
    DTYPES,
    OPERANDS,
    ROLE_DTYPES,
    TC_SHAPE_MULTIPLE,
    TC_WEIGHTS,
    unsupported,
)

REVISION = "cuda-triton@1"

BINDING = TargetBinding(
    target="cuda-triton", architecture="nvidia-sm80+", runtime="cuda-12",
    capabilities=standard_capabilities(DTYPES, "stream"),
    library="triton", library_version="3.9", abi="triton-3.9-ptx", plugin_revision=REVISION)


def _rule(op: str) -> CapabilityRule:
    dts = frozenset(d for role in OPERANDS[op] for d in ROLE_DTYPES[role])
    common = {"runtime": BINDING.runtime, "library": BINDING.library, "abi": BINDING.abi, "min_alignment": 16}
    if op in ("send", "recv"):
        return CapabilityRule(f"triton.{op}", f"triton.{op}", op, dts, collective=op, memspaces=frozenset({"link"}),
                              engine="cuda.copy", **common)  # type: ignore[arg-type]
    return CapabilityRule(f"triton.{op}", f"triton.{op}", op, dts, engine="cuda.stream",
                          workspace_per_byte=0.125 if op == "attention" else 0.0, **common)  # type: ignore[arg-type]


_RULES = [_rule(op) for op in OPERANDS]
_mm = next(r for r in _RULES if r.op == "matmul")
_RULES.append(replace(_mm, name="triton.matmul_tc", impl="triton.matmul_tc", dtypes=frozenset(TC_WEIGHTS),
                      min_alignment=128, shape_multiple=TC_SHAPE_MULTIPLE, preference=1, workspace_per_byte=0.0))

RULES: tuple[CapabilityRule, ...] = tuple(_RULES)
"""The target's capability rules (one per op, plus ``triton.matmul_tc``)."""


class TritonLegality(StandardLegality):
    """The AB-L-1 checks of :class:`StandardLegality`; a task they pass must also pass the Triton kernels'
    own operand table (:func:`~pipeplan.targets.triton_formats.unsupported`, the check the
    lowering makes), whose reason is then the one given."""

    def check(self, task: TaskRequirements, rule: CapabilityRule, binding: TargetBinding) -> tuple[str, ...]:
        """Reasons ``rule`` cannot implement ``task`` on ``binding``; empty when legal."""
        reasons = super().check(task, rule, binding)
        if reasons:
            return reasons
        why = unsupported(task.op, task.dtypes, task.shape, rule.impl)
        return () if why is None else (f"no Triton kernel for {why}",)


PLUGIN = TargetPlugin(
    name="cuda-triton", revision=REVISION, binding=BINDING, capability=RuleTable(_RULES),
    legality=TritonLegality(), selector=PreferenceSelector(alignments=(128,)), resources=EngineResources())
"""The cuda-triton plugin."""

__all__ = ["PLUGIN", "BINDING", "DTYPES", "RULES", "CapabilityRule", "TritonLegality"]
