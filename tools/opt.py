"""``pipeplan-opt``: ``xdsl-opt`` with pipeplan's dialects and passes registered.

Behaves exactly like ``xdsl-opt`` (same flags: ``-p``, ``--verify-diagnostics``,
``--print-op-generic``, ``--split-input-file`` ...); it only overrides registration.
"""

from __future__ import annotations

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
    """Entry point of ``pipeplan-opt``."""
    PipeplanOptMain(description="pipeplan optimizer driver").run()


if __name__ == "__main__":
    main()
