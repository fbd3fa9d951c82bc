"""``pipeplan-opt``: ``xdsl-opt`` with pipeplan's dialects and passes registered.

Behaves exactly like ``xdsl-opt`` (same flags: ``-p``, ``--verify-diagnostics``,
``--print-op-generic``, ``--split-input-file`` ...); it only overrides registration.
"""

from __future__ import annotations

import sys

from xdsl.utils.exceptions import DiagnosticException, ParseError
from xdsl.xdsl_opt_main import xDSLOptMain


class PipeplanOptMain(xDSLOptMain):
    """xDSLOptMain plus every pipeplan dialect and pass (duplicates from plugins are skipped)."""

    def register_all_dialects(self) -> None:
        super().register_all_dialects()
        from pipeplan.universe import PIPEPLAN_UNIVERSE as u

        for name, factory in u.all_dialects.items():
            if name not in self.ctx.registered_dialect_names:
                self.ctx.register_dialect(name, factory)

    def register_all_passes(self) -> None:
        super().register_all_passes()
        from pipeplan.universe import PIPEPLAN_UNIVERSE as u

        for name, factory in u.all_passes.items():
            self.register_pass(name, factory)


def main() -> None:
    """Entry point of ``pipeplan-opt``.

    Diagnostics (a verifier or pass failure, a parse error, a typed pipeplan error) are printed
    on stderr without a Python traceback and the exit status is 1, like ``mlir-opt``. With
    ``--verify-diagnostics`` xDSL itself prints them on stdout and exits 0 (lit tests rely on it).
    """
    from pipeplan.errors import PipeplanError

    try:
        PipeplanOptMain(description="pipeplan optimizer driver").run()
    except (DiagnosticException, ParseError, PipeplanError) as e:
        print(f"error: {e}", file=sys.stderr)
        for note in getattr(e, "__notes__", ()):
            print(note, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
