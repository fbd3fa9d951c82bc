"""Embedding API: use pipeplan's dialects and passes from another xDSL-based compiler.

Example::

    from xdsl.context import Context
    from pipeplan.api import register_pipeplan, build_pipeline, parse_module, run_pipeline

    ctx = Context()
    register_pipeplan(ctx)                       # builtin + our dialects, lazily
    module = parse_module(ctx, plan_text)
    run_pipeline(ctx, module, "runplan-project-provisioning")

Observers (:mod:`pipeplan.transforms.observers`): subclass :class:`Observer` (``name``, ``boundary``,
``observe(module) -> Observation``), ``register`` it in a registry from :func:`default_registry`, and wrap a
``PassPipeline``'s callback with :func:`observing_callback` to run them after each boundary pass.

Nothing here reads process-global state: the caller's ``Context`` is the only registry touched.
"""

from __future__ import annotations

from pipeplan.dialects.diagnostics import IRVerifyError, located, parse_located
from pipeplan.transforms.observers import (
    BOUNDARIES,
    PASS_BOUNDARIES,
    Observation,
    Observer,
    ObserverRegistry,
    default_registry,
    observing_callback,
)
from pipeplan.universe import DIALECTS, PASSES, PIPEPLAN_UNIVERSE
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.passes import ModulePass, PassPipeline
from xdsl.utils.exceptions import VerifyException


def register_pipeplan(ctx: Context, *, builtin: bool = True) -> Context:
    """Register pipeplan's dialects (lazily) into ``ctx``; dialects already present are kept.

    Args:
        ctx: the caller's xDSL ``Context``; mutated in place and returned.
        builtin: also load the ``builtin`` dialect when it is missing.
    Returns: ``ctx``.
    """
    names = ctx.registered_dialect_names
    if builtin and "builtin" not in names:
        ctx.load_dialect(Builtin)
    for name, factory in PIPEPLAN_UNIVERSE.all_dialects.items():
        if name not in ctx.registered_dialect_names:
            ctx.register_dialect(name, factory)
    return ctx


def available_passes() -> dict[str, type[ModulePass]]:
    """Name -> pass class of every pipeplan pass (imports them)."""
    return {name: factory() for name, factory in PIPEPLAN_UNIVERSE.all_passes.items()}


def build_pipeline(spec: str) -> PassPipeline:
    """Build a :class:`PassPipeline` from an ``xdsl-opt`` style spec, e.g.
    ``"runplan-project-provisioning"`` or ``"pass-a,pass-b{opt=1}"``.

    Raises:
        KeyError: a pass name that pipeplan does not define (xDSL's own passes are not included).
    Source: follows ``xdsl.passes.PassPipeline.parse_spec``.
    """
    try:
        return PassPipeline.parse_spec(dict(PIPEPLAN_UNIVERSE.all_passes), spec)
    except ValueError as e:
        raise KeyError(f"{e}; known pipeplan passes: {sorted(PASSES)}") from None


def parse_module(ctx: Context, text: str, name: str = "<input>") -> ModuleOp:
    """Parse ``text`` (custom or generic syntax) into a verified ``builtin.module`` whose ops carry their
    ``name:line:col`` locations.

    Raises:
        ParseError: text that does not parse.
        IRVerifyError: a verifier rejects the IR (also an xDSL ``VerifyException``); ``.op`` is the
            offending op, ``.location`` its ``(file, line, col)``, ``.invariant`` the contract ID.
    """
    module = parse_located(ctx, text, name)
    try:
        module.verify()
    except VerifyException as e:
        raise located(e, None) from None
    return module


def run_pipeline(ctx: Context, module: ModuleOp, spec: str) -> ModuleOp:
    """Apply the pipeline ``spec`` to ``module`` in place and return it."""
    build_pipeline(spec).apply(ctx, module)
    return module


__all__ = ["DIALECTS", "IRVerifyError", "PASSES", "register_pipeplan", "available_passes", "build_pipeline",
           "parse_module", "run_pipeline", "BOUNDARIES", "PASS_BOUNDARIES", "Observation", "Observer",
           "ObserverRegistry", "default_registry", "observing_callback"]
