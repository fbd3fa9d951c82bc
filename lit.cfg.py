# lit configuration for pipeplan's FileCheck tests (tests/filecheck/**.mlir).
import os
import shutil
import sys

import lit.formats

config.name = "pipeplan"  # noqa: F821
config.test_format = lit.formats.ShTest(execute_external=False)  # noqa: F821  (lit 23: internal shell)
config.suffixes = [".mlir"]  # noqa: F821
# The suite root is this directory so that `lit tests/filecheck` (a path below it) resolves; the
# directories that hold .mlir files which are not tests are excluded (excludes match basenames).
config.test_source_root = os.path.dirname(__file__)  # noqa: F821
config.excludes = ["Inputs", ".venv", "Output", ".git", "build", "examples"]  # noqa: F821

# The tools of the environment running lit (its bin/ holds pipeplan-opt and filecheck) come first, so another
# pipeplan-opt earlier on PATH (an activated venv of another checkout) is never the one tested.
_venv_bin = os.path.dirname(sys.executable)
_bin = _venv_bin if os.path.exists(os.path.join(_venv_bin, "pipeplan-opt")) else os.path.dirname(shutil.which("pipeplan-opt") or sys.executable)
config.environment["PATH"] = os.pathsep.join(filter(None, [_bin, os.environ.get("PATH", "")]))  # noqa: F821
config.environment["PYTHONHASHSEED"] = "0"  # noqa: F821
config.substitutions.append(("%models", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "shared", "models"))))  # noqa: F821
# Round trips: custom -> custom, and custom -> generic -> custom.
config.substitutions.append(("%roundtrip", "pipeplan-opt %s | pipeplan-opt"))  # noqa: F821
config.substitutions.append(("%generic-roundtrip", "pipeplan-opt %s --print-op-generic | pipeplan-opt"))  # noqa: F821
config.substitutions.append(("%verify-diag", "pipeplan-opt %s --split-input-file --verify-diagnostics"))  # noqa: F821
# As %verify-diag, each verifier failure printed with its location and the offending op's first line.
config.substitutions.append(("%verify-located", "pipeplan-opt %s --split-input-file --verify-diagnostics --located-diagnostics"))  # noqa: F821
# Upstream MLIR interop tests (REQUIRES: mlir-opt) need mlir-opt-19 (Debian's mlir-19-tools). Absent, they are
# UNSUPPORTED and this says so on stderr even under `lit -q`; PIPEPLAN_REQUIRE_MLIR_OPT=1 (set by .ci/run) or
# `--param require_mlir_opt=1` makes its absence a fatal configuration error instead.
_require = lit_config.params.get("require_mlir_opt", os.environ.get("PIPEPLAN_REQUIRE_MLIR_OPT", ""))  # noqa: F821
if shutil.which("mlir-opt-19", path=config.environment["PATH"]):  # noqa: F821
    config.available_features.add("mlir-opt")  # noqa: F821
elif _require.strip().lower() in ("1", "true", "yes", "on"):
    lit_config.fatal("mlir-opt-19 not found on PATH, and PIPEPLAN_REQUIRE_MLIR_OPT / require_mlir_opt says the "  # noqa: F821
                     "MLIR interop tests must run: install mlir-19-tools")
else:
    sys.stderr.write("lit.cfg.py: note: mlir-opt-19 not found on PATH: the MLIR interop tests (REQUIRES: mlir-opt) "
                     "are UNSUPPORTED (install mlir-19-tools; PIPEPLAN_REQUIRE_MLIR_OPT=1 makes this an error)\n")
