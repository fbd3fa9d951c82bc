// RUN: %roundtrip | filecheck %s
// RUN: %generic-roundtrip | filecheck %s
// AB-M-1: the tmachine dialect (program, buffer, stream, launch, view, copy) round-trips in custom and generic form; the
// program is well-formed (unique ids, declared buffers, waits name commands of other streams, no deadlock), which
// tmachine.program's verifier checks on parse. meta/scalars are keyword sets, printed key-sorted.

builtin.module {
  tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/1"} {
    tmachine.buffer {id = "e0", device = "n0", dtype = "i32", shape = array<i64: 64>, lifetime = "edge", origin = "edge e0 (token_in)"}
    tmachine.buffer {id = "b0", device = "n0", dtype = "i32", shape = array<i64: 4>, lifetime = "transient", origin = "prefill:input"}
    tmachine.buffer {id = "w", device = "n0", dtype = "f32", shape = array<i64: 64, 64>, lifetime = "weight", origin = "blk.0.attn_q.weight"}
    tmachine.buffer {id = "b1", device = "n0", dtype = "f32", shape = array<i64: 4, 64>, lifetime = "transient", origin = "prefill:q"}
    tmachine.buffer {id = "b2", device = "n0", dtype = "f32", shape = array<i64: 1, 64>, lifetime = "transient", origin = "prefill:h_last"}
    tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
      tmachine.copy {id = "i.c0", cmd = "c0", src = "e0", dst = "b0", bytes = 16 : i64, step = "prefill", waits = [], lineage = "edge:e0"}
    }
    tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
      tmachine.launch {id = "i.c1", cmd = "c1", kernel = "gemv:_gemv_kernel", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, USE_DOT = 0 : i64, BLOCK_M = 1 : i64}, args = ["b0", "w", "b1"], scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, waits = ["c0"], lineage = "blk.0.attn_q -> c1"}
      tmachine.view {id = "i.c2", cmd = "c2", kind = "last_row", args = ["b1", "b2"], waits = [], lineage = "h_last"}
    }
  }
}

// CHECK:      tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/1"} {
// CHECK-NEXT:   tmachine.buffer {id = "e0", device = "n0", dtype = "i32", shape = array<i64: 64>, lifetime = "edge", origin = "edge e0 (token_in)"}
// CHECK-NEXT:   tmachine.buffer {id = "b0", device = "n0", dtype = "i32", shape = array<i64: 4>, lifetime = "transient", origin = "prefill:input"}
// CHECK-NEXT:   tmachine.buffer {id = "w", device = "n0", dtype = "f32", shape = array<i64: 64, 64>, lifetime = "weight", origin = "blk.0.attn_q.weight"}
// CHECK-NEXT:   tmachine.buffer {id = "b1", device = "n0", dtype = "f32", shape = array<i64: 4, 64>, lifetime = "transient", origin = "prefill:q"}
// CHECK-NEXT:   tmachine.buffer {id = "b2", device = "n0", dtype = "f32", shape = array<i64: 1, 64>, lifetime = "transient", origin = "prefill:h_last"}
// CHECK-NEXT:   tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
// CHECK-NEXT:     tmachine.copy {id = "i.c0", cmd = "c0", src = "e0", dst = "b0", bytes = 16 : i64, step = "prefill", waits = [], lineage = "edge:e0"}
// CHECK-NEXT:   }
// CHECK-NEXT:   tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
// CHECK-NEXT:     tmachine.launch {id = "i.c1", cmd = "c1", kernel = "gemv:_gemv_kernel", grid = array<i64: 4, 1, 1>, meta = {BLOCK_M = 1 : i64, FMT = 3 : i64, USE_DOT = 0 : i64}, args = ["b0", "w", "b1"], scalars = {K = 64 : i64, N = 64 : i64, start_pos = "$start_pos"}, autotune = true, waits = ["c0"], lineage = "blk.0.attn_q -> c1"}
// CHECK-NEXT:     tmachine.view {id = "i.c2", cmd = "c2", kind = "last_row", args = ["b1", "b2"], waits = [], lineage = "h_last"}
// CHECK-NEXT:   }
// CHECK-NEXT: }
