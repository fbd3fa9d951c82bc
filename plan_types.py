"""Plain frozen data types shared by the frontend, the dialects and the runtime.

These are the Python-side values of the seed contracts (seeds/000 RunPlan, seeds/001 weight
lifecycle). IR is the source of truth inside the compiler: the ``runplan`` dialect builds its ops
from a :class:`RunPlanSpec` (the planner's decision, never read back from the IR: passes and tools
read the ops) and reads :class:`ProvisionStage` values back out of ``runplan.provision_stage`` ops,
so the runtime never parses IR text itself.

Units: every ``*_bytes``/``offset``/``max_extent`` is in bytes; layer ranges are half-open
``[layer_start, layer_end)`` over GGUF block indices; ``ORCHESTRATOR`` (-1) stands for the
orchestrator as an edge endpoint.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ORCHESTRATOR = -1
"""Edge endpoint index meaning "the orchestrator" (seed 000, Edge Assignment)."""

DTYPE_WIDTHS: dict[str, int] = {"i32": 4, "f32": 4, "f16": 2, "bf16": 2}
"""Element width in bytes of every dtype an ObjectSpec may carry."""

EDGE_KINDS = ("token_in", "activation", "token_out")


# --------------------------------------------------------------------------- model facts
@dataclass(frozen=True)
class TensorInfo:
    """One tensor of a GGUF tensor index.

    Attributes:
        name: GGUF name, e.g. ``blk.3.attn_q.weight``.
        ggml_type: ggml type name, e.g. ``F32``, ``Q8_0``, ``Q4_K``.
        shape: dimensions in ggml order (``ne0`` first: the row length comes first).
        shard: index of the file in ``ModelFacts.files`` holding the data.
        offset: absolute byte offset of the data in that file.
        n_bytes: size of the data in bytes.
        block: ``N`` for ``blk.N.*`` tensors, ``None`` for the others.
    """

    name: str
    ggml_type: str
    shape: tuple[int, ...]
    shard: int
    offset: int
    n_bytes: int
    block: int | None


@dataclass(frozen=True)
class ModelFacts:
    """Header-only facts of a GGUF model (or of a model-facts TOML file).

    Attributes mirror the llama.cpp metadata keys ``<arch>.block_count`` etc. ``files`` lists the
    shard paths or URLs (one for a whole file; empty when the facts came from TOML). ``tensors``
    is the tensor index in file order; ``block_bytes[i]`` totals the tensor bytes of block ``i``.
    ``key_length`` / ``value_length``: ``<arch>.attention.key_length`` / ``value_length`` (0 = not
    stated: ``embedding_length // head_count``). ``arch_params``: the further ``<arch>.*`` scalars the
    architecture's module reads (``pipeplan.models.archs``), as sorted ``(key, value)`` pairs.
    """

    architecture: str
    name: str
    block_count: int
    embedding_length: int
    head_count: int
    head_count_kv: int
    feed_forward_length: int
    vocab_size: int
    context_length: int
    rope_dimension_count: int
    rope_freq_base: float
    rms_norm_eps: float
    alignment: int
    tensors: tuple[TensorInfo, ...]
    block_bytes: tuple[int, ...]
    files: tuple[str, ...] = ()
    sha256: str | None = None
    key_length: int = 0
    value_length: int = 0
    arch_params: tuple[tuple[str, int | float | str], ...] = ()

    @property
    def head_dim(self) -> int:
        """Key head dimension: ``key_length`` (``<arch>.attention.key_length``) when the model states it,
        else ``embedding_length // head_count`` (llama.cpp ``n_embd_head_k``)."""
        return self.key_length or self.embedding_length // self.head_count

    @property
    def head_dim_v(self) -> int:
        """Value head dimension: ``value_length`` when stated, else :attr:`head_dim` (``n_embd_head_v``)."""
        return self.value_length or self.head_dim

    def param(self, key: str, default: int | float | str | None = None) -> int | float | str | None:
        """The architecture-specific metadata value ``<arch>.<key>`` recorded in :attr:`arch_params`
        (e.g. ``attention.sliding_window``), or ``default``."""
        for k, v in self.arch_params:
            if k == key:
                return v
        return default

    def tensor(self, name: str) -> TensorInfo | None:
        """The tensor called ``name``, or None."""
        for t in self.tensors:
            if t.name == name:
                return t
        return None

    def tensors_for_stage(self, layer_start: int, layer_end: int, first: bool, last: bool) -> tuple[TensorInfo, ...]:
        """Tensors a stage owns: blocks in ``[layer_start, layer_end)``; ``token_embd.weight`` when
        ``first``; ``output_norm.weight`` and ``output.weight`` when ``last`` (and
        ``token_embd.weight`` too when the model has no ``output.weight``: tied embedding)."""
        has_output = any(t.name == "output.weight" for t in self.tensors)
        out = []
        for t in self.tensors:
            if t.block is not None:
                if layer_start <= t.block < layer_end:
                    out.append(t)
            elif t.name == "token_embd.weight":
                if first or (last and not has_output):
                    out.append(t)
            elif t.name.startswith("output"):
                if last:
                    out.append(t)
        return tuple(out)

    def kv_bytes_per_block(self, max_seq_len: int, width: int = 4) -> int:
        """KV-cache bytes of one block for ``max_seq_len`` positions:
        ``kv_heads * (head_dim + head_dim_v) * len * width`` (``2 * kv_heads * head_dim * len * width``
        when keys and values have the same head dim)."""
        return self.head_count_kv * (self.head_dim + self.head_dim_v) * max_seq_len * width


# --------------------------------------------------------------------------- planner inputs
@dataclass(frozen=True)
class NodeSpec:
    """One node of the candidate pool. Bandwidths in bytes/s, flops in FLOP/s."""

    id: str
    memory_bytes: int
    bandwidth_bytes_per_s: float | None = None
    flops_per_s: float | None = None
    link_bandwidth_bytes_per_s: float | None = None


@dataclass(frozen=True)
class NodePool:
    """The candidate node pool, in the order the user gave it."""

    nodes: tuple[NodeSpec, ...]

    def get(self, node_id: str) -> NodeSpec | None:
        for n in self.nodes:
            if n.id == node_id:
                return n
        return None


@dataclass(frozen=True)
class RuntimeConfig:
    """Runtime configuration the plan is made for.

    Attributes:
        max_seq_len: positions per sequence (prompt + generated), sizes KV cache and edge objects.
        activation_dtype: dtype of activations on activation edges (key of DTYPE_WIDTHS).
        token_dtype: dtype of token ids on token edges.
        kv_dtype: dtype of the KV cache.
        ring_slots: slots per edge ring (RingSpec.slots).
        alignment: byte alignment of edge objects (power of two).
        parallel: sequences in flight at once (KV-cache slots per stage; the planner's memory fit counts
            the KV cache ``parallel`` times). Left out of ``repr`` so plans made for 1 keep their run ids.
    """

    max_seq_len: int = 256
    activation_dtype: str = "f32"
    token_dtype: str = "i32"
    kv_dtype: str = "f32"
    ring_slots: int = 2
    alignment: int = 64
    parallel: int = field(default=1, repr=False)


# --------------------------------------------------------------------------- the plan
@dataclass(frozen=True)
class ObjectSpec:
    """What one object on an edge may hold (seed 000, Object/Ring Spec Consistency).

    ``max_extent`` = prod(shape) * dtype_width bytes; for activations
    ``max_seq_len * hidden_dim * dtype_width``; for tokens ``max_seq_len * 4`` (i32 ids).
    """

    kind: str  # "token" | "activation"
    dtype: str
    dtype_width: int
    shape: tuple[int, ...]
    layout: str  # "row_major"
    alignment: int
    max_extent: int


@dataclass(frozen=True)
class RingSpec:
    """A ring of ``slots`` objects, each slot ``slot_bytes`` (>= max_extent, aligned)."""

    slots: int
    slot_bytes: int


@dataclass(frozen=True)
class EdgePlan:
    """One edge: ``producer``/``consumer`` are stage indices or ORCHESTRATOR."""

    edge_id: str
    kind: str  # one of EDGE_KINDS
    producer: int
    consumer: int
    object_spec: ObjectSpec
    ring_spec: RingSpec


@dataclass(frozen=True)
class StagePlan:
    """One stage: half-open block range ``[layer_start, layer_end)`` on node ``node_id``."""

    index: int
    node_id: str
    layer_start: int
    layer_end: int


@dataclass(frozen=True)
class WeightSource:
    """Where a stage gets its weights: local path(s) or http(s) URL(s), one per gguf-split shard."""

    uris: tuple[str, ...]
    sha256: tuple[str, ...] = ()  # per shard, may be empty (unknown)
    sizes: tuple[int, ...] = ()  # per shard, bytes, may be empty (unknown)


@dataclass(frozen=True)
class RunPlanSpec:
    """Everything a RunPlan states: the planner's decision record, written once as ``runplan`` IR
    (``runplan_build.build_runplan_module``); the IR is then read through its ops, not back into this."""

    run_id: str
    facts: ModelFacts
    config: RuntimeConfig
    weights: WeightSource
    stages: tuple[StagePlan, ...]
    edges: tuple[EdgePlan, ...]


@dataclass(frozen=True)
class TensorSlice:
    """A tensor's byte range in the weight source (what a stage loads)."""

    name: str
    ggml_type: str
    shape: tuple[int, ...]
    shard: int
    offset: int
    n_bytes: int


@dataclass(frozen=True)
class EdgeProvision:
    """One edge as one stage sees it. ``peer_node_id`` is the consumer's node id on the outbound
    provision (``"orchestrator"`` for token-out) and the producer's node id (or
    ``"orchestrator"``) on the inbound one: never an actor address."""

    edge_id: str
    kind: str
    direction: str  # "in" | "out"
    peer_node_id: str
    object_spec: ObjectSpec
    ring_spec: RingSpec


@dataclass(frozen=True)
class ProvisionStage:
    """The message a stage receives (seed 000 Provisioning Projection, seed 001 Assignment)."""

    run_id: str
    stage: int
    stage_count: int
    node_id: str
    layer_start: int
    layer_end: int
    block_count: int
    has_embedding: bool
    has_head: bool
    max_seq_len: int
    weights: WeightSource
    tensors: tuple[TensorSlice, ...]
    inbound: EdgeProvision
    outbound: EdgeProvision
