"""Buffer lifetime classes, one vocabulary for every dialect that allocates (``pplan`` buffer types,
``cplan.alloc``, ``vmachine.buffer``, ``tmachine.buffer``): ``weight``, ``kv`` and ``edge`` buffers are
persistent (live for the whole plan), ``transient`` ones for part of a step."""

from __future__ import annotations

from xdsl.utils.str_enum import StrEnum


class Lifetime(StrEnum):
    """A buffer's lifetime class (equal to its name as a string: ``Lifetime.KV == "kv"``)."""

    WEIGHT = "weight"
    KV = "kv"
    TRANSIENT = "transient"
    EDGE = "edge"


__all__ = ["Lifetime"]
