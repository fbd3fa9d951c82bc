"""``cplan-simulate``: the discrete-event simulation of a run of the ``cplan.plan`` (seeds/003 "Timing and
simulation projection", AB-T-2), written back as a discardable annotation; the pass that ends the
observers' ``simulation`` boundary (:mod:`pipeplan.transforms.observers`).

The run is ``prompt_chunks`` prefill instances then ``decode_tokens`` decode instances
(:func:`pipeplan.analysis.simulate.run_schedule`), simulated with in-order queues, FIFO links and the
plan's nominal durations (:func:`pipeplan.analysis.simulate.simulate`, the model the replay package's
predicted timeline comes from). The ``simulation`` attribute of ``cplan.plan`` (seconds)::

    cplan.plan attributes {...} {...}   // plus attribute simulation = {schedule = ["prefill", "decode"],
                                        //   makespan = 1.2e-03 : f64, nodes = 356 : i64, starts = 356 : i64,
                                        //   ends = 356 : i64, signals = 12 : i64, waits = 12 : i64,
                                        //   instance_ends = [6.1e-04 : f64, 1.2e-03 : f64],
                                        //   busy = {"local0/compute" = 9.0e-04 : f64, ...}}

``instance_ends[k]`` is when the last command of the k-th step instance ends; ``busy`` is each
``device/engine`` queue's summed command time. Discardable: the concrete digest does not change.

Errors (PassFailedException): no ``cplan.plan``, options below 0 or an empty run (``bad_schedule``), a
deadlock (a command's step is its ``#cplan.lineage``'s, checked at parse).
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeplan.analysis.simulate import Simulation, build_model, run_schedule, simulate
from pipeplan.dialects.cplan import PlanOp
from pipeplan.errors import PipeplanError
from pipeplan.transforms.cplan_project_timing import confidences_from_module, find_cplan
from xdsl.context import Context
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    FloatAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    f64,
    i64,
)
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

SIMULATION = "simulation"
"""Name of the discardable simulation attribute on ``cplan.plan``."""


def annotate_simulation(plan_op: PlanOp, sim: Simulation) -> None:
    """Attach ``sim``'s summary to ``plan_op`` (module docstring)."""
    g, cmds = sim.graph, sim.model.commands
    kinds = {k: 0 for k in ("start", "end", "signal", "wait")}
    for e in sim.events:
        kinds[e.kind] = kinds.get(e.kind, 0) + 1
    ends = [0.0] * len(sim.schedule)
    busy: dict[str, float] = {}
    for iv in sim.intervals:
        n = iv.node
        ends[n.instance] = max(ends[n.instance], iv.end)
        c = cmds[n.cmd]
        q = f"{c.device}/{c.engine}"
        busy[q] = busy.get(q, 0.0) + (iv.end - iv.start)
    plan_op.attributes[SIMULATION] = DictionaryAttr({
        "schedule": ArrayAttr([StringAttr(s) for s in sim.schedule]),
        "makespan": FloatAttr(sim.makespan, f64),
        "nodes": IntegerAttr(len(g.nodes), i64),
        "starts": IntegerAttr(kinds["start"], i64), "ends": IntegerAttr(kinds["end"], i64),
        "signals": IntegerAttr(kinds["signal"], i64), "waits": IntegerAttr(kinds["wait"], i64),
        "instance_ends": ArrayAttr([FloatAttr(t, f64) for t in ends]),
        "busy": DictionaryAttr({q: FloatAttr(b, f64) for q, b in sorted(busy.items())})})


def simulate_module(module: ModuleOp, prompt_chunks: int = 1, decode_tokens: int = 4) -> Simulation:
    """Simulate the module's ``cplan.plan`` and annotate it (module docstring). Raises PipeplanError
    (no_concrete_plan, bad_schedule) or SimulationError (deadlock)."""
    if prompt_chunks < 0 or decode_tokens < 0:
        raise PipeplanError(f"prompt_chunks and decode_tokens must be >= 0, got {prompt_chunks} and {decode_tokens}",
                            code="bad_schedule")
    plan_op = find_cplan(module)
    model = build_model(plan_op, confidences_from_module(module, plan_op))
    sim = simulate(model, run_schedule(model, prompt_chunks, decode_tokens))
    annotate_simulation(plan_op, sim)
    return sim


@dataclass(frozen=True)
class CplanSimulatePass(ModulePass):
    """Annotate the module's ``cplan.plan`` with the simulation of a run (module docstring).

    Options: ``prompt_chunks`` (prefill instances, default 1), ``decode_tokens`` (decode instances, default 4)."""

    name = "cplan-simulate"

    prompt_chunks: int = 1
    decode_tokens: int = 4

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        try:
            simulate_module(op, self.prompt_chunks, self.decode_tokens)
        except PipeplanError as e:
            raise PassFailedException(f"cplan-simulate: {e.one_line()}") from None
