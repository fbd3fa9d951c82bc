"""A precompiled acceptance test of an op's IRDL definition, run before xDSL's ``OpDef.verify``.

xDSL verifies an op's IRDL definition (operand/result/region/successor counts and types, segment sizes,
properties, attributes, traits) by interpreting the definition at every call (~45 us per op; a 70B-shaped
pipeline verifies ~16,000 pipeplan ops). :func:`install` replaces the ``verify_`` that
``irdl_op_definition`` gave a class by one that first runs :func:`compile_accept`'s table-driven test of the
same constraints (~3 us): when it accepts, only the definition's traits and the op's own verifier run
(what xDSL runs after its checks pass); when it does not (or raises), xDSL's ``OpDef.verify`` runs as
before and raises its own message. The test accepts only ops xDSL accepts: it handles the constraint
kinds pipeplan's dialects use (``AnyAttr``, ``BaseAttr``, ``EqAttrConstraint``, ``ParamAttrConstraint``,
``SymbolNameConstraint``, ``ArrayOfConstraint``, ``RangeOf``, ``RangeLengthConstraint`` with a fixed
length, ``AnyRange``; single, variadic and optional definitions, ``AttrSizedOperandSegments``); a class
whose definition holds anything else keeps xDSL's verifier unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from xdsl.dialects.builtin import (
    ArrayAttr,
    ArrayOfConstraint,
    DenseArrayBase,
    StringAttr,
    SymbolNameConstraint,
    i32,
)
from xdsl.ir import Attribute, Operation
from xdsl.irdl import (
    AnyAttr,
    AttrSizedOperandSegments,
    BaseAttr,
    EqAttrConstraint,
    EqIntConstraint,
    IRDLOperation,
    OpDef,
    ParamAttrConstraint,
    ParsePropInAttrDict,
    RangeLengthConstraint,
    RangeOf,
)
from xdsl.irdl.constraints import AnyRange
from xdsl.irdl.operations import (
    AttributeDef,
    OperandDef,
    OptAttributeDef,
    OptionalDef,
    OptOperandDef,
    OptPropertyDef,
    OptResultDef,
    PropertyDef,
    RegionDef,
    ResultDef,
    SingleBlockRegionDef,
    VariadicDef,
    VarOperandDef,
    VarResultDef,
)
from xdsl.traits import IsolatedFromAbove

AttrTest = Callable[[Attribute], bool]
RangeTest = Callable[[Sequence[Attribute]], bool]
Accept = Callable[[Operation], bool]


def _always(_: object) -> bool:
    return True


def attr_test(c: object) -> AttrTest | None:
    """A predicate true exactly where ``c.verify(attr, ctx)`` raises nothing (None: a kind not handled)."""
    t = type(c)
    if t is AnyAttr:
        return _always
    if t is BaseAttr:
        base = c.attr  # type: ignore[attr-defined]
        return lambda a: isinstance(a, base)
    if t is EqAttrConstraint:
        want = c.attr  # type: ignore[attr-defined]
        return lambda a: not (a != want)
    if t is SymbolNameConstraint:
        return lambda a: isinstance(a, StringAttr)
    if t is ParamAttrConstraint:
        base = c.base_attr  # type: ignore[attr-defined]
        tests = [attr_test(p) for p in c.param_constrs]  # type: ignore[attr-defined]
        if any(x is None for x in tests):
            return None
        n = len(tests)
        pairs = [(i, x) for i, x in enumerate(tests) if x is not _always]
        fields: dict[type, tuple[str, ...]] = {}

        def param(a: Attribute) -> bool:
            if not isinstance(a, base):
                return False
            cls = type(a)
            names = fields.get(cls)
            if names is None:  # ``a.parameters`` is these fields of the attribute's own definition
                names = fields[cls] = tuple(f for f, _ in cls.get_irdl_definition().parameters)  # type: ignore[attr-defined]
            if len(names) != n:
                return False
            for i, x in pairs:
                if not x(getattr(a, names[i])):  # type: ignore[misc]
                    return False
            return True

        return param
    if t is ArrayOfConstraint:
        elems = range_test(c.elem_range_constraint)  # type: ignore[attr-defined]
        if elems is None:
            return None
        return lambda a: isinstance(a, ArrayAttr) and elems(a.data)
    return None


def range_test(c: object) -> RangeTest | None:
    """A predicate true exactly where the range constraint ``c`` accepts a sequence (None: not handled)."""
    t = type(c)
    if t is AnyRange:
        return _always
    if t is RangeOf:
        each = attr_test(c.constr)  # type: ignore[attr-defined]
        if each is None:
            return None
        if each is _always:
            return _always
        return lambda s: all(map(each, s))
    if t is RangeLengthConstraint and type(c.length) is EqIntConstraint:  # type: ignore[attr-defined]
        n = c.length.value  # type: ignore[attr-defined]
        inner = range_test(c.constraint)  # type: ignore[attr-defined]
        if inner is None:
            return None
        if n == 1 and type(c.constraint) is RangeOf:  # type: ignore[attr-defined]
            one = attr_test(c.constraint.constr)  # type: ignore[attr-defined]
            assert one is not None
            return lambda s: len(s) == 1 and one(s[0])
        return lambda s: len(s) == n and inner(s)
    return None


# a group's kind: 0 single, 1 variadic, 2 optional
_SINGLE, _VARIADIC, _OPTIONAL = 0, 1, 2


def _kind(d: object, single: type, variadic: type, optional: type) -> int | None:
    t = type(d)
    return _SINGLE if t is single else _VARIADIC if t is variadic else _OPTIONAL if t is optional else None


def _groups_test(defs: Sequence[tuple[str, Any]], kinds: list[int], segments: AttrSizedOperandSegments | None,
                 values: Callable[[Operation], Sequence[Any]], typed: bool) -> Accept | None:
    """The test of one construct (operands or results): group sizes as xDSL's accessors and
    ``verify_variadic_size`` compute them, then each group's types against its definition."""
    tests: list[RangeTest] = []
    for _, d in defs:
        r = range_test(d.constr)
        if r is None:
            return None
        tests.append(r)
    n = len(defs)
    checked = [(i, x) for i, x in enumerate(tests) if x is not _always]

    def types(vs: Sequence[Any]) -> tuple[Attribute, ...]:
        return tuple([v.type for v in vs]) if typed else tuple(vs)

    if segments is not None:
        name, as_property = segments.attribute_name, segments.as_property

        def by_segments(op: Operation) -> bool:
            container = op.properties if as_property else op.attributes
            attr = container.get(name)
            if not isinstance(attr, DenseArrayBase) or attr.elt_type != i32:
                return False
            sizes = attr.get_values()
            if len(sizes) != n:
                return False
            for size, k in zip(sizes, kinds, strict=True):
                if size < 0 or (k == _OPTIONAL and size not in (0, 1)) or (k == _SINGLE and size != 1):
                    return False
            vs = values(op)
            if sum(sizes) != len(vs):
                return False
            if not checked:
                return True
            ts = types(vs)
            starts = [0] * n
            acc = 0
            for i, size in enumerate(sizes):
                starts[i] = acc
                acc += size  # type: ignore[operator]
            return all(x(ts[starts[i]:starts[i] + sizes[i]]) for i, x in checked)  # type: ignore[misc]

        return by_segments
    variadic = [i for i, k in enumerate(kinds) if k != _SINGLE]
    if not variadic:
        def fixed(op: Operation) -> bool:
            vs = values(op)
            if len(vs) != n:
                return False
            if not checked:
                return True
            ts = types(vs)
            return all(x(ts[i:i + 1]) for i, x in checked)

        return fixed
    if len(variadic) > 1 or kinds[variadic[0]] != _VARIADIC:
        return None  # several variadics or an optional without segment sizes: xDSL's path
    at = variadic[0]

    def one_variadic(op: Operation) -> bool:
        vs = values(op)
        extra = len(vs) - n  # the variadic group holds extra + 1 values
        if extra < -1:
            return False
        if not checked:
            return True
        ts = types(vs)
        for i, x in checked:
            lo = i if i <= at else i + extra
            hi = lo + 1 + extra if i == at else lo + 1
            if not x(ts[lo:hi]):
                return False
        return True

    return one_variadic


def _operands(op: Operation) -> Sequence[Any]:
    return op._operands  # pyright: ignore[reportPrivateUsage]


def _results(op: Operation) -> Sequence[Any]:
    return op.results


def compile_accept(op_def: OpDef) -> Accept | None:
    """A test that accepts only ops that ``op_def.verify`` (before its traits) accepts; None when the
    definition holds a constraint or definition kind the test does not handle."""
    segments: AttrSizedOperandSegments | None = None
    for o in op_def.options:
        if type(o) is AttrSizedOperandSegments:
            segments = o
        elif type(o) is not ParsePropInAttrDict:
            return None
    if op_def.successors:
        return None
    operand_kinds = [_kind(d, OperandDef, VarOperandDef, OptOperandDef) for _, d in op_def.operands]
    result_kinds = [_kind(d, ResultDef, VarResultDef, OptResultDef) for _, d in op_def.results]
    if None in operand_kinds or None in result_kinds:
        return None
    operands = _groups_test(op_def.operands, operand_kinds, segments, _operands, True)  # type: ignore[arg-type]
    results = _groups_test(op_def.results, result_kinds, None, _results, True)  # type: ignore[arg-type]
    if operands is None or results is None:
        return None
    single_block: list[int] = []
    entry: list[tuple[int, RangeTest]] = []
    for i, (_, rd) in enumerate(op_def.regions):
        if type(rd) is SingleBlockRegionDef:
            single_block.append(i)
        elif type(rd) is not RegionDef or isinstance(rd, VariadicDef | OptionalDef):
            return None
        r = range_test(rd.entry_args)
        if r is None:
            return None
        if r is not _always:
            entry.append((i, r))
    n_regions = len(op_def.regions)
    props: list[tuple[str, AttrTest, bool]] = []
    for name, pd in op_def.properties.items():
        if type(pd) not in (PropertyDef, OptPropertyDef):
            return None
        t = attr_test(pd.constr)
        if t is None:
            return None
        props.append((name, t, type(pd) is OptPropertyDef))
    prop_names = frozenset(op_def.properties)
    attrs: list[tuple[str, AttrTest, bool]] = []
    for name, ad in op_def.attributes.items():
        if type(ad) not in (AttributeDef, OptAttributeDef):
            return None
        t = attr_test(ad.constr)
        if t is None:
            return None
        attrs.append((name, t, type(ad) is OptAttributeDef))

    def accept(op: Operation) -> bool:
        if not operands(op) or not results(op):
            return False
        regions = op.regions
        if len(regions) != n_regions:
            return False
        for i in single_block:
            if len(regions[i].blocks) != 1:
                return False
        for i, r in entry:
            block = regions[i].first_block
            if block is not None and not r(block.arg_types):
                return False
        if op.successors:
            return False
        p = op.properties
        for name, t, optional in props:
            v = p.get(name)
            if v is None:
                if optional and name not in p:
                    continue
                return False
            if not t(v):
                return False
        if not prop_names.issuperset(p):
            return False
        a = op.attributes
        for name, t, optional in attrs:
            v = a.get(name)
            if v is None:
                if optional and name not in a:
                    continue
                return False
            if not t(v):
                return False
        return True

    return accept


def isolated_ok(op: Operation) -> bool:
    """True only where xDSL's ``IsolatedFromAbove().verify(op)`` raises nothing: every operand of every op in
    ``op``'s regions (not descending into nested ``IsolatedFromAbove`` ops, which check themselves) is
    defined by an op or block under ``op``. One walk and a set of the ops and blocks under ``op`` instead of
    a parent-chain walk per operand; False (xDSL's check decides) at any inconsistent parent pointer."""
    nodes: set[int] = set()
    owners: list[Any] = []
    stack: list[tuple[Operation, bool]] = [(op, True)]
    while stack:
        o, check = stack.pop()
        for region in o.regions:
            if region.parent is not o:
                return False
            b = region._first_block  # pyright: ignore[reportPrivateUsage]
            while b is not None:
                if b.parent is not region:
                    return False
                nodes.add(id(b))
                c = b._first_op  # pyright: ignore[reportPrivateUsage]
                while c is not None:
                    if c.parent is not b:
                        return False
                    nodes.add(id(c))
                    if check:
                        owners.extend([v.owner for v in c._operands])  # pyright: ignore[reportPrivateUsage]
                    if c.regions:
                        stack.append((c, check and not c.has_trait(IsolatedFromAbove)))
                    c = c._next_op  # pyright: ignore[reportPrivateUsage]
                b = b._next_block  # pyright: ignore[reportPrivateUsage]
    return all(id(x) in nodes for x in owners)


_XDSL_VERIFY = "get_accessors_from_op_def.<locals>.verify_"


def install(cls: type[IRDLOperation]) -> bool:
    """Give ``cls`` (decorated by ``irdl_op_definition``) a ``verify_`` that runs :func:`compile_accept`'s
    test before xDSL's ``OpDef.verify`` (see the module docstring). Returns whether it did: False for a class
    whose ``verify_`` is not xDSL's generated one, or whose definition the test does not handle."""
    fn = cls.__dict__.get("verify_")
    if fn is None or getattr(fn, "__qualname__", "") != _XDSL_VERIFY or fn.__closure__ is None:
        return False
    cells = dict(zip(fn.__code__.co_freevars, (c.cell_contents for c in fn.__closure__), strict=True))
    op_def = cells.get("op_def")
    if op_def is not cls.get_irdl_definition() or set(cells) - {"op_def", "custom_verify"}:
        return False
    custom = cells.get("custom_verify")
    accept = compile_accept(op_def)
    if accept is None:
        return False
    irdl_verify = op_def.verify

    def verify_(self: IRDLOperation) -> None:
        try:
            ok = accept(self)
        except Exception:
            ok = False
        if ok:
            for trait in op_def.traits:
                if type(trait) is IsolatedFromAbove and isolated_ok(self):
                    continue
                trait.verify(self)
        else:
            irdl_verify(self)
        if custom is not None:
            custom(self)

    verify_.__qualname__ = f"{cls.__qualname__}.verify_"
    verify_.__doc__ = fn.__doc__
    verify_._pp_accept = accept  # type: ignore[attr-defined]
    verify_._pp_xdsl = fn  # type: ignore[attr-defined]
    cls.verify_ = verify_  # type: ignore[method-assign, assignment]
    return True


def accept_of(cls: type[Operation]) -> Accept | None:
    """The installed acceptance test of ``cls`` (None when :func:`install` did not give it one)."""
    return getattr(cls.__dict__.get("verify_"), "_pp_accept", None)


__all__ = ["accept_of", "attr_test", "compile_accept", "install", "isolated_ok", "range_test"]
