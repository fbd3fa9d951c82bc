"""Parity of the CPU kernel table with llama.cpp, layer by layer: where do the numbers first differ?

Usage::

    .venv/bin/python bench/ggml_parity.py MODEL.gguf --prompt-ids 2,14946,3324,496,990 --decode 8 \\
        [--llama-python /work/llama-venv/bin/python] [--n-ctx 512] [--out bench/results/ggml_parity.json]

llama.cpp (llama-cpp-python, in the interpreter ``--llama-python`` names; never a pipeplan dependency) runs
the prompt as one batch and then ``--decode`` single tokens (the prompt's own greedy continuation), with
the eval callback (``llama_context_params.cb_eval``) copying every F32 tensor it computes. pipeplan's
executor runs the same steps on one stage with ``--target cpu`` kernels and keeps every buffer. Per step
the table lists, in program order, the first buffer that is not bit-identical to llama.cpp's tensor of
the same role (``attn_norm-N``, ``Qcur-N``, ``kqv_out-N``, ``l_out-N``, ...), its largest difference, and
the logits' largest difference (0 everywhere: the table reproduces llama.cpp), with the number of buffers
found equal before it. ``PIPEPLAN_CPU_KERNELS=portable`` shows where the portable matmuls' summation
order departs. Writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

LLAMA_WORKER = r"""
import ctypes, json, sys
import numpy as np
from llama_cpp import llama_cpp as C

class Tensor(ctypes.Structure):  # struct ggml_tensor (ggml.h, GGML_MAX_DIMS 4, GGML_MAX_SRC 10, name 64)
    _fields_ = [("type", ctypes.c_int), ("buffer", ctypes.c_void_p), ("ne", ctypes.c_int64 * 4),
                ("nb", ctypes.c_size_t * 4), ("op", ctypes.c_int), ("op_params", ctypes.c_int32 * 16),
                ("flags", ctypes.c_int32), ("src", ctypes.c_void_p * 10), ("view_src", ctypes.c_void_p),
                ("view_offs", ctypes.c_size_t), ("data", ctypes.c_void_p), ("name", ctypes.c_char * 64),
                ("extra", ctypes.c_void_p), ("padding", ctypes.c_char * 8)]

model, ids, n_decode, n_ctx, out = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
dump, step = {}, [0]

def cb(t, ask, _):
    g = ctypes.cast(t, ctypes.POINTER(Tensor)).contents
    if ask:
        return True
    if g.type != 0 or "(" in g.name.decode():  # F32 results, no views
        return True
    ne, nb = list(g.ne), list(g.nb)
    n = 1 + sum((ne[i] - 1) * nb[i] for i in range(4))
    raw = np.frombuffer((ctypes.c_char * (n + (-n) % 4)).from_address(g.data), np.float32)
    a = np.lib.stride_tricks.as_strided(raw, shape=ne[::-1], strides=nb[::-1]).copy()
    key = f"{step[0]}:{g.name.decode()}"
    while key in dump:
        key += "#"
    dump[key] = a.reshape(-1, ne[0])
    return True

callback = C.ggml_backend_sched_eval_callback(cb)
m = C.llama_model_load_from_file(model.encode(), C.llama_model_default_params())
cp = C.llama_context_default_params()
cp.n_ctx, cp.n_threads, cp.n_threads_batch, cp.flash_attn_type, cp.cb_eval = n_ctx, 1, 1, 0, callback
ctx = C.llama_init_from_model(m, cp)
nv = C.llama_vocab_n_tokens(C.llama_model_get_vocab(m))
seq, pos, greedy = [ids], 0, []
while seq:
    toks = seq.pop(0)
    b = C.llama_batch_init(len(toks), 0, 1)
    b.n_tokens = len(toks)
    for i, tk in enumerate(toks):
        b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = tk, pos + i, 1, int(i == len(toks) - 1)
        b.seq_id[i][0] = 0
    assert C.llama_decode(ctx, b) == 0
    logits = np.ctypeslib.as_array(C.llama_get_logits_ith(ctx, len(toks) - 1), shape=(nv,)).copy()
    dump[f"{step[0]}:logits"] = logits[None]
    C.llama_batch_free(b)
    pos += len(toks)
    greedy.append(int(np.argmax(logits)))
    step[0] += 1
    if step[0] <= n_decode:
        seq.append([greedy[-1]])
np.savez(out, **dump)
print(json.dumps(greedy))
"""

ROLES = [("attn_in", ("attn_norm",)), ("q_proj", ("Qcur",)), ("k_proj", ("Kcur",)), ("v", ("Vcur",)),
         ("q_norm", ("Qcur_normed",)), ("k_norm", ("Kcur_normed",)), ("q", ("Qcur##", "Qcur#")),
         ("k", ("Kcur##", "Kcur#")), ("attn", ("kqv_out",)), ("attn_post", ("attn_post_norm",)),
         ("h_mid", ("sa_out", "ffn_inp")), ("ffn_in", ("ffn_norm",)), ("gate", ("ffn_gate",)), ("up", ("ffn_up",)),
         ("ffn_act", ("ffn_geglu", "ffn_swiglu")), ("ffn_out", ("ffn_out",)), ("ffn_post", ("ffn_post_norm",))]
"""pipeplan buffer suffix (``blk.N.<suffix>``) -> llama.cpp tensor names of that role, the first present
wins (``<name>-N``; ``#`` marks the n-th tensor of that name: gemma3's Qcur is renamed after the matmul,
the norm and the rope, llama's after the matmul and the rope)."""


def compare(model: str, ids: list[int], n_decode: int, n_ctx: int, llama_python: str) -> dict:
    import numpy as np
    import torch
    from pipeplan.frontend.gguf_facts import read_model_facts
    from pipeplan.runtime.kernels import cpu
    from pipeplan.runtime.loader import stage_slices
    from pipeplan.runtime.program import STAGE_INPUT, START_POS, HParams, StageExecutor, build_stage_program

    with tempfile.TemporaryDirectory() as tmp:
        npz = os.path.join(tmp, "llama.npz")
        res = subprocess.run([llama_python, "-c", LLAMA_WORKER, model, json.dumps(ids), str(n_decode), str(n_ctx), npz],
                             capture_output=True, text=True, check=True)
        greedy = json.loads(res.stdout.strip().splitlines()[-1])
        ref = dict(np.load(npz))
    torch.set_num_threads(1)
    cpu.set_num_threads(1)
    facts = read_model_facts(model)
    hp = HParams.from_facts(facts)
    w = cpu.load_stage_weights(list(facts.files), stage_slices(facts, 0, hp.n_layer, True, True))
    ex = StageExecutor(hp, build_stage_program(hp, 0, hp.n_layer, True, True, n_ctx), w, n_ctx, cpu)
    pairs = [("h0", "inp_scaled" if hp.embd_scale != 1.0 else "inp_embd")]
    for b in range(hp.n_layer):
        for ours, names in ROLES:
            keys = [n.replace("#", "") + f"-{b}" + "#" * n.count("#") for n in names]
            pairs.append((f"blk.{b}.{ours}", next((k for k in keys if f"0:{k}" in ref), keys[0])))
        pairs.append((f"h{b + 1}", f"l_out-{b}"))
    steps, pos = [], 0
    for s, toks in enumerate([ids] + [[t] for t in greedy[:n_decode]]):
        env = dict(ex._static)
        env[STAGE_INPUT], env[START_POS] = np.asarray(toks, dtype=np.int64), pos  # the cpu executor's numpy
        cpu.begin_step(pos, len(toks))
        with torch.inference_mode():
            for i, (fn, ins, outs, kw) in enumerate(ex._calls):
                if i == ex._last_row_at:
                    env["h_last"] = env[ex._last_row[1]][-1:]
                r = fn(*[env[n] for n in ins], **kw)
                for n, v in zip(outs, (r,) if len(outs) == 1 else (r or ()), strict=True):
                    env[n] = v
                if i == ex._tail_at and len(toks) > 1:  # the executor's last_only tail: the output row only
                    for n in ex._tail_rows:
                        env[n] = env[n][-1:]
        cpu.begin_step(0, 0)
        ex.n_past = pos = pos + len(toks)
        first, compared = None, 0
        for ours, theirs in pairs:
            a, b_ = env.get(ours), ref.get(f"{s}:{theirs}")
            if a is None or b_ is None:
                continue
            a = np.asarray(a).reshape(-1, b_.shape[-1])[-b_.shape[0]:]  # llama.cpp's last layer keeps the output rows
            compared += a.shape == b_.shape
            if a.shape == b_.shape and not np.array_equal(a, b_):
                first = {"buffer": ours, "llama_cpp": theirs, "max_abs_diff": float(np.abs(a - b_).max())}
                break
        logits = np.asarray(env["output"])[-1]
        steps.append({"step": s, "rows": len(toks), "first_difference": first, "buffers_compared": compared,
                      "logits_max_abs_diff": float(np.abs(logits - ref[f"{s}:logits"][0]).max()),
                      "argmax": int(logits.argmax()), "llama_cpp_argmax": greedy[s]})
    return {"model": Path(model).name, "prompt_ids": ids, "steps": steps,
            "bit_identical": all(st["first_difference"] is None and st["logits_max_abs_diff"] == 0 for st in steps)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--prompt-ids", required=True, help="comma-separated token ids (BOS included)")
    ap.add_argument("--decode", type=int, default=8)
    ap.add_argument("--n-ctx", type=int, default=512)
    ap.add_argument("--llama-python", default=os.environ.get("PIPEPLAN_LLAMA_PYTHON", sys.executable))
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "ggml_parity.json")
    args = ap.parse_args(argv)
    doc = compare(args.model, [int(i) for i in args.prompt_ids.split(",")], args.decode, args.n_ctx, args.llama_python)
    print(f"{doc['model']}: prompt {len(doc['prompt_ids'])} tokens, {args.decode} decode steps")
    print(f"{'step':>4} {'rows':>4} {'equal':>5}  {'first buffer that differs':36s} {'max |diff|':>10}  "
          f"{'logits |diff|':>13}  argmax")
    for st in doc["steps"]:
        f = st["first_difference"]
        where = f"{f['buffer']} ({f['llama_cpp']})" if f else "none"
        diff = f"{f['max_abs_diff']:.3e}" if f else "0"
        n_eq = st["buffers_compared"] - (f is not None)
        print(f"{st['step']:>4} {st['rows']:>4} {n_eq:>5}  {where:36s} {diff:>10}  {st['logits_max_abs_diff']:>13.3e}  "
              f"{st['argmax']} / {st['llama_cpp_argmax']}")
    print("bit-identical to llama.cpp" if doc["bit_identical"] else "NOT bit-identical to llama.cpp")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
