"""Candidate node pools for the planner: ``[[nodes]]`` TOML files and the local pool.

A pool is the *intended* set of nodes a run may use (seed 000, "RunPlan Formation": the planner
gets "model facts, runtime config, intended node pool, stage count, and placement input"). The
planner never mutates it (RP-F-3); it only reads node ids, memory and bandwidths.

Pool TOML format (one table per node, in the order the planner assigns stages when no placement
is given)::

    [[nodes]]
    id = "gpu0"                          # required, unique, [A-Za-z0-9][A-Za-z0-9_.:@/-]*
    memory_bytes = 17179869184           # required, integer in [1, 2**63 - 1] (bytes usable for weights+KV+rings)
    bandwidth_bytes_per_s = 9.0e11       # optional, in [1, 1e30]: memory bandwidth, balances stage time
    flops_per_s = 6.5e13                 # optional, in [1, 1e30]
    link_bandwidth_bytes_per_s = 1.25e9  # optional, in [1, 1e30]

Every defect is a :class:`~pipeplan.errors.RunPlanRejection` with ``code="invalid_pool"`` whose
message names the file, the ``nodes[i]`` table and the key; a rate that is not finite (``1e400`` reads as
infinity) or outside [1, 1e30] is one, so no cost derived from the pool is infinite, NaN or negative.

**Local peaks.** ``pipeplan plan`` without ``--nodes`` plans on a local pool whose nodes state this
machine's peaks explicitly (:func:`local_peaks`), so the RunPlan carries everything roofline costing
needs. They are measured once by a short numpy probe (:func:`probe_local_peaks`: best-of-N copy
bandwidth of a 32 MiB f32 array, counting read + write bytes; best-of-N f32 512x512 matmul,
``2 * 512**3`` FLOP) and cached as JSON in ``$PIPEPLAN_CACHE/local_peaks.json`` (else
``~/.cache/pipeplan/local_peaks.json``). The environment variable ``PIPEPLAN_LOCAL_PEAKS="BW,FLOPS"``
(bytes/s, FLOP/s; optionally ``,LINK`` bytes/s) overrides both, which keeps tests deterministic.
Processes of one host exchange edge objects through shared memory, so the link bandwidth of a local
node is its memory bandwidth unless stated.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

from pipeplan.errors import RunPlanRejection
from pipeplan.files.cache import default_cache_dir
from pipeplan.files.paths import InputPathError, check_input_file
from pipeplan.plan_types import NodePool, NodeSpec

ORCHESTRATOR_NAME = "orchestrator"
"""Reserved endpoint name: provisions use it as ``peer_node_id`` of token edges, so no node may have it."""

NODE_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@/-]*")
"""Allowed node ids: hostnames, IPs, ``host:port``, ``user@host`` — no spaces and no commas (the CLI's
``--placement`` is comma separated)."""

MEMORY_MAX = 2**63 - 1
"""Largest ``memory_bytes`` (an i64 in the IR)."""
RATE_MIN, RATE_MAX = 1.0, 1e30
"""Accepted range of every rate (bytes/s, FLOP/s): beyond it a cost (bytes / rate, in seconds) could overflow
to infinity or round to zero; real hardware is far inside it."""

MAX_LOCAL_NODES = 16384
"""Most nodes of a local pool (one per stage; a model has fewer blocks than this)."""

_REQUIRED = ("id", "memory_bytes")
_OPTIONAL_RATES = ("bandwidth_bytes_per_s", "flops_per_s", "link_bandwidth_bytes_per_s")
_KNOWN = set(_REQUIRED) | set(_OPTIONAL_RATES)


def _bad(where: str, message: str) -> RunPlanRejection:
    return RunPlanRejection(f"{where}: {message}", code="invalid_pool", where=where)


def _check_node(node: NodeSpec, where: str) -> None:
    """Validate one node's fields (types, positivity, id syntax). Raises invalid_pool."""
    if not isinstance(node.id, str) or not node.id:
        raise _bad(where, f"key 'id' must be a non-empty string, got {node.id!r}")
    if not NODE_ID_RE.fullmatch(node.id):
        raise _bad(where, f"key 'id' {node.id!r} is not a valid node id (allowed: {NODE_ID_RE.pattern})")
    if node.id == ORCHESTRATOR_NAME:
        raise _bad(where, f"key 'id' {node.id!r} is reserved for the orchestrator edge endpoint")
    mem = node.memory_bytes
    if isinstance(mem, bool) or not isinstance(mem, int):
        raise _bad(where, f"key 'memory_bytes' must be an integer number of bytes, got {mem!r}")
    if mem <= 0:
        raise _bad(where, f"key 'memory_bytes' must be > 0, got {mem}")
    if mem > MEMORY_MAX:
        raise _bad(where, f"key 'memory_bytes' = {mem} is out of range (at most 2**63 - 1 = {MEMORY_MAX})")
    for key in _OPTIONAL_RATES:
        v = getattr(node, key)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise _bad(where, f"key '{key}' must be a number, got {v!r}")
        try:
            x = float(v)
        except OverflowError:  # an int beyond float range
            x = math.inf
        if not math.isfinite(x) or x <= 0:
            raise _bad(where, f"key '{key}' must be a finite number > 0, got {v!r}"
                       + (" (it overflows to infinity)" if isinstance(v, int) or math.isinf(x) else ""))
        if not RATE_MIN <= x <= RATE_MAX:
            raise _bad(where, f"key '{key}' = {v!r} is out of range [{RATE_MIN:g}, {RATE_MAX:g}] (costs derived from "
                       f"it would overflow or vanish)")


def validate_pool(pool: NodePool, source: str = "node pool") -> None:
    """Check a :class:`NodePool` (from TOML or built in Python) before planning.

    Args:
        pool: the candidate pool; not modified.
        source: how messages name the pool (a file path or ``"node pool"``).
    Raises:
        RunPlanRejection(code="invalid_pool"): not a NodePool, no nodes, a node that is not a
            NodeSpec, an invalid field (see :func:`_check_node`), or a duplicate id.
    """
    if not isinstance(pool, NodePool) or not isinstance(pool.nodes, tuple):
        raise _bad(source, f"expected a NodePool with a tuple of NodeSpec, got {type(pool).__name__}")
    if not pool.nodes:
        raise _bad(source, "the pool has no nodes")
    seen: dict[str, int] = {}
    for i, node in enumerate(pool.nodes):
        where = f"{source}: nodes[{i}]"
        if not isinstance(node, NodeSpec):
            raise _bad(where, f"expected a NodeSpec, got {type(node).__name__}")
        _check_node(node, where)
        if node.id in seen:
            raise _bad(where, f"duplicate node id {node.id!r} (first in nodes[{seen[node.id]}])")
        seen[node.id] = i


def load_pool_toml(path: str | os.PathLike[str]) -> NodePool:
    """Read a pool TOML file (format in the module docstring) into a :class:`NodePool`.

    Args:
        path: the TOML file.
    Returns: the pool, nodes in file order.
    Raises:
        RunPlanRejection(code="invalid_pool"): unreadable file, TOML syntax error, no ``[[nodes]]``
            array, an unknown top-level or node key, a missing ``id``/``memory_bytes``, a wrong type,
            a non-positive memory or rate, an invalid or reserved id, or a duplicate id. The message
            names the file, the ``nodes[i]`` table and the key.
    Source: tomllib (stdlib) parsing; checks follow the seed 000 planner-input contract.
    """
    src = str(path)
    try:
        check_input_file(path, "pool file")
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except InputPathError as e:
        raise _bad(src, f"cannot read pool file: {e.message}") from None
    except OSError as e:
        raise _bad(src, f"cannot read pool file: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise _bad(src, f"pool file is not UTF-8 text: {e.reason}") from None
    except tomllib.TOMLDecodeError as e:
        raise _bad(src, f"TOML syntax error: {e}") from None
    extra = sorted(set(data) - {"nodes"})
    if extra:
        raise _bad(src, f"unknown top-level key {extra[0]!r} (a pool file holds only [[nodes]] tables)")
    tables = data.get("nodes")
    if tables is None:
        raise _bad(src, "missing [[nodes]] tables")
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise _bad(src, "'nodes' must be an array of tables ([[nodes]])")
    nodes = []
    for i, table in enumerate(tables):
        where = f"{src}: nodes[{i}]"
        unknown = sorted(set(table) - _KNOWN)
        if unknown:
            raise _bad(where, f"unknown key {unknown[0]!r} (known: {', '.join(sorted(_KNOWN))})")
        for key in _REQUIRED:
            if key not in table:
                raise _bad(where, f"missing key {key!r}")
        node = NodeSpec(
            id=table["id"],
            memory_bytes=table["memory_bytes"],
            **{k: table[k] for k in _OPTIONAL_RATES if k in table},
        )
        nodes.append(node)
    pool = NodePool(tuple(nodes))
    validate_pool(pool, src)
    return pool


def pool_toml(pool: NodePool) -> str:
    """The pool-file TOML text of ``pool`` (inverse of :func:`load_pool_toml`): one ``[[nodes]]`` table
    per node in pool order, with ``id``, ``memory_bytes`` and each rate that is set.

    Raises:
        RunPlanRejection(code="invalid_pool"): the pool fails :func:`validate_pool` (so the text
            always loads back to an equal pool).
    """
    validate_pool(pool)
    tables = []
    for n in pool.nodes:
        lines = [f"id = {json.dumps(n.id)}", f"memory_bytes = {n.memory_bytes}"]
        lines += [f"{k} = {getattr(n, k)!r}" for k in _OPTIONAL_RATES if getattr(n, k) is not None]
        tables.append("[[nodes]]\n" + "\n".join(lines) + "\n")
    return "".join(tables)


def physical_memory_bytes() -> int:
    """Total physical memory of this machine in bytes (``SC_PHYS_PAGES * SC_PAGE_SIZE``).

    Raises:
        RunPlanRejection(code="invalid_pool"): the OS does not report it (no POSIX sysconf).
    """
    try:
        pages = os.sysconf("SC_PHYS_PAGES")
        size = os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError) as e:
        raise _bad("local pool", f"cannot determine this machine's physical memory: {e}") from None
    if pages <= 0 or size <= 0:
        raise _bad("local pool", f"the OS reports no physical memory ({pages} pages of {size} bytes)")
    return int(pages) * int(size)


LOCAL_PEAKS_ENV = "PIPEPLAN_LOCAL_PEAKS"
"""Environment override of the local peaks: ``"BW,FLOPS[,LINK]"`` (bytes/s, FLOP/s, bytes/s)."""

LOCAL_PEAKS_FORMAT = "pipeplan-local-peaks/1"
"""``format`` of the local peaks cache file."""


@dataclass(frozen=True)
class LocalPeaks:
    """This machine's peaks as a local node states them: memory bandwidth and link bandwidth in
    bytes/s, f32 matmul throughput in FLOP/s; ``source`` is ``env``, ``cache`` or ``probe``."""

    bandwidth_bytes_per_s: float
    flops_per_s: float
    link_bandwidth_bytes_per_s: float
    source: str

    def node_rates(self) -> dict[str, float]:
        """The peaks as :class:`~pipeplan.plan_types.NodeSpec` keyword arguments."""
        return {"bandwidth_bytes_per_s": self.bandwidth_bytes_per_s, "flops_per_s": self.flops_per_s,
                "link_bandwidth_bytes_per_s": self.link_bandwidth_bytes_per_s}


def _sig3(x: float) -> float:
    """``x`` rounded to 3 significant digits (a probe is not more precise, and the IR prints it short)."""
    return float(f"{x:.3g}")


def probe_local_peaks(copy_bytes: int = 1 << 25, n: int = 512, repeats: int = 5) -> tuple[float, float]:
    """Measure ``(memory bandwidth bytes/s, f32 matmul FLOP/s)`` of this machine with numpy.

    Bandwidth: best of ``repeats`` ``np.copyto`` of a ``copy_bytes`` f32 array (2 x ``copy_bytes``
    moved: read + write). Throughput: best of ``repeats`` ``a @ b`` of two ``n x n`` f32 matrices
    (``2 n^3`` FLOP, numpy's BLAS with its default threads). One warm-up each; ~0.2 s in all.
    Both rounded to 3 significant digits.
    """
    import numpy as np

    src = np.ones(copy_bytes // 4, dtype=np.float32)
    dst = np.empty_like(src)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)

    def best(fn) -> float:
        fn()
        t_min = math.inf
        for _ in range(repeats):
            t = time.perf_counter()
            fn()
            t_min = min(t_min, time.perf_counter() - t)
        return max(t_min, 1e-9)

    bw = 2 * src.nbytes / best(lambda: np.copyto(dst, src))
    flops = 2 * n**3 / best(lambda: a @ b)
    return _sig3(bw), _sig3(flops)


def _peaks_from_env(value: str) -> LocalPeaks:
    parts = [p.strip() for p in value.split(",")]
    try:
        nums = [float(p) for p in parts]
    except ValueError:
        nums = []
    if len(nums) not in (2, 3) or not all(math.isfinite(x) and x > 0 for x in nums):
        raise _bad(LOCAL_PEAKS_ENV, f"{value!r} is not 'BW,FLOPS[,LINK]' (bytes/s, FLOP/s, bytes/s; numbers > 0)")
    return LocalPeaks(nums[0], nums[1], nums[2] if len(nums) == 3 else nums[0], "env")


def _read_peaks_cache(path: Path) -> LocalPeaks | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        vals = [float(doc[k]) for k in ("bandwidth_bytes_per_s", "flops_per_s", "link_bandwidth_bytes_per_s")]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if doc.get("format") != LOCAL_PEAKS_FORMAT or not all(math.isfinite(x) and x > 0 for x in vals):
        return None
    bw, flops, link = vals
    return LocalPeaks(bw, flops, link, "cache")


def local_peaks(cache_dir: str | os.PathLike[str] | None = None) -> LocalPeaks:
    """This machine's peaks for a local pool (module docstring, "Local peaks").

    Order: ``$PIPEPLAN_LOCAL_PEAKS`` when set; else the cache file ``local_peaks.json`` in
    ``cache_dir`` (default ``$PIPEPLAN_CACHE``, else ``~/.cache/pipeplan``) when it is valid; else
    :func:`probe_local_peaks`, written to that file (an unwritable cache is not an error: the
    measurement is returned anyway; a corrupt one is measured again and replaced).

    Raises:
        RunPlanRejection(code="invalid_pool"): a malformed ``$PIPEPLAN_LOCAL_PEAKS``.
    """
    env = os.environ.get(LOCAL_PEAKS_ENV)
    if env:
        return _peaks_from_env(env)
    if cache_dir is None:
        cache_dir = default_cache_dir()
    path = Path(cache_dir) / "local_peaks.json"
    cached = _read_peaks_cache(path)
    if cached is not None:
        return cached
    bw, flops = probe_local_peaks()
    peaks = LocalPeaks(bw, flops, bw, "probe")
    doc = {"format": LOCAL_PEAKS_FORMAT, "bandwidth_bytes_per_s": bw, "flops_per_s": flops,
           "link_bandwidth_bytes_per_s": bw, "probe": "numpy copyto 32 MiB f32 (read+write bytes); f32 512x512 matmul"}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass
    return peaks


def local_pool(n: int, memory_bytes: int | None = None, *, peaks: LocalPeaks | None = None) -> NodePool:
    """A pool of ``n`` nodes ``"local0"`` .. ``"local{n-1}"`` that all run on this machine.

    Semantics: every local node is a process on the same host, so each one is given the host's
    whole physical memory (``memory_bytes`` when given, else :func:`physical_memory_bytes`) as its
    capacity. The planner checks each stage against that figure separately; it does NOT check that
    all stages together fit the shared host (the stages share one memory, which a per-node pool
    cannot state). Without ``peaks`` no bandwidths are set, so stages are balanced by bytes; with
    ``peaks`` (:func:`local_peaks`) every node states them (all equal, so the balance is the same).

    Args:
        n: number of nodes, 1 .. :data:`MAX_LOCAL_NODES`.
        memory_bytes: override of the per-node capacity in bytes (tests); > 0.
        peaks: this machine's peaks to state on every node (``pipeplan plan`` without ``--nodes``).
    Raises:
        RunPlanRejection(code="invalid_pool"): ``n < 1``, a bad ``memory_bytes``, or unknown host memory.
    """
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_LOCAL_NODES:
        raise _bad("local pool", f"the number of local nodes must be an integer in [1, {MAX_LOCAL_NODES}], got {n!r}")
    mem = physical_memory_bytes() if memory_bytes is None else memory_bytes
    rates = {} if peaks is None else peaks.node_rates()
    pool = NodePool(tuple(NodeSpec(id=f"local{i}", memory_bytes=mem, **rates) for i in range(n)))
    validate_pool(pool, "local pool")
    return pool


__all__ = ["ORCHESTRATOR_NAME", "NODE_ID_RE", "LOCAL_PEAKS_ENV", "LocalPeaks", "load_pool_toml", "local_peaks",
           "local_pool", "physical_memory_bytes", "probe_local_peaks", "validate_pool"]
