"""Slot/dataflow virtual target ``virtual-slot`` (seed 003, "First implementation milestone" 1).

A non-queue reference target: each task fires in a dataflow slot when its inputs are ready. Its
kernel library is the CPU runtime's (``CPU_RUNTIME_DTYPES``: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0,
Q5_1, Q4_K, Q5_K, Q6_K) and needs 64-byte aligned operands; the selector
offers a requirement-only rewrite (operands realigned to 64 bytes) for tasks stated with a weaker
alignment, which never changes the task's op, bytes or flops.
"""

from __future__ import annotations

from pipeplan.dialects.bindings import TargetBinding
from pipeplan.targets import (
    CPU_RUNTIME_DTYPES,
    EngineResources,
    PreferenceSelector,
    RuleTable,
    StandardLegality,
    TargetPlugin,
    standard_capabilities,
    standard_rules,
)

DTYPES = CPU_RUNTIME_DTYPES
REVISION = "virtual-slot@1"

BINDING = TargetBinding(
    target="virtual-slot", architecture="virtual-slot", runtime="vs-runtime-1",
    capabilities=standard_capabilities(DTYPES, "slot"),
    library="pipeplan-vs-kernels", library_version="1", abi="vs-abi-1", plugin_revision=REVISION)

PLUGIN = TargetPlugin(
    name="virtual-slot", revision=REVISION, binding=BINDING,
    capability=RuleTable(standard_rules("vs", compute_dtypes=DTYPES, runtime=BINDING.runtime,
                                        library=BINDING.library, abi=BINDING.abi, engine="slot.dataflow",
                                        copy_engine="slot.link", min_alignment=64)),
    legality=StandardLegality(), selector=PreferenceSelector(alignments=(64,)), resources=EngineResources())
"""The virtual-slot plugin."""
