// RUN: %roundtrip | filecheck %s
// RUN: %generic-roundtrip | filecheck %s
// AB-M-1: the tmachine dialect (program, buffer, token, stream, launch, view, copy) round-trips in custom and generic
// form; instructions take the buffers they use as SSA operands, a cross-stream wait takes the token its producer
// signals (tokens at program level, before the streams, so they dominate every stream). The program is well-formed
// (unique ids, declared buffers and tokens, each token signalled once by another stream, no deadlock), which
// tmachine.program's verifier checks on parse. meta/scalars are keyword sets, printed key-sorted.

builtin.module {
  tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/3"} {
    %e0 = tmachine.buffer "e0" edge {device = "n0", dtype = "i32", shape = array<i64: 64>, origin = "edge e0 (token_in)"}
    %b0 = tmachine.buffer "b0" transient {device = "n0", dtype = "i32", shape = array<i64: 4>, origin = "prefill:input"}
    %w = tmachine.buffer "w" weight {device = "n0", dtype = "f32", shape = array<i64: 64, 64>, origin = "blk.0.attn_q.weight"}
    %b1 = tmachine.buffer "b1" transient {device = "n0", dtype = "f32", shape = array<i64: 4, 64>, origin = "prefill:q"}
    %b2 = tmachine.buffer "b2" transient {device = "n0", dtype = "f32", shape = array<i64: 1, 64>, origin = "prefill:h_last"}
    %e1 = tmachine.buffer "e1" edge {device = "n0", dtype = "f32", shape = array<i64: 64, 64>, origin = "edge e1 (activations)"}
    %done.c0 = tmachine.token "done.c0"
    %done.c2 = tmachine.token "done.c2"
    tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
      tmachine.copy "i.c0" %e0 -> %b0 signal %done.c0 step prefill {cmd = "c0", bytes = 16 : i64, task = "prefill.s0.recv.e0", impl = "triton.recv", lineage = #cplan.lineage<prefill, stage 0, "edge:e0", edge "e0">}
      tmachine.copy "i.c3" %b2 -> %e1 waits(%done.c2) step prefill {cmd = "c3", bytes = 256 : i64, task = "prefill.s0.send.e1", impl = "triton.send", lineage = #cplan.lineage<prefill, stage 0, "edge:e1", edge "e1">}
    }
    tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
      tmachine.launch "i.c1" "gemv:_gemv_kernel" (%b0, %w, %b1) waits(%done.c0) {cmd = "c1", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, USE_DOT = 0 : i64, BLOCK_M = 1 : i64}, scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, task = "prefill.s0.b0.matmul.attn_q", impl = "triton.matmul", lineage = #cplan.lineage<prefill, stage 0, block 0, "blk.0.attn_q">}
      tmachine.view "i.c2" "last_row" %b1 -> %b2 signal %done.c2 {cmd = "c2", task = "prefill.s0.last_row.h_last", impl = "triton.last_row", lineage = #cplan.lineage<prefill, stage 0, "h_last">}
    }
  }
}

// CHECK:      tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/3"} {
// CHECK-NEXT:   %e0 = tmachine.buffer "e0" edge {device = "n0", dtype = "i32", shape = array<i64: 64>, origin = "edge e0 (token_in)"}
// CHECK-NEXT:   %b0 = tmachine.buffer "b0" transient {device = "n0", dtype = "i32", shape = array<i64: 4>, origin = "prefill:input"}
// CHECK-NEXT:   %w = tmachine.buffer "w" weight {device = "n0", dtype = "f32", shape = array<i64: 64, 64>, origin = "blk.0.attn_q.weight"}
// CHECK-NEXT:   %b1 = tmachine.buffer "b1" transient {device = "n0", dtype = "f32", shape = array<i64: 4, 64>, origin = "prefill:q"}
// CHECK-NEXT:   %b2 = tmachine.buffer "b2" transient {device = "n0", dtype = "f32", shape = array<i64: 1, 64>, origin = "prefill:h_last"}
// CHECK-NEXT:   %e1 = tmachine.buffer "e1" edge {device = "n0", dtype = "f32", shape = array<i64: 64, 64>, origin = "edge e1 (activations)"}
// CHECK-NEXT:   %done.c0 = tmachine.token "done.c0"
// CHECK-NEXT:   %done.c2 = tmachine.token "done.c2"
// CHECK-NEXT:   tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
// CHECK-NEXT:     tmachine.copy "i.c0" %e0 -> %b0 signal %done.c0 step prefill {cmd = "c0", bytes = 16 : i64, task = "prefill.s0.recv.e0", impl = "triton.recv", lineage = #cplan.lineage<prefill, stage 0, "edge:e0", edge "e0">}
// CHECK-NEXT:     tmachine.copy "i.c3" %b2 -> %e1 waits(%done.c2) step prefill {cmd = "c3", bytes = 256 : i64, task = "prefill.s0.send.e1", impl = "triton.send", lineage = #cplan.lineage<prefill, stage 0, "edge:e1", edge "e1">}
// CHECK-NEXT:   }
// CHECK-NEXT:   tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
// CHECK-NEXT:     tmachine.launch "i.c1" "gemv:_gemv_kernel" (%b0, %w, %b1) waits(%done.c0) {cmd = "c1", grid = array<i64: 4, 1, 1>, meta = {BLOCK_M = 1 : i64, FMT = 3 : i64, USE_DOT = 0 : i64}, scalars = {K = 64 : i64, N = 64 : i64, start_pos = "$start_pos"}, autotune = true, task = "prefill.s0.b0.matmul.attn_q", impl = "triton.matmul", lineage = #cplan.lineage<prefill, stage 0, block 0, "blk.0.attn_q">}
// CHECK-NEXT:     tmachine.view "i.c2" "last_row" %b1 -> %b2 signal %done.c2 {cmd = "c2", task = "prefill.s0.last_row.h_last", impl = "triton.last_row", lineage = #cplan.lineage<prefill, stage 0, "h_last">}
// CHECK-NEXT:   }
// CHECK-NEXT: }
