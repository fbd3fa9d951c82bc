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

_bin = os.path.dirname(shutil.which("pipeplan-opt") or os.path.join(os.path.dirname(sys.executable), "pipeplan-opt"))
config.environment["PATH"] = os.pathsep.join(filter(None, [_bin, os.environ.get("PATH", "")]))  # noqa: F821
config.environment["PYTHONHASHSEED"] = "0"  # noqa: F821
config.substitutions.append(("%models", os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "shared", "models"))))  # noqa: F821
# Round trips: custom -> custom, and custom -> generic -> custom.
config.substitutions.append(("%roundtrip", "pipeplan-opt %s | pipeplan-opt"))  # noqa: F821
config.substitutions.append(("%generic-roundtrip", "pipeplan-opt %s --print-op-generic | pipeplan-opt"))  # noqa: F821
config.substitutions.append(("%verify-diag", "pipeplan-opt %s --split-input-file --verify-diagnostics"))  # noqa: F821
if shutil.which("mlir-opt-19"):
    config.available_features.add("mlir-opt")  # noqa: F821
