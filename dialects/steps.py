"""The steps a plan describes, one vocabulary for every dialect that names them (``pplan.step``, the
``#cplan.lineage`` of a command): one ``prefill`` of the prompt, one ``decode`` of one token."""

from __future__ import annotations

from xdsl.utils.str_enum import StrEnum


class Step(StrEnum):
    """The steps of a portable plan (STEPS), equal to their names as strings."""

    PREFILL = "prefill"
    DECODE = "decode"


STEPS: tuple[str, ...] = tuple(m.value for m in Step)
"""The step names, in plan order."""


def task_path(step: str, stage: int, block: int, model_op: str, task: str) -> str:
    """``model op <op> -> stage <s>[ block <b>] (<step>) -> task @<task>``: a portable task's place in the model
    (AB-D-1 lineage; a concrete command's path appends its candidate)."""
    where = f"stage {stage}" + (f" block {block}" if block >= 0 else "")
    return f"model op {model_op} -> {where} ({step}) -> task @{task}"
