"""CUDA/Triton target ``cuda-triton``: capabilities are the Triton kernels pipeplan writes.

Kernels take F32/F16/BF16 activations and F32/F16/BF16/Q8_0/Q4_0/Q4_K weights in device memory,
row-major, 16-byte aligned (Triton's vectorized loads). Matmuls have two implementations: a
dequantize-in-the-loop GEMV/GEMM (``triton.matmul``, preferred) and, for F16/BF16 weights only, a
tensor-core GEMM (``triton.matmul_tc``) that needs 128-byte alignment — offered through a
requirement-only alignment rewrite. Edge transfers use the copy engine over the link.
"""

from __future__ import annotations

from dataclasses import replace

from pipeplan.dialects.bindings import TargetBinding
from pipeplan.lowering.targets import (
    CapabilityRule,
    EngineResources,
    PreferenceSelector,
    RuleTable,
    StandardLegality,
    TargetPlugin,
    standard_capabilities,
    standard_rules,
)

DTYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_k")
REVISION = "cuda-triton@1"

BINDING = TargetBinding(
    target="cuda-triton", architecture="nvidia-sm80+", runtime="cuda-12",
    capabilities=standard_capabilities(DTYPES, "stream"),
    library="triton", library_version="3.9", abi="triton-3.9-ptx", plugin_revision=REVISION)

_RULES = standard_rules("triton", compute_dtypes=DTYPES, runtime=BINDING.runtime, library=BINDING.library,
                        abi=BINDING.abi, engine="cuda.stream", copy_engine="cuda.copy", min_alignment=16)
_mm = next(r for r in _RULES if r.op == "matmul")
_RULES.append(replace(_mm, name="triton.matmul_tc", impl="triton.matmul_tc", dtypes=frozenset({"f16", "bf16", "f32"}),
                      min_alignment=128, shape_multiple=16, preference=1, workspace_per_byte=0.0))
_RULES = [replace(r, workspace_per_byte=0.125) if r.op == "attention" else r for r in _RULES]

PLUGIN = TargetPlugin(
    name="cuda-triton", revision=REVISION, binding=BINDING, capability=RuleTable(_RULES),
    legality=StandardLegality(), selector=PreferenceSelector(alignments=(128,)), resources=EngineResources())
"""The cuda-triton plugin."""

__all__ = ["PLUGIN", "BINDING", "DTYPES", "CapabilityRule"]
