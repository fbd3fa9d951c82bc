"""Candidate node pools for the planner: ``[[nodes]]`` TOML files and the local pool.

A pool is the *intended* set of nodes a run may use (seed 000, "RunPlan Formation": the planner
gets "model facts, runtime config, intended node pool, stage count, and placement input"). The
planner never mutates it (RP-F-3); it only reads node ids, memory and bandwidths.

Pool TOML format (one table per node, in the order the planner assigns stages when no placement
is given)::

    [[nodes]]
    id = "gpu0"                          # required, unique, [A-Za-z0-9][A-Za-z0-9_.:@/-]*
    memory_bytes = 17179869184           # required, integer > 0 (bytes usable for weights+KV+rings)
    bandwidth_bytes_per_s = 9.0e11       # optional, > 0: memory bandwidth, balances stage time
    flops_per_s = 6.5e13                 # optional, > 0
    link_bandwidth_bytes_per_s = 1.25e9  # optional, > 0

Every defect is a :class:`~pipeplan.errors.RunPlanRejection` with ``code="invalid_pool"`` whose
message names the file, the ``nodes[i]`` table and the key.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from pathlib import Path

from pipeplan.errors import RunPlanRejection
from pipeplan.plan_types import NodePool, NodeSpec

ORCHESTRATOR_NAME = "orchestrator"
"""Reserved endpoint name: provisions use it as ``peer_node_id`` of token edges, so no node may have it."""

NODE_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@/-]*")
"""Allowed node ids: hostnames, IPs, ``host:port``, ``user@host`` — no spaces and no commas (the CLI's
``--placement`` is comma separated)."""

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
    for key in _OPTIONAL_RATES:
        v = getattr(node, key)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise _bad(where, f"key '{key}' must be a number, got {v!r}")
        if not math.isfinite(v) or v <= 0:
            raise _bad(where, f"key '{key}' must be a finite number > 0, got {v!r}")


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
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
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


def local_pool(n: int, memory_bytes: int | None = None) -> NodePool:
    """A pool of ``n`` nodes ``"local0"`` .. ``"local{n-1}"`` that all run on this machine.

    Semantics: every local node is a process on the same host, so each one is given the host's
    whole physical memory (``memory_bytes`` when given, else :func:`physical_memory_bytes`) as its
    capacity. The planner checks each stage against that figure separately; it does NOT check that
    all stages together fit the shared host (the stages share one memory, which a per-node pool
    cannot state). No bandwidths are set, so stages are balanced by bytes.

    Args:
        n: number of nodes, >= 1.
        memory_bytes: override of the per-node capacity in bytes (tests); > 0.
    Raises:
        RunPlanRejection(code="invalid_pool"): ``n < 1``, a bad ``memory_bytes``, or unknown host memory.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise _bad("local pool", f"the number of local nodes must be an integer >= 1, got {n!r}")
    mem = physical_memory_bytes() if memory_bytes is None else memory_bytes
    pool = NodePool(tuple(NodeSpec(id=f"local{i}", memory_bytes=mem) for i in range(n)))
    validate_pool(pool, "local pool")
    return pool


__all__ = ["ORCHESTRATOR_NAME", "NODE_ID_RE", "load_pool_toml", "local_pool", "physical_memory_bytes",
           "validate_pool"]
