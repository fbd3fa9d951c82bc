"""One local Ray cluster for the benchmarks (``bench/ray_hops.py``, ``bench/decode_ray.py``, ``bench/throughput.py``).

:func:`ray_cluster` starts a ``ray.cluster_utils.Cluster`` on this machine whose node ``i`` carries the pool id
``nodes[i]`` (custom resource ``pipeplan_node:<id>``; the head is ``nodes[0]``), with ``RAY_AUTH_MODE=disabled``
and a private temp dir (``RAY_TMPDIR``, short: Ray's unix socket paths must fit 107 bytes), connects the driver,
and on exit disconnects, shuts the cluster down, restores both variables and removes the temp dir. With
``address`` it only connects to that cluster (which must carry the ids) and reads the ids from ``ray.nodes()``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence

MB = 1024 * 1024
ENV = ("RAY_AUTH_MODE", "RAY_TMPDIR")


@contextlib.contextmanager
def ray_cluster(nodes: Sequence[str], *, cpus_per_node: int = 1, object_store_mb: int = 200,
                address: str | None = None) -> Iterator[dict]:
    """Yields ``{"ids": {pool id: Ray node id (hex)}, "start_s": seconds the start and connect took,
    "cpus_per_node", "object_store_mb_per_node"}`` (module docstring)."""
    import ray

    saved = {k: os.environ.get(k) for k in ENV}
    tmp = None
    cluster = None
    t0 = time.perf_counter()
    try:
        if address is None:
            from ray.cluster_utils import Cluster

            tmp = tempfile.mkdtemp(prefix="pp-ray-", dir="/tmp")
            os.makedirs(os.path.join(tmp, "ray"))
            os.environ["RAY_AUTH_MODE"] = "disabled"
            os.environ["RAY_TMPDIR"] = tmp
            common = {"num_cpus": cpus_per_node, "object_store_memory": object_store_mb * MB}
            cluster = Cluster(initialize_head=True, head_node_args=dict(
                common, temp_dir=tmp, include_dashboard=False, resources={f"pipeplan_node:{nodes[0]}": 1}))
            ids = {nodes[0]: cluster.head_node.node_id}
            for n in nodes[1:]:
                ids[n] = cluster.add_node(**common, resources={f"pipeplan_node:{n}": 1}).node_id
            cluster.wait_for_nodes()
            ray.init(address=cluster.address, log_to_driver=False)
        else:
            from pipeplan.runtime.ray_backend import resolve_nodes

            ray.init(address=address, log_to_driver=False)
            ids = resolve_nodes(list(nodes))
        yield {"ids": ids, "start_s": time.perf_counter() - t0, "cpus_per_node": cpus_per_node,
               "object_store_mb_per_node": object_store_mb if address is None else None}
    finally:
        if ray.is_initialized():
            ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def compiled_stages(model, nodes: Sequence[str], *, max_seq_len: int = 256, memory_bytes: int = 4 << 30,
                    prompt_len: int = 8, parallel: int = 1) -> dict:
    """The model planned over one stage per pool id of ``nodes`` and compiled as ``pipeplan run`` does: yields
    the keyword arguments of a ``Pipeline`` running the compiled stage programs on the CPU kernels
    (``{"provisions", "programs", "kernels"}``), so a Ray figure measures the same stage code as a local one."""
    from pipeplan.dialects.runplan_build import project_provisions
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.frontend.planner import plan_run
    from pipeplan.frontend.pool import local_peaks, pool_toml
    from pipeplan.plan_types import NodePool, NodeSpec, RuntimeConfig
    from pipeplan.runtime.replay import compile_for_run

    facts = read_model_facts(model)
    rates = local_peaks().node_rates()  # this machine's peaks: the roofline costs of the package's timeline
    pool = NodePool(tuple(NodeSpec(n, memory_bytes, **rates) for n in nodes))
    config = RuntimeConfig(max_seq_len=max_seq_len, parallel=parallel, ring_slots=max(2, parallel))
    module = plan_run(facts, config, pool, len(nodes), list(nodes))
    compiled = compile_for_run(module, pool_toml(pool), prompt_len=prompt_len)
    return {"provisions": project_provisions(module), "programs": compiled.programs,
            "kernels": "pipeplan.runtime.kernels.cpu"}
