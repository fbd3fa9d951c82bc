"""Start-up of ``pipeplan-opt``: loading the dialects and passes of the plan pipeline imports neither gguf nor
numpy (~0.2 s of every run), and the ggml type table written out in :mod:`pipeplan.dialects.ggml_types` is
gguf's."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

EXAMPLE_FACTS = Path(__file__).resolve().parents[2] / "examples" / "llama3-70b.toml"


def test_ggml_type_table_is_ggufs():
    """RP-AR-6 / AB-R-6 sizes: ``GGML_TYPE_SIZES`` is gguf's ``GGML_QUANT_SIZES`` by ``GGMLQuantizationType``
    member name, in its order, listing every member; pplan's ``DTYPE_SIZES`` the same by lower-case name."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
    from pipeplan.dialects.ggml_types import GGML_TYPE_SIZES
    from pipeplan.dialects.pplan import DTYPE_SIZES

    assert list(GGML_TYPE_SIZES.items()) == [(t.name, v) for t, v in GGML_QUANT_SIZES.items()]
    assert set(GGML_TYPE_SIZES) == set(GGMLQuantizationType.__members__)
    assert list(DTYPE_SIZES.items()) == [(t.name.lower(), v) for t, v in GGML_QUANT_SIZES.items()]


def test_plan_pipeline_modules_import_no_gguf_or_numpy():
    """The modules a runplan -> vmachine ``pipeplan-opt`` run loads import neither gguf nor numpy, nor does
    reading a model-facts TOML (``convert-cplan-to-vmachine{model=...toml}``)."""
    code = textwrap.dedent(f"""
        import sys
        import pipeplan.tools.opt
        from pipeplan.dialects.runplan_checks import check_tensor
        from pipeplan.plan_types import TensorInfo
        check_tensor(TensorInfo("blk.0.w", "Q4_K", (256, 2), 0, 0, 288, 0))
        from pipeplan.frontend.facts_toml import load_facts_toml
        load_facts_toml({str(EXAMPLE_FACTS)!r})
        from pipeplan.universe import PIPEPLAN_UNIVERSE as u
        for name in ("runplan", "pplan", "cplan", "vmachine"):
            u.all_dialects[name]()
        for name in ("convert-runplan-to-pplan", "pplan-legalize", "pplan-select-implementations",
                     "pplan-resolve-costs", "convert-pplan-to-cplan", "cplan-verify", "convert-cplan-to-vmachine"):
            u.all_passes[name]()
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("gguf", "numpy")))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
