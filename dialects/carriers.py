"""MLIR-carrier attribute helpers shared by the pipeplan dialects and the passes that build their ops.

Every dialect property uses a carrier upstream MLIR parses: ``StringAttr``, ``IntegerAttr`` (i64),
``FloatAttr`` (f64), ``ArrayAttr`` of ``StringAttr``, ``DenseArrayBase`` (i64), ``DictionaryAttr``.
These helpers make and read them in one place (``runplan``, ``pplan``, ``cplan``, ``vmachine``,
``tmachine``, the bindings and the lowering passes all use them).

Constructors are cached (``functools.lru_cache``): xDSL attributes are immutable values, so equal
inputs may share one instance; the printed IR is the same as with fresh instances.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any, ClassVar, SupportsInt

from pipeplan.dialects.diagnostics import PipeplanOp
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    FloatAttr,
    IntegerAttr,
    StringAttr,
    f64,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region
from xdsl.irdl import IRDLOperation, ParsePropInAttrDict
from xdsl.utils.exceptions import VerifyException

_CACHE = 65536


# --------------------------------------------------------------------------- making carriers
@lru_cache(maxsize=_CACHE)
def string(v: str) -> StringAttr:
    """``StringAttr(v)``, e.g. ``"n0"``."""
    return StringAttr(v)


@lru_cache(maxsize=_CACHE)
def i64_attr(v: int) -> IntegerAttr:
    """``IntegerAttr(v, i64)``, e.g. ``64 : i64``. ``v`` is used as given (an ``int``); xDSL raises
    ``VerifyException`` when it is outside the i64 range."""
    return IntegerAttr(v, i64)


def i64_of(v: SupportsInt) -> IntegerAttr:
    """:func:`i64_attr` of ``int(v)``: for values that may arrive as ``bool`` or numpy integers
    (RunPlan schema values, vmachine ABI and kernel attributes)."""
    return i64_attr(int(v))


def strings(vs: Iterable[str]) -> ArrayAttr:
    """``ArrayAttr`` of ``StringAttr`` in the order given, e.g. ``["b0", "b1"]``."""
    return _strings(tuple(vs))


@lru_cache(maxsize=_CACHE)
def _strings(vs: tuple[str, ...]) -> ArrayAttr:
    return ArrayAttr(tuple(string(x) for x in vs))


@lru_cache(maxsize=_CACHE)
def _int_array(vs: tuple[int, ...]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, vs)


def int_array(vs: Iterable[int]) -> DenseArrayBase:
    """``DenseArrayBase`` of i64 in the order given, e.g. ``array<i64: 64, 32>``."""
    return _int_array(tuple(vs))


def scalar_attr(v: Any) -> Attribute:
    """The carrier of a Python scalar: ``bool``/``int`` -> i64, ``float`` -> f64, ``str`` -> string.

    Raises:
        ValueError: any other type (names the value).
    Used for vmachine kernel attributes and tmachine meta-parameters/scalars.
    """
    if isinstance(v, bool):
        return i64_attr(int(v))
    if isinstance(v, int):
        return i64_of(v)
    if isinstance(v, float):
        return FloatAttr(v, f64)
    if isinstance(v, str):
        return string(v)
    raise ValueError(f"unsupported kernel attribute value {v!r}")


# --------------------------------------------------------------------------- reading carriers
def str_tuple(a: ArrayAttr) -> tuple[str, ...]:
    """The strings of an ``ArrayAttr`` of ``StringAttr`` (the op verifier checked the element type)."""
    return tuple(x.data for x in a.data)  # type: ignore[attr-defined]


def string_elements(a: ArrayAttr) -> tuple[str, ...]:
    """The ``StringAttr`` elements of an ``ArrayAttr`` (other elements are skipped; properties declared
    ``ArrayAttr[StringAttr]`` hold nothing else)."""
    return tuple(x.data for x in a.data if isinstance(x, StringAttr))


def int_tuple(a: DenseArrayBase) -> tuple[int, ...]:
    """The values of an i64 dense array as Python ints (decoded once per attribute: attributes are
    immutable, the tuple is kept in its ``__dict__``, outside its fields, equality and hash)."""
    d = a.__dict__
    v = d.get("_pp_ints")
    if v is None:
        v = d["_pp_ints"] = tuple(int(x) for x in a.get_values())  # type: ignore[misc]
    return v


def check_strs(a: ArrayAttr, what: str) -> None:
    """Raise ``VerifyException("<what> must be an array of strings, got <x>")`` at the first element
    of ``a`` that is not a ``StringAttr``."""
    for x in a.data:
        if not isinstance(x, StringAttr):
            raise VerifyException(f"{what} must be an array of strings, got {x}")


# --------------------------------------------------------------------------- ops
class PropsInAttrDict(PipeplanOp):
    """Base of leaf ops whose properties print (and parse) inside the attribute dictionary:
    ``cplan.device {id = "d0", ...}``, ``vmachine.recv {...}``, ``tmachine.launch {...}``."""

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "attr-dict"

    KEYWORD_DICTS: ClassVar[tuple[str, ...]] = ()
    """Dictionary-valued properties that are keyword sets (kernel attributes, meta-parameters): their keys
    are stored sorted, as upstream MLIR prints them, so the custom text survives an ``mlir-opt`` round
    trip. Other dictionaries keep their order (``cplan.device`` capacities are read back as tuples)."""

    @classmethod
    def _declared_order(cls, props: Mapping[str, Attribute | None] | None) -> dict[str, Attribute | None] | None:
        out = super()._declared_order(props)
        if out:
            for k in cls.KEYWORD_DICTS:
                v = out.get(k)
                if isinstance(v, DictionaryAttr) and list(v.data) != sorted(v.data):
                    out[k] = DictionaryAttr(dict(sorted(v.data.items())))
        return out


def build_op(cls: type[IRDLOperation], props: dict[str, Attribute], body: list[Operation] | None = None
             ) -> IRDLOperation:
    """Create an op of ``cls`` from its properties; ``body`` (when given) becomes its one region's
    single block."""
    regions = [Region(Block(body))] if body is not None else []
    return cls.create(properties=props, regions=regions)
