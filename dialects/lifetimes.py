"""Buffer lifetime classes, one vocabulary for every dialect that allocates (``pplan`` buffer types,
``cplan.alloc``, ``vmachine.buffer``, ``tmachine.buffer``): ``weight``, ``kv`` and ``edge`` buffers are
persistent (live for the whole plan), ``transient`` ones for part of a step."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.utils.str_enum import StrEnum

E = TypeVar("E", bound=EnumAttribute[Any])


class Lifetime(StrEnum):
    """A buffer's lifetime class (equal to its name as a string: ``Lifetime.KV == "kv"``)."""

    WEIGHT = "weight"
    KV = "kv"
    TRANSIENT = "transient"
    EDGE = "edge"


LIFETIMES: tuple[str, ...] = tuple(m.value for m in Lifetime)
"""The lifetime names, in declaration order."""

PERSISTENT_LIFETIMES: tuple[str, ...] = tuple(m.value for m in Lifetime if m is not Lifetime.TRANSIENT)
"""The lifetimes of buffers live for the whole plan (all but ``transient``)."""


def enum_interner(cls: type[E]) -> Callable[[str], E]:
    """``name -> cls(enum_type(name))``, one instance per value (xDSL attributes are immutable) for an
    ``EnumAttribute`` class ``cls``. The function raises ValueError for a name outside ``cls.enum_type``."""
    enum_type = cls.enum_type
    cache: dict[Any, E] = {}

    def make(name: str) -> E:
        key = enum_type(name)
        got = cache.get(key)
        if got is None:
            got = cache[key] = cls(key)
        return got

    return make


__all__ = ["LIFETIMES", "PERSISTENT_LIFETIMES", "Lifetime", "enum_interner"]
