"""The ``xdsl.universe`` entry point: lazy factories for pipeplan's dialects and passes.

Stock ``xdsl-opt`` (and any xDSL tool using ``Universe.get_multiverse()``) loads this module for
every invocation, so it imports nothing but xDSL's ``Universe``: a factory imports its dialect or
pass only when called. Add a dialect or pass by adding one line to ``DIALECTS`` or ``PASSES``
(``"name": "module:attribute"``).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any

from xdsl.universe import Universe

DIALECTS: dict[str, str] = {
    "runplan": "pipeplan.dialects.runplan:Runplan",
    "pplan": "pipeplan.dialects.pplan:Pplan",
    "cplan": "pipeplan.dialects.cplan:Cplan",
    "tmachine": "pipeplan.dialects.triton_machine:Tmachine",
    "vmachine": "pipeplan.dialects.vmachine:Vmachine",
}

PASSES: dict[str, str] = {
    "runplan-verify": "pipeplan.transforms.runplan_verify:RunplanVerifyPass",
    "runplan-project-provisioning": "pipeplan.transforms.project_provisioning:ProjectProvisioningPass",
    "convert-runplan-to-pplan": "pipeplan.transforms.convert_runplan_to_pplan:ConvertRunplanToPplanPass",
    "pplan-legalize": "pipeplan.transforms.pplan_legalize:PplanLegalizePass",
    "pplan-select-implementations": "pipeplan.transforms.pplan_select_implementations:PplanSelectImplementationsPass",
    "pplan-resolve-costs": "pipeplan.transforms.pplan_resolve_costs:PplanResolveCostsPass",
    "convert-pplan-to-cplan": "pipeplan.transforms.convert_pplan_to_cplan:ConvertPplanToCplanPass",
    "cplan-verify": "pipeplan.transforms.cplan_verify:CplanVerifyPass",
    "convert-cplan-to-triton": "pipeplan.transforms.convert_cplan_to_triton:ConvertCplanToTritonPass",
    "cplan-project-timing": "pipeplan.transforms.cplan_project_timing:CplanProjectTimingPass",
    "cplan-simulate": "pipeplan.transforms.cplan_simulate:CplanSimulatePass",
    "convert-cplan-to-vmachine": "pipeplan.transforms.convert_cplan_to_vmachine:ConvertCplanToVmachinePass",
}


def _lazy(target: str) -> Callable[[], Any]:
    module, attr = target.split(":")

    def factory() -> Any:
        return getattr(import_module(module), attr)

    factory.__name__ = f"load_{attr}"
    factory.__doc__ = f"Import and return ``{target}``."
    return factory


PIPEPLAN_UNIVERSE = Universe(
    all_dialects={name: _lazy(t) for name, t in DIALECTS.items()},
    all_passes={name: _lazy(t) for name, t in PASSES.items()},
)
