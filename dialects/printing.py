"""Printing IR text fast: :class:`PlanPrinter` is xDSL's ``Printer`` with string literals that need no
escape written in one call (xDSL writes a literal byte by byte), so the text is byte-identical.

Plans are mostly string attributes (ids, GGUF tensor names, lineage); in a 1.5 MB machine program
printing a literal char by char was most of ``pipeplan-opt``'s print time.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from typing import IO

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.printer import Printer
from xdsl.targets.mlir import MLIRTarget

_PLAIN = re.compile(rb"[ !#-\[\]-~]*")
"""Bytes xDSL's ``print_bytes_literal`` prints as themselves: printable ASCII but ``"`` and ``\\``."""


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
