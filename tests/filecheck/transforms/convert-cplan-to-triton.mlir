// RUN: printf '[[nodes]]\nid = "n0"\nmemory_bytes = 1073741824\nbandwidth_bytes_per_s = 1.0e11\nflops_per_s = 1.0e12\nlink_bandwidth_bytes_per_s = 1.0e9\n' > %t.pool.toml
// RUN: pipeplan plan %models/stories260K.gguf --nodes %t.pool.toml --stages 1 --max-seq-len 64 -o %t.runplan.mlir
// RUN: pipeplan-opt %t.runplan.mlir -p 'convert-runplan-to-pplan{pool="%t.pool.toml" prompt_len=4},pplan-legalize{target=cuda-triton},pplan-select-implementations,pplan-resolve-costs{evidence=roofline},convert-pplan-to-cplan{binder=reference-queue keep_source=true},cplan-verify{require_source=true}' -o %t.cplan.mlir
// RUN: pipeplan-opt %t.cplan.mlir -p convert-cplan-to-triton | filecheck %s
// RUN: pipeplan-opt %t.cplan.mlir -p convert-cplan-to-triton | pipeplan-opt --print-op-generic | pipeplan-opt | filecheck %s
// RUN: pipeplan-opt %t.cplan.mlir -p 'convert-cplan-to-triton{model="%models/stories260K.gguf"}' | filecheck %s --check-prefix=ABI
// RUN: pipeplan-opt %t.runplan.mlir -p 'convert-runplan-to-pplan{pool="%t.pool.toml" prompt_len=4},pplan-legalize{target=virtual-queue},pplan-select-implementations,pplan-resolve-costs{evidence=roofline},convert-pplan-to-cplan{binder=reference-queue keep_source=true},convert-cplan-to-triton' --verify-diagnostics | filecheck %s --check-prefix=VQ
// RUN: pipeplan-opt %t.cplan.mlir -p 'convert-cplan-to-triton,convert-cplan-to-triton' --verify-diagnostics | filecheck %s --check-prefix=NONE
// RUN: pipeplan-opt %t.cplan.mlir -p 'convert-cplan-to-triton{model="%t.absent.gguf"}' --verify-diagnostics | filecheck %s --check-prefix=NOMODEL

// Issue 7 / AB-M-1, AB-M-4, AB-D-1: stories260K (1 stage, cuda-triton target, reference-queue binder)
// lowered to the tmachine dialect. The concrete plan is replaced by one tmachine.program whose streams
// are the plan's queues; each concrete command is one launch (kernel, grid, meta-parameters, buffer
// args as SSA operands, scalar args; a dependency on another stream's command waits on the token that command signals) with its plan step (step prefill/decode) and the concrete command's lineage (cmd, task, candidate impl and its #cplan.lineage); each allocation is
// one tmachine.buffer (dtype, shape, origin of its portable buffer). Kernel names are module:function within
// the target's kernel package (no runtime import path). Below: the 15 launches of decode block 0, in queue
// order (the round trip through the generic form prints the same).

// CHECK-NOT:  cplan.plan
// CHECK:      tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:{{[0-9a-f]+}}", revision = "pipeplan-tmachine/3"} {
// CHECK-NEXT:   %edge.e0 = tmachine.buffer "alloc.edge.e0" edge {device = "n0", dtype = "i32", shape = array<i64: 64>, origin = "edge e0 (token_in)"}
// CHECK:        %s0.w.token_embd.weight = tmachine.buffer "alloc.s0.w.token_embd.weight" weight {device = "n0", dtype = "f32", shape = array<i64: 512, 64>, origin = "token_embd.weight"}
// CHECK:        %s0.blk.0.cache_k = tmachine.buffer "alloc.s0.blk.0.cache_k" kv {device = "n0", dtype = "f32", shape = array<i64: 64, 4, 8>, origin = "blk.0.cache_k"}
// CHECK:        %done.prefill.s0.recv.e0 = tmachine.token "done.cmd.prefill.s0.recv.e0"
// CHECK-NEXT:   %done.decode.s0.recv.e0 = tmachine.token "done.cmd.decode.s0.recv.e0"
// CHECK-NEXT:   %done.prefill.s0.argmax.token = tmachine.token "done.cmd.prefill.s0.argmax.token"
// CHECK-NEXT:   %done.decode.s0.argmax.token = tmachine.token "done.cmd.decode.s0.argmax.token"
// CHECK-NEXT:   tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
// CHECK-NEXT:     tmachine.copy "i.cmd.prefill.s0.recv.e0" %edge.e0 -> %prefill.s0.input signal %done.prefill.s0.recv.e0 step prefill {cmd = "cmd.prefill.s0.recv.e0", bytes = 16 : i64, task = "prefill.s0.recv.e0", impl = "triton.recv", lineage = #cplan.lineage<prefill, stage 0, "edge:e0", edge "e0">}
// CHECK-NEXT:     tmachine.copy "i.cmd.prefill.s0.send.e1" %prefill.s0.token -> %edge.e1 waits(%done.prefill.s0.argmax.token) step prefill {cmd = "cmd.prefill.s0.send.e1", bytes = 4 : i64
// CHECK:        tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
// CHECK:          tmachine.launch "i.cmd.decode.s0.embedding_gather.token_embd" "embedding:_gather_kernel" (%decode.s0.input, %s0.w.token_embd.weight, %decode.s0.h0) waits(%done.decode.s0.recv.e0) step decode {cmd = "cmd.decode.s0.embedding_gather.token_embd", grid = array<i64: 1, 1, 1>, meta = {BLOCK_D = 64 : i64, FMT = 0 : i64}, scalars = {D = 64 : i64, scale = "$scale"}, autotune = false
// CHECK-NEXT:     tmachine.launch "i.cmd.decode.s0.b0.rms_norm.attn_norm" "rmsnorm:_rms_norm_kernel" (%decode.s0.h0, %s0.w.blk.0.attn_norm.weight, %decode.s0.blk.0.attn_in) step decode {cmd = "cmd.decode.s0.b0.rms_norm.attn_norm", grid = array<i64: 1, 1, 1>, meta = {BLOCK_D = 64 : i64}, scalars = {D = 64 : i64, eps = "$eps"}, autotune = false, task = "decode.s0.b0.rms_norm.attn_norm", impl = "triton.rms_norm", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">}
// CHECK-NEXT:     tmachine.launch "i.cmd.decode.s0.b0.matmul.attn_q" "gemv:_gemv_kernel" (%decode.s0.blk.0.attn_in, %s0.w.blk.0.attn_q.weight, %decode.s0.blk.0.q_proj) step decode {cmd = "cmd.decode.s0.b0.matmul.attn_q", grid = array<i64: 4, 1, 1>, meta = {BLOCK_K = 256 : i64, BLOCK_M = 1 : i64, BLOCK_N = 16 : i64, FMT = 0 : i64, USE_DOT = 0 : i64}, scalars = {K = 64 : i64, M = 1 : i64, N = 64 : i64}, autotune = true
// CHECK-NEXT:     tmachine.launch "i.cmd.decode.s0.b0.matmul.attn_k" {{.*}}grid = array<i64: 2, 1, 1>{{.*}}scalars = {K = 64 : i64, M = 1 : i64, N = 32 : i64}
// CHECK-NEXT:     tmachine.launch "i.cmd.decode.s0.b0.matmul.attn_v" {{.*}}grid = array<i64: 2, 1, 1>{{.*}}scalars = {K = 64 : i64, M = 1 : i64, N = 32 : i64}
// CHECK-NEXT:     tmachine.launch "i.cmd.decode.s0.b0.rope.q" "rope:_rope_kernel" (%decode.s0.blk.0.q_proj, %s0.rope_table, %decode.s0.blk.0.q) step decode {cmd = "cmd.decode.s0.b0.rope.q", grid = array<i64: 1, 1, 1>, meta = {BLOCK_H = 8 : i64, BLOCK_P = 4 : i64}, scalars = {H = 8 : i64, HD = 8 : i64, NEOX = "$mode", ROPE_DIM = 8 : i64, start_pos = "$start_pos"}
// CHECK-NEXT:     tmachine.launch "i.cmd.decode.s0.b0.rope.k" {{.*}}scalars = {H = 4 : i64, HD = 8 : i64, NEOX = "$mode", ROPE_DIM = 8 : i64, start_pos = "$start_pos"}
// CHECK-NEXT:     tmachine.launch "i.cmd.decode.s0.b0.kv_cache_write" "attention:_kv_write_kernel" (%decode.s0.blk.0.k, %decode.s0.blk.0.v, %s0.blk.0.cache_k, %s0.blk.0.cache_v) step decode {cmd = "cmd.decode.s0.b0.kv_cache_write", grid = array<i64: 1, 1, 1>, meta = {BLOCK = 32 : i64}, scalars = {WK = 32 : i64, WV = 32 : i64, start_pos = "$start_pos"}
// CHECK-NEXT:     tmachine.launch "i.cmd.decode.s0.b0.attention.attn" "attention:_attention_kernel" (%decode.s0.blk.0.q, %s0.blk.0.cache_k, %s0.blk.0.cache_v, %decode.s0.blk.0.attn) step decode {cmd = "cmd.decode.s0.b0.attention.attn", grid = array<i64: 1, 4, 1>, meta = {BLOCK_DK = 16 : i64, BLOCK_DV = 16 : i64, BLOCK_M = 1 : i64, BLOCK_N = 64 : i64, BLOCK_R = 16 : i64, G = 2 : i64}, scalars = {H = 8 : i64, HD_K = 8 : i64, HD_V = 8 : i64, HKV = 4 : i64, T = 1 : i64, WINDOW = "$window", scale = "$scale", start_pos = "$start_pos"}
// CHECK-NEXT:     tmachine.launch "i.cmd.decode.s0.b0.matmul.attn_output" {{.*}}grid = array<i64: 4, 1, 1>
// CHECK-NEXT:     tmachine.launch "i.cmd.decode.s0.b0.add.h_mid" "elementwise:_binary_kernel" {{.*}}grid = array<i64: 1, 1, 1>, meta = {BLOCK = 64 : i64, OP = 1 : i64}
// CHECK-NEXT:     tmachine.launch "i.cmd.decode.s0.b0.rms_norm.ffn_norm" "rmsnorm:_rms_norm_kernel"
// CHECK-NEXT:     tmachine.launch "i.cmd.decode.s0.b0.matmul.ffn_gate" {{.*}}grid = array<i64: 11, 1, 1>{{.*}}scalars = {K = 64 : i64, M = 1 : i64, N = 172 : i64}
// CHECK-NEXT:     tmachine.launch "i.cmd.decode.s0.b0.matmul.ffn_up" {{.*}}grid = array<i64: 11, 1, 1>
// CHECK-NEXT:     tmachine.launch "i.cmd.decode.s0.b0.silu_mul.ffn_act" {{.*}}meta = {BLOCK = 256 : i64, OP = 0 : i64}{{.*}}scalars = {F = 172 : i64}
// CHECK-NEXT:     tmachine.launch "i.cmd.decode.s0.b0.matmul.ffn_down" {{.*}}grid = array<i64: 4, 1, 1>{{.*}}scalars = {K = 172 : i64, M = 1 : i64, N = 64 : i64}
// CHECK-NEXT:     tmachine.launch "i.cmd.decode.s0.b0.add.h1" "elementwise:_binary_kernel" (%decode.s0.blk.0.h_mid, %decode.s0.blk.0.ffn_out, %decode.s0.h1)
// CHECK:          tmachine.view "i.cmd.decode.s0.last_row.h_last" "last_row" %decode.s0.h5 -> %decode.s0.h_last step decode {cmd = "cmd.decode.s0.last_row.h_last"
// CHECK:          tmachine.launch "i.cmd.decode.s0.argmax.token" "argmax:_argmax_kernel" (%decode.s0.output, %decode.s0.token) signal %done.decode.s0.argmax.token step decode {cmd = "cmd.decode.s0.argmax.token", grid = array<i64: 1, 1, 1>, meta = {BLOCK = 512 : i64}{{.*}}scalars = {V = 512 : i64}

// ABI:      tmachine.launch "i.cmd.decode.s0.embedding_gather.token_embd" {{.*}}scalars = {D = 64 : i64, scale = 1.000000e+00 : f64}
// ABI:      tmachine.launch "i.cmd.decode.s0.b0.rms_norm.attn_norm" {{.*}}scalars = {D = 64 : i64, eps = 9.9999997473787516e-06 : f64}
// ABI:      tmachine.launch "i.cmd.decode.s0.b0.rope.q" {{.*}}scalars = {H = 8 : i64, HD = 8 : i64, NEOX = 0 : i64, ROPE_DIM = 8 : i64, start_pos = "$start_pos"}
// ABI:      tmachine.launch "i.cmd.decode.s0.b0.attention.attn" {{.*}}scalars = {H = 8 : i64, HD_K = 8 : i64, HD_V = 8 : i64, HKV = 4 : i64, T = 1 : i64, WINDOW = 64 : i64, scale = 0.35355339059327373 : f64, start_pos = "$start_pos"}

// A plan bound to another target is a diagnostic, not a fallback (AB-I-2):
// VQ: convert-cplan-to-triton: the concrete plan targets 'virtual-queue@1', not cuda-triton

// Nothing left to lower is a diagnostic too:
// NONE: convert-cplan-to-triton: no cplan.plan to lower

// A model ABI that cannot be read is a one-line diagnostic naming the file:
// NOMODEL: convert-cplan-to-triton: error[file_not_found]: {{.*}}absent.gguf
