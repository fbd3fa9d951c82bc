"""The binding gate's three explicit inputs (seed 003, "Binding gate"; AB-G-1, AB-G-4).

* **TargetBinding** — architecture, runtime, capability set, library and ABI identity of a target
  (produced by a target plugin, :mod:`pipeplan.targets`).
* **DeploymentBinding** — device instances (capacity and peaks), topology, the stage -> device
  assignment the RunPlan fixed, and reservations (bytes already claimed per device: weights + KV).
  Built from the node pool (:meth:`DeploymentBinding.from_pool`).
* **EvidencePolicy** — permitted providers in order, uncertainty budget, fallback rule,
  freshness and revision.

Each is a frozen Python value *and* a module-level op of the ``pplan`` dialect (``to_op`` /
``from_op`` are exact inverses) whose properties use MLIR-parseable carriers, so a binding can be
written into a ``.mlir`` file by hand. A pass that needs a binding looks it up in the module with
:func:`require_binding`; a missing one raises ``PassFailedException("missing binding: ...")``
naming it — nothing is ever read from process-global state. The sha256 of a binding op's canonical
print is its fingerprint (recorded as provenance by cost resolution, AB-G-3).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pipeplan.dialects.carriers import string_elements, strings
from pipeplan.dialects.diagnostics import PipeplanOp
from pipeplan.plan_types import NodePool
from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    DictionaryAttr,
    FloatAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    SymbolNameConstraint,
    f64,
    i64,
)
from xdsl.ir import Attribute, Operation
from xdsl.irdl import IRDLOperation, ParsePropInAttrDict, irdl_op_definition, prop_def, traits_def
from xdsl.traits import SymbolOpInterface
from xdsl.utils.exceptions import PassFailedException, VerifyException


# --------------------------------------------------------------------------- TargetBinding
@irdl_op_definition
class TargetBindingOp(PipeplanOp):
    """TargetBinding: the identity of the target a plan is legalized for (AB-G-1).

    Properties: ``target`` (plugin name), ``architecture``, ``runtime``, ``capabilities`` (the
    capability set, e.g. dtypes and memory spaces it offers), ``library`` + ``library_version``,
    ``abi``, ``plugin_revision``.

    Example:
    ```mlir
    pplan.target_binding @target {abi = "vq-abi-1", architecture = "virtual-queue", capabilities = ["dtype:f32"],
      library = "pipeplan-virtual", library_version = "1", plugin_revision = "virtual-queue@1",
      runtime = "vq-runtime-1", target = "virtual-queue"}
    ```
    """

    name = "pplan.target_binding"

    sym_name = prop_def(SymbolNameConstraint())
    target = prop_def(StringAttr)
    architecture = prop_def(StringAttr)
    runtime = prop_def(StringAttr)
    capabilities = prop_def(ArrayAttr[StringAttr])
    library = prop_def(StringAttr)
    library_version = prop_def(StringAttr)
    abi = prop_def(StringAttr)
    plugin_revision = prop_def(StringAttr)

    traits = traits_def(SymbolOpInterface())
    assembly_format = "$sym_name attr-dict"
    irdl_options = (ParsePropInAttrDict(),)


@dataclass(frozen=True)
class TargetBinding:
    """Python value of ``pplan.target_binding``. Capabilities are tokens such as ``dtype:q4_k``,
    ``memspace:device``, ``layout:row_major``, ``collective:send``."""

    target: str
    architecture: str
    runtime: str
    capabilities: tuple[str, ...]
    library: str
    library_version: str
    abi: str
    plugin_revision: str

    def to_op(self, sym: str = "target") -> TargetBindingOp:
        """The binding as an op named ``@sym``."""
        s = StringAttr
        return TargetBindingOp.create(properties={
            "sym_name": s(sym), "target": s(self.target), "architecture": s(self.architecture),
            "runtime": s(self.runtime), "capabilities": strings(self.capabilities), "library": s(self.library),
            "library_version": s(self.library_version), "abi": s(self.abi),
            "plugin_revision": s(self.plugin_revision)})

    @staticmethod
    def from_op(op: TargetBindingOp) -> TargetBinding:
        """Inverse of :meth:`to_op`."""
        return TargetBinding(op.target.data, op.architecture.data, op.runtime.data, string_elements(op.capabilities),
                             op.library.data, op.library_version.data, op.abi.data, op.plugin_revision.data)


# --------------------------------------------------------------------------- DeploymentBinding
_DEVICE_INT = ("memory_bytes", "reserved_bytes")
_DEVICE_FLOAT = ("flops_per_s", "bandwidth_bytes_per_s", "link_bandwidth_bytes_per_s")


@dataclass(frozen=True)
class DeviceInstance:
    """One device of a deployment. Peaks in FLOP/s and bytes/s; 0.0 means "not stated" (a
    provider that needs it reports the missing field, it never assumes one)."""

    id: str
    memory_bytes: int
    reserved_bytes: int = 0
    flops_per_s: float = 0.0
    bandwidth_bytes_per_s: float = 0.0
    link_bandwidth_bytes_per_s: float = 0.0


@irdl_op_definition
class DeploymentBindingOp(PipeplanOp):
    """DeploymentBinding: device instances, topology, capacity and reservations (AB-G-1).

    Properties: ``devices`` (array of dictionaries ``{id, memory_bytes, reserved_bytes, flops_per_s,
    bandwidth_bytes_per_s, link_bandwidth_bytes_per_s}``), ``stage_devices`` (device id of each
    RunPlan stage, in stage order), ``topology`` (``chain``: stage i links to stage i+1).
    Verifier: device ids unique, every stage device declared, reservations within capacity.

    Example:
    ```mlir
    pplan.deployment_binding @deployment {devices = [{bandwidth_bytes_per_s = 1.0e+11 : f64, flops_per_s = 1.0e+12 : f64,
      id = "n0", link_bandwidth_bytes_per_s = 1.0e+09 : f64, memory_bytes = 1000000 : i64, reserved_bytes = 0 : i64}],
      stage_devices = ["n0"], topology = "chain"}
    ```
    """

    name = "pplan.deployment_binding"

    sym_name = prop_def(SymbolNameConstraint())
    devices = prop_def(ArrayAttr)
    stage_devices = prop_def(ArrayAttr[StringAttr])
    topology = prop_def(StringAttr)

    traits = traits_def(SymbolOpInterface())
    assembly_format = "$sym_name attr-dict"
    irdl_options = (ParsePropInAttrDict(),)

    def verify_(self) -> None:
        DeploymentBinding.from_op(self)  # raises VerifyException on malformed entries


@dataclass(frozen=True)
class DeploymentBinding:
    """Python value of ``pplan.deployment_binding``."""

    devices: tuple[DeviceInstance, ...]
    stage_devices: tuple[str, ...]
    topology: str = "chain"

    def device(self, device_id: str) -> DeviceInstance:
        """The device called ``device_id``. Raises KeyError."""
        for d in self.devices:
            if d.id == device_id:
                return d
        raise KeyError(device_id)

    def stage_device(self, stage: int) -> DeviceInstance:
        """The device stage ``stage`` runs on. Raises KeyError when the binding has no such stage."""
        if not 0 <= stage < len(self.stage_devices):
            raise KeyError(f"stage {stage}")
        return self.device(self.stage_devices[stage])

    @staticmethod
    def from_pool(pool: NodePool, stage_nodes: Sequence[str],
                  reservations: dict[str, int] | None = None) -> DeploymentBinding:
        """Build from the node pool (capacity and peaks of every node) and the stage -> node
        assignment of a RunPlan. ``reservations`` maps node id -> bytes already claimed.

        Raises:
            KeyError: a stage node that is not in the pool.
        """
        res = reservations or {}
        devs = tuple(DeviceInstance(n.id, n.memory_bytes, res.get(n.id, 0), n.flops_per_s or 0.0,
                                    n.bandwidth_bytes_per_s or 0.0, n.link_bandwidth_bytes_per_s or 0.0)
                     for n in pool.nodes)
        ids = {d.id for d in devs}
        for s in stage_nodes:
            if s not in ids:
                raise KeyError(f"stage node {s!r} is not in the node pool")
        return DeploymentBinding(devs, tuple(stage_nodes))

    def to_op(self, sym: str = "deployment") -> DeploymentBindingOp:
        """The binding as an op named ``@sym``."""
        devs = []
        for d in self.devices:
            entry: dict[str, Attribute] = {"id": StringAttr(d.id)}
            for k in _DEVICE_INT:
                entry[k] = IntegerAttr(getattr(d, k), i64)
            for k in _DEVICE_FLOAT:
                entry[k] = FloatAttr(float(getattr(d, k)), f64)
            devs.append(DictionaryAttr(dict(sorted(entry.items()))))  # sorted: MLIR's dictionary order
        return DeploymentBindingOp.create(properties={
            "sym_name": StringAttr(sym), "devices": ArrayAttr(devs), "stage_devices": strings(self.stage_devices),
            "topology": StringAttr(self.topology)})

    @staticmethod
    def from_op(op: DeploymentBindingOp) -> DeploymentBinding:
        """Inverse of :meth:`to_op`. Raises VerifyException naming the malformed entry."""
        devs: list[DeviceInstance] = []
        for k, a in enumerate(op.devices.data):
            if not isinstance(a, DictionaryAttr):
                raise VerifyException(f"deployment binding: devices[{k}] is not a dictionary")
            d = a.data
            vals: dict[str, object] = {}
            ident = d.get("id")
            if not isinstance(ident, StringAttr):
                raise VerifyException(f"deployment binding: devices[{k}] lacks a string 'id'")
            vals["id"] = ident.data
            for key in _DEVICE_INT:
                v = d.get(key)
                if not isinstance(v, IntegerAttr) or v.value.data < 0:
                    raise VerifyException(f"deployment binding: devices[{k}] ({vals['id']}) needs a non-negative "
                                          f"integer {key!r}")
                vals[key] = v.value.data
            for key in _DEVICE_FLOAT:
                v = d.get(key)
                if not isinstance(v, FloatAttr) or v.value.data < 0:
                    raise VerifyException(f"deployment binding: devices[{k}] ({vals['id']}) needs a non-negative "
                                          f"float {key!r}")
                vals[key] = v.value.data
            dev = DeviceInstance(**vals)  # type: ignore[arg-type]
            if dev.reserved_bytes > dev.memory_bytes:
                raise VerifyException(f"deployment binding: device {dev.id} reserves {dev.reserved_bytes} bytes "
                                      f"but has capacity {dev.memory_bytes}")
            devs.append(dev)
        ids = [d.id for d in devs]
        if len(set(ids)) != len(ids):
            raise VerifyException(f"deployment binding: duplicate device ids in {ids}")
        stages = string_elements(op.stage_devices)
        for i, s in enumerate(stages):
            if s not in ids:
                raise VerifyException(f"deployment binding: stage {i} device {s!r} is not a declared device")
        if op.topology.data != "chain":
            raise VerifyException(f"deployment binding: topology {op.topology.data!r} is not supported (chain)")
        return DeploymentBinding(tuple(devs), stages, op.topology.data)


# --------------------------------------------------------------------------- EvidencePolicy
FALLBACK_RULES = ("allow", "forbid")


@irdl_op_definition
class EvidencePolicyOp(PipeplanOp):
    """EvidencePolicy: which evidence may price a plan, and how (AB-G-1, AB-C-3).

    Properties: ``providers`` (ordered: ``roofline`` or ``measured:<json file>``; the first is the
    primary), ``uncertainty_budget`` (largest accepted ``1 - confidence`` of any estimate, in
    [0, 1]), ``fallback`` (``allow``: a task the primary cannot price in-domain is priced by the
    next provider, marked ``fallback``; ``forbid``: that is a diagnostic), ``max_age_s``
    (freshness of measured tables, 0 = any age), ``revision``.

    Example:
    ```mlir
    pplan.evidence_policy @policy {fallback = "allow", max_age_s = 0 : i64, providers = ["roofline"],
      revision = "r1", uncertainty_budget = 1.000000e+00 : f64}
    ```
    """

    name = "pplan.evidence_policy"

    sym_name = prop_def(SymbolNameConstraint())
    providers = prop_def(ArrayAttr[StringAttr])
    uncertainty_budget = prop_def(FloatAttr)
    fallback = prop_def(StringAttr)
    max_age_s = prop_def(IntegerAttr[I64])
    revision = prop_def(StringAttr)

    traits = traits_def(SymbolOpInterface())
    assembly_format = "$sym_name attr-dict"
    irdl_options = (ParsePropInAttrDict(),)

    def verify_(self) -> None:
        provs = string_elements(self.providers)
        if not provs:
            raise VerifyException("evidence policy: at least one provider is required")
        for p in provs:
            if p != "roofline" and not (p.startswith("measured:") and len(p) > len("measured:")):
                raise VerifyException(f"evidence policy: unknown provider {p!r} (roofline | measured:<file>)")
        if self.fallback.data not in FALLBACK_RULES:
            raise VerifyException(f"evidence policy: fallback {self.fallback.data!r} is not one of {list(FALLBACK_RULES)}")
        if not 0.0 <= self.uncertainty_budget.value.data <= 1.0:
            raise VerifyException("evidence policy: uncertainty_budget must be in [0, 1]")
        if self.max_age_s.value.data < 0:
            raise VerifyException("evidence policy: max_age_s must be >= 0")


@dataclass(frozen=True)
class EvidencePolicy:
    """Python value of ``pplan.evidence_policy``."""

    providers: tuple[str, ...]
    uncertainty_budget: float = 1.0
    fallback: str = "allow"
    max_age_s: int = 0
    revision: str = "r1"

    def to_op(self, sym: str = "policy") -> EvidencePolicyOp:
        """The policy as an op named ``@sym``."""
        return EvidencePolicyOp.create(properties={
            "sym_name": StringAttr(sym), "providers": strings(self.providers),
            "uncertainty_budget": FloatAttr(float(self.uncertainty_budget), f64),
            "fallback": StringAttr(self.fallback), "max_age_s": IntegerAttr(self.max_age_s, i64),
            "revision": StringAttr(self.revision)})

    @staticmethod
    def from_op(op: EvidencePolicyOp) -> EvidencePolicy:
        """Inverse of :meth:`to_op`."""
        return EvidencePolicy(string_elements(op.providers), op.uncertainty_budget.value.data, op.fallback.data,
                              op.max_age_s.value.data, op.revision.data)


# --------------------------------------------------------------------------- lookup
_KINDS: dict[str, type[IRDLOperation]] = {
    "TargetBinding": TargetBindingOp,
    "DeploymentBinding": DeploymentBindingOp,
    "EvidencePolicy": EvidencePolicyOp,
}

_HOW = {
    "TargetBinding": "add a pplan.target_binding op or pass pplan-legalize{target=<name>}",
    "DeploymentBinding": "add a pplan.deployment_binding op or pass convert-runplan-to-pplan{pool=<pool.toml>}",
    "EvidencePolicy": "add a pplan.evidence_policy op or pass pplan-resolve-costs{evidence=<providers>}",
}


def find_binding(module: ModuleOp, kind: str) -> Operation | None:
    """The module-level binding op of ``kind`` (TargetBinding | DeploymentBinding | EvidencePolicy),
    or None. Raises PassFailedException when there are several (ambiguous)."""
    cls = _KINDS[kind]
    found = [o for o in module.ops if isinstance(o, cls)]
    if len(found) > 1:
        raise PassFailedException(f"ambiguous binding: {len(found)} {kind} ops ({cls.name}) in the module")
    return found[0] if found else None


def require_binding(module: ModuleOp, kind: str, needed_by: str) -> Operation:
    """The binding op of ``kind``; raises ``PassFailedException("missing binding: <kind> ...")``
    naming it and the pass that needs it when absent (AB-G-4: never a default)."""
    op = find_binding(module, kind)
    if op is None:
        raise PassFailedException(f"missing binding: {kind} ({_KINDS[kind].name}) is required by {needed_by}; "
                                  f"{_HOW[kind]}")
    return op
