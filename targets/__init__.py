"""Target plugins behind small protocols (seed 003, "Legalization and implementation selection").

A target is one module of this package exposing ``PLUGIN: TargetPlugin``; add it with one line in
:data:`TARGETS`. A plugin bundles:

* its **TargetBinding** identity (architecture, runtime, capability set, library, ABI);
* a :class:`CapabilityModel` — the capability rules (implementations) it offers per portable op;
* a :class:`LegalityModel` — why a rule cannot implement a task (dtype, shape, layout, alignment,
  memory space, collective, runtime, library, ABI: AB-L-1);
* an :class:`ImplementationSelector` — preference order among legal rules, and optional rewrite
  alternatives of a task's *requirements* (never of its op, bytes, flops or collective: the
  legalize pass checks that, AB-L-2);
* a :class:`ResourceModel` — resources a candidate needs (engine, workspace bytes).

Estimate providers (:class:`EstimateProvider`) are not target-specific; they live in
:mod:`pipeplan.analysis.evidence`. Lowering and emission protocols come later.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from importlib import import_module
from typing import Protocol, runtime_checkable

from pipeplan.dialects.bindings import TargetBinding
from pipeplan.errors import PipeplanError

TARGETS: dict[str, str] = {
    "virtual-queue": "pipeplan.targets.virtual_queue:PLUGIN",
    "virtual-slot": "pipeplan.targets.virtual_slot:PLUGIN",
    "cuda-triton": "pipeplan.targets.cuda_triton:PLUGIN",
}
"""Target name -> ``module:attribute`` of its plugin (imported lazily by :func:`get_target`)."""

CPU_RUNTIME_DTYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k")
"""Weight dtypes the CPU runtime executes (reference and CPU-quantized kernel tables): the types of
llama.cpp's Q4_K_M / Q5_K_M / Q8_0 mixes. The virtual targets accept exactly these."""


class UnknownTargetError(PipeplanError):
    """A target name that no plugin module provides."""

    code = "unknown_target"


# --------------------------------------------------------------------------- values
@dataclass(frozen=True)
class TaskRequirements:
    """What a portable task needs from an implementation (normalized from a ``pplan.task``).

    ``dtypes`` are operand dtypes (reads then writes); ``shape`` the work shape; ``alignment`` in
    bytes; ``lineage`` the ``model op -> stage/block -> task`` path for diagnostics. ``rewrite``
    names the plugin alternative that produced these requirements ("" for the task as written).
    """

    task: str
    op: str
    dtypes: tuple[str, ...]
    shape: tuple[int, ...]
    layout: str
    alignment: int
    memspace: str
    collective: str
    flops: int
    bytes_read: int
    bytes_written: int
    lineage: str
    rewrite: str = ""

    def semantic_key(self) -> tuple:
        """The part no rewrite may change (AB-L-2): op, flops, bytes, collective, dtypes, shape."""
        return (self.op, self.flops, self.bytes_read, self.bytes_written, self.collective, self.dtypes, self.shape)


@dataclass(frozen=True)
class CapabilityRule:
    """One implementation a target offers.

    Attributes:
        name: rule id (e.g. ``vq.matmul``); impl: implementation id; op: portable op it implements.
        dtypes: operand dtypes it accepts (every operand must be one of them).
        layouts, memspaces: accepted layouts / memory spaces. min_alignment: bytes.
        collective: the task collective kind it implements (``none``, ``send``, ``recv``).
        max_rank: largest work-shape rank; shape_multiple: every work-shape dim except the first
            must be a multiple of it (1 = any).
        runtime, library, abi: what the rule requires of the TargetBinding.
        engine: the engine/queue/slot class it occupies; workspace_per_byte: scratch bytes per
            byte read (ResourceModel); preference: lower is preferred.
    """

    name: str
    impl: str
    op: str
    dtypes: frozenset[str]
    runtime: str
    library: str
    abi: str
    layouts: frozenset[str] = frozenset({"row_major"})
    memspaces: frozenset[str] = frozenset({"device"})
    min_alignment: int = 1
    collective: str = "none"
    max_rank: int = 3
    shape_multiple: int = 1
    engine: str = "compute"
    workspace_per_byte: float = 0.0
    preference: int = 0


@dataclass(frozen=True)
class Candidate:
    """A legal (task, rule) pair with the requirements it was checked under and its resources."""

    task: str
    rule: CapabilityRule
    requirements: TaskRequirements
    resources: dict[str, int | str] = field(default_factory=dict)


# --------------------------------------------------------------------------- protocols
@runtime_checkable
class CapabilityModel(Protocol):
    """The capability rules a target offers for a portable op."""

    def rules_for(self, op: str) -> Sequence[CapabilityRule]: ...


@runtime_checkable
class LegalityModel(Protocol):
    """Why ``rule`` cannot implement ``task`` under ``binding`` (empty tuple: legal)."""

    def check(self, task: TaskRequirements, rule: CapabilityRule, binding: TargetBinding) -> tuple[str, ...]: ...


@runtime_checkable
class ImplementationSelector(Protocol):
    """Rewrite alternatives of a task's requirements, and the preference order of candidates."""

    def alternatives(self, task: TaskRequirements) -> Sequence[TaskRequirements]: ...

    def rank(self, task: TaskRequirements, candidates: Sequence[Candidate]) -> list[Candidate]: ...


@runtime_checkable
class EstimateProvider(Protocol):
    """Prices a normalized estimate request (see :mod:`pipeplan.analysis.evidence`)."""

    name: str

    def estimate(self, request): ...  # -> Estimate | None

    def fingerprint(self) -> str: ...


@runtime_checkable
class ResourceModel(Protocol):
    """Resources a candidate requires (engine, workspace bytes, ...)."""

    def resources(self, task: TaskRequirements, rule: CapabilityRule) -> dict[str, int | str]: ...


@dataclass(frozen=True)
class TargetPlugin:
    """A target: its binding identity and its models. ``revision`` enters candidate provenance."""

    name: str
    revision: str
    binding: TargetBinding
    capability: CapabilityModel
    legality: LegalityModel
    selector: ImplementationSelector
    resources: ResourceModel


# --------------------------------------------------------------------------- standard models
class RuleTable:
    """CapabilityModel over a fixed tuple of rules."""

    def __init__(self, rules: Sequence[CapabilityRule]):
        self._by_op: dict[str, list[CapabilityRule]] = {}
        for r in rules:
            self._by_op.setdefault(r.op, []).append(r)

    def rules_for(self, op: str) -> Sequence[CapabilityRule]:
        """Rules implementing ``op``, in declaration order (empty when the target has none)."""
        return self._by_op.get(op, ())


class StandardLegality:
    """The AB-L-1 checks, in a fixed order; each failing constraint yields one reason."""

    def check(self, task: TaskRequirements, rule: CapabilityRule, binding: TargetBinding) -> tuple[str, ...]:
        """Reasons ``rule`` cannot implement ``task`` on ``binding``; empty when legal."""
        caps = set(binding.capabilities)
        reasons: list[str] = []
        bad = [d for d in dict.fromkeys(task.dtypes) if d not in rule.dtypes or f"dtype:{d}" not in caps]
        if bad:
            reasons.append(f"dtype {', '.join(bad)} unsupported (rule accepts {', '.join(sorted(rule.dtypes))})")
        if len(task.shape) > rule.max_rank or any(d <= 0 for d in task.shape) or (
                rule.shape_multiple > 1 and any(d % rule.shape_multiple for d in task.shape[1:])):
            reasons.append(f"shape {list(task.shape)} unsupported (rank <= {rule.max_rank}, dims after the first "
                           f"multiple of {rule.shape_multiple})")
        if task.layout not in rule.layouts:
            reasons.append(f"layout {task.layout} unsupported")
        if task.alignment < rule.min_alignment:
            reasons.append(f"alignment {task.alignment} below required {rule.min_alignment}")
        if task.memspace not in rule.memspaces or f"memspace:{task.memspace}" not in caps:
            reasons.append(f"memory space {task.memspace} unsupported")
        if task.collective != rule.collective:
            reasons.append(f"collective {task.collective} does not match rule collective {rule.collective}")
        if rule.runtime != binding.runtime:
            reasons.append(f"runtime {binding.runtime} is not the rule's {rule.runtime}")
        if rule.library != binding.library:
            reasons.append(f"library {binding.library} is not the rule's {rule.library}")
        if rule.abi != binding.abi:
            reasons.append(f"ABI {binding.abi} is not the rule's {rule.abi}")
        return tuple(reasons)


class PreferenceSelector:
    """No rewrites (unless ``alignments`` is given: offer the task at each stricter operand
    alignment, a requirement-only rewrite); rank by rule preference, then rule name."""

    def __init__(self, alignments: Sequence[int] = ()):
        self._alignments = tuple(alignments)

    def alternatives(self, task: TaskRequirements) -> Sequence[TaskRequirements]:
        """Requirement rewrites: the same task with operands aligned to each stricter alignment."""
        return [replace(task, alignment=a, rewrite=f"align {a}") for a in self._alignments if a > task.alignment]

    def rank(self, task: TaskRequirements, candidates: Sequence[Candidate]) -> list[Candidate]:
        """Candidates by (rewrite needed, preference, name): unrewritten, preferred rules first."""
        return sorted(candidates, key=lambda c: (c.requirements.rewrite != "", c.rule.preference, c.rule.name))


class EngineResources:
    """ResourceModel: the rule's engine plus ``workspace_per_byte * bytes_read`` scratch bytes."""

    def resources(self, task: TaskRequirements, rule: CapabilityRule) -> dict[str, int | str]:
        """``{"engine": rule.engine, "workspace_bytes": int}``."""
        return {"engine": rule.engine, "workspace_bytes": int(rule.workspace_per_byte * task.bytes_read)}


def standard_capabilities(dtypes: Sequence[str], engine: str) -> tuple[str, ...]:
    """The capability set of a TargetBinding whose kernels take ``dtypes`` (plus i32 token ids) in device
    and link memory, row-major, with send/recv collectives, on engines of kind ``engine``."""
    return tuple(f"dtype:{d}" for d in (*dtypes, "i32")) + (
        "memspace:device", "memspace:link", "layout:row_major", "collective:send", "collective:recv", f"engine:{engine}")


def standard_rules(prefix: str, *, compute_dtypes: Sequence[str], runtime: str, library: str, abi: str,
                   engine: str = "compute", copy_engine: str = "copy", min_alignment: int = 1,
                   link_memspace: str = "link") -> list[CapabilityRule]:
    """One rule per portable op for a target whose kernels accept ``compute_dtypes`` (plus i32 ids),
    and send/recv rules on ``copy_engine`` over the ``link`` memory space. Helper for plugins."""
    dts = frozenset(compute_dtypes) | {"i32"}
    common = {"runtime": runtime, "library": library, "abi": abi, "min_alignment": min_alignment}
    ops = ("embedding_gather", "rms_norm", "matmul", "rope", "kv_cache_write", "attention", "silu_mul", "add",
           "argmax", "last_row", "head_rms_norm", "gelu_mul", "add_bias")
    rules = [CapabilityRule(f"{prefix}.{op}", f"{prefix}.{op}", op, dts, engine=engine, **common)  # type: ignore[arg-type]
             for op in ops]
    for op in ("send", "recv"):
        rules.append(CapabilityRule(f"{prefix}.{op}", f"{prefix}.{op}", op, dts, collective=op,
                                    memspaces=frozenset({link_memspace}), engine=copy_engine, **common))  # type: ignore[arg-type]
    return rules


def get_target(name: str) -> TargetPlugin:
    """The plugin called ``name``.

    Raises:
        UnknownTargetError: no such target (the message lists the known ones).
    """
    spec = TARGETS.get(name)
    if spec is None:
        raise UnknownTargetError(f"unknown target {name!r}; known targets: {', '.join(sorted(TARGETS))}",
                                 where=name)
    module, attr = spec.split(":")
    return getattr(import_module(module), attr)


__all__ = ["TARGETS", "CPU_RUNTIME_DTYPES", "UnknownTargetError", "TaskRequirements", "CapabilityRule", "Candidate", "CapabilityModel",
           "LegalityModel", "ImplementationSelector", "EstimateProvider", "ResourceModel", "TargetPlugin",
           "RuleTable", "StandardLegality", "PreferenceSelector", "EngineResources", "standard_rules", "get_target"]
