"""Printing IR text fast: :class:`PlanPrinter` is xDSL's ``Printer`` with string literals that need no
escape written in one call (xDSL writes a literal byte by byte), and attribute dictionaries of plain
strings, signless/index integers and unit attributes written as one string (xDSL dispatches per key, value,
type and separator), so the text is byte-identical.

Plans are mostly string attributes (ids, GGUF tensor names, lineage); in a 1.5 MB machine program
printing a literal char by char was most of ``pipeplan-opt``'s print time.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO

from xdsl.context import Context
from xdsl.dialects.builtin import (
    IndexType,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    Signedness,
    StringAttr,
    UnitAttr,
)
from xdsl.ir import Attribute, Operation
from xdsl.printer import Printer
from xdsl.targets.mlir import MLIRTarget
from xdsl.utils.mlir_lexer import MLIRLexer

_PLAIN = re.compile(rb"[ !#-\[\]-~]*")
"""Bytes xDSL's ``print_bytes_literal`` prints as themselves: printable ASCII but ``"`` and ``\\``."""
_PLAIN_STR = re.compile(r"[ !#-\[\]-~]*")
"""The same characters in a ``str`` (any other character encodes to bytes outside them)."""
_SIGN_PREFIX = {Signedness.SIGNLESS: "i", Signedness.SIGNED: "si", Signedness.UNSIGNED: "ui"}

_KEY_TEXT: dict[str, str | None] = {}
"""Attribute-dictionary key -> its printed form (bare identifier, or plain string literal; None: neither)."""


def _key_text(key: str) -> str | None:
    text = _KEY_TEXT.get(key, "")
    if text == "":
        if MLIRLexer.bare_identifier_regex.fullmatch(key) is not None:
            text = key
        elif _PLAIN_STR.fullmatch(key):
            text = f'"{key}"'
        else:
            text = None
        if len(_KEY_TEXT) < 4096:
            _KEY_TEXT[key] = text
    return text


def _int_type_text(t: Attribute) -> str | None:
    """``print_attribute`` of a builtin integer or index type (None for any other type)."""
    if type(t) is IntegerType:
        prefix = _SIGN_PREFIX.get(t.signedness.data)
        return None if prefix is None else f"{prefix}{t.width.data:d}"
    if type(t) is IndexType:
        return "index"
    return None


def attr_text(a: Attribute) -> str | None:
    """What xDSL's ``print_attribute`` prints for ``a`` when it is a plain string (no escape), an integer of
    a builtin integer or index type, or None for anything else (printed by xDSL)."""
    t = type(a)
    if t is StringAttr:
        d = a.data  # type: ignore[attr-defined]
        return f'"{d}"' if _PLAIN_STR.fullmatch(d) else None
    if t is IntegerAttr:
        ty = a.type  # type: ignore[attr-defined]
        ty_text = _int_type_text(ty)
        if ty_text is None:
            return None
        v = a.value.data  # type: ignore[attr-defined]
        if ty_text == "i1":
            return "true" if v else "false"
        return f"{v:d} : {ty_text}"
    return None


class PlanPrinter(Printer):
    """``Printer`` with a one-write fast path for string literals without escapes, and for text without a
    newline on a text stream (one write and the column count; xDSL's ``print_string`` encodes, counts
    newlines and dispatches per piece: ~300,000 pieces in a 1.5 MB program). Same output."""

    def print_string(self, text: str, *, indent: int | None = None) -> None:
        if self.newline == "\n" and "\n" not in text:
            self._current_column += len(text)
            self.stream.write(text)  # type: ignore[arg-type]
        else:
            super().print_string(text, indent=indent)

    def print_attr_dict(self, attr_dict: Mapping[str, Attribute]) -> None:
        """xDSL's ``{k = v, ...}`` with the entries :func:`attr_text` handles (and unit attributes, printed
        as their key) written as one string; any other entry is printed by xDSL in its place."""
        pending = ["{"]
        first = True
        for k, v in attr_dict.items():
            if not first:
                pending.append(", ")
            first = False
            kt = _key_text(k)
            if kt is not None:
                if isinstance(v, UnitAttr):
                    pending.append(kt)
                    continue
                vt = attr_text(v)
                if vt is not None:
                    pending.append(kt)
                    pending.append(" = ")
                    pending.append(vt)
                    continue
            self.print_string("".join(pending))
            pending = []
            self._print_attr_string((k, v))
        pending.append("}")
        self.print_string("".join(pending))

    def print_bytes_literal(self, bytestring: bytes) -> None:
        if _PLAIN.fullmatch(bytestring):
            self.print_string(f'"{bytestring.decode("ascii")}"')
        else:
            super().print_bytes_literal(bytestring)


def print_ir(op: Operation, *, generic: bool = False) -> str:
    """``op`` printed by :class:`PlanPrinter` (custom syntax unless ``generic``), no trailing newline."""
    buf = io.StringIO()
    PlanPrinter(stream=buf, print_generic_format=generic).print_op(op)
    return buf.getvalue()


@dataclass(frozen=True)
class PlanMLIRTarget(MLIRTarget):
    """xDSL's ``mlir`` output target (``-t mlir``, the default) printing with :class:`PlanPrinter`."""

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        if self.syntax_highlight:
            super().emit(ctx, module, output)
            return
        printer = PlanPrinter(stream=output, print_generic_format=self.print_generic_format,
                              print_properties_as_attributes=self.print_properties_as_attributes,
                              print_debuginfo=self.print_debuginfo)
        printer.print_op(module)
        printer.print_metadata(ctx.loaded_dialects)
        print("\n", file=output)


__all__ = ["PlanMLIRTarget", "PlanPrinter", "print_ir"]
