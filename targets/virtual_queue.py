"""Queue-centric virtual target ``virtual-queue`` (seed 003, "First implementation milestone" 1).

A reference target whose commands run on in-order queues: a ``compute`` queue for kernels and a
``copy`` queue for edge transfers. Its kernel library is the CPU runtime's (reference and
CPU-quantized tables) for exactly the dtypes that runtime executes (``CPU_RUNTIME_DTYPES``: F32, F16,
BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K); any other type (Q2_K, IQ4_NL, ...) fails
legalization with a lineage diagnostic rather than a silent generic kernel.
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
REVISION = "virtual-queue@1"

BINDING = TargetBinding(
    target="virtual-queue", architecture="virtual-queue", runtime="vq-runtime-1",
    capabilities=standard_capabilities(DTYPES, "queue"),
    library="pipeplan-vq-kernels", library_version="1", abi="vq-abi-1", plugin_revision=REVISION)

PLUGIN = TargetPlugin(
    name="virtual-queue", revision=REVISION, binding=BINDING,
    capability=RuleTable(standard_rules("vq", compute_dtypes=DTYPES, runtime=BINDING.runtime,
                                        library=BINDING.library, abi=BINDING.abi, engine="queue.compute",
                                        copy_engine="queue.copy")),
    legality=StandardLegality(), selector=PreferenceSelector(), resources=EngineResources())
"""The virtual-queue plugin."""
