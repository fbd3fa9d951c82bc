// RUN: %verify-located | filecheck %s
// Every tmachine verifier message, one case each: the op verifiers (program target and body, buffer
// lifetime and shape, the launch ABI of one launch, view kind, copy size) and the whole-program checks AB-M-1
// that tmachine.program's verifier runs on parse (unique buffer and instruction ids, known steps, declared
// non-empty buffer arguments, waits on commands of other streams, no deadlock). Each case is the sound program
// of ops.mlir with one change; the CHECK lines below the offending op show the message, its location and that
// op's text, never the whole module.

// program: a target that is not cuda-triton
tmachine.program attributes {target = "virtual-queue@1", concrete = "sha256:00", revision = "pipeplan-tmachine/1"} {
// CHECK:      invalid.mlir:[[# @LINE - 1]]:1: error: tmachine.program targets 'virtual-queue@1', expected a cuda-triton target
// CHECK-NEXT: {{^}}  tmachine.program attributes {target = "virtual-queue@1",
  tmachine.buffer {id = "e0", device = "n0", dtype = "i32", shape = array<i64: 64>, lifetime = "edge", origin = "edge e0 (token_in)"}
  tmachine.buffer {id = "b0", device = "n0", dtype = "i32", shape = array<i64: 4>, lifetime = "transient", origin = "prefill:input"}
  tmachine.buffer {id = "w", device = "n0", dtype = "f32", shape = array<i64: 64, 64>, lifetime = "weight", origin = "blk.0.attn_q.weight"}
  tmachine.buffer {id = "b1", device = "n0", dtype = "f32", shape = array<i64: 4, 64>, lifetime = "transient", origin = "prefill:q"}
  tmachine.buffer {id = "b2", device = "n0", dtype = "f32", shape = array<i64: 1, 64>, lifetime = "transient", origin = "prefill:h_last"}
  tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
    tmachine.copy {id = "i.c0", cmd = "c0", src = "e0", dst = "b0", bytes = 16 : i64, step = "prefill", waits = [], lineage = "edge:e0"}
  }
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch {id = "i.c1", cmd = "c1", kernel = "gemv:_gemv_kernel", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, args = ["b0", "w", "b1"], scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, waits = ["c0"], lineage = "blk.0.attn_q -> c1"}
    tmachine.view {id = "i.c2", cmd = "c2", kind = "last_row", args = ["b1", "b2"], waits = [], lineage = "h_last"}
  }
}

// -----

// program: an op that is neither buffer nor stream
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/1"} {
  tmachine.buffer {id = "e0", device = "n0", dtype = "i32", shape = array<i64: 64>, lifetime = "edge", origin = "edge e0 (token_in)"}
  tmachine.buffer {id = "b0", device = "n0", dtype = "i32", shape = array<i64: 4>, lifetime = "transient", origin = "prefill:input"}
  tmachine.buffer {id = "w", device = "n0", dtype = "f32", shape = array<i64: 64, 64>, lifetime = "weight", origin = "blk.0.attn_q.weight"}
  tmachine.buffer {id = "b1", device = "n0", dtype = "f32", shape = array<i64: 4, 64>, lifetime = "transient", origin = "prefill:q"}
  tmachine.buffer {id = "b2", device = "n0", dtype = "f32", shape = array<i64: 1, 64>, lifetime = "transient", origin = "prefill:h_last"}
  builtin.module {
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: unexpected op 'builtin.module' in a tmachine.program (buffers and streams only)
  // CHECK-NEXT: {{^}}  builtin.module {
  }
  tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
    tmachine.copy {id = "i.c0", cmd = "c0", src = "e0", dst = "b0", bytes = 16 : i64, step = "prefill", waits = [], lineage = "edge:e0"}
  }
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch {id = "i.c1", cmd = "c1", kernel = "gemv:_gemv_kernel", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, args = ["b0", "w", "b1"], scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, waits = ["c0"], lineage = "blk.0.attn_q -> c1"}
    tmachine.view {id = "i.c2", cmd = "c2", kind = "last_row", args = ["b1", "b2"], waits = [], lineage = "h_last"}
  }
}

// -----

// program: two streams of one engine
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/1"} {
  tmachine.buffer {id = "e0", device = "n0", dtype = "i32", shape = array<i64: 64>, lifetime = "edge", origin = "edge e0 (token_in)"}
  tmachine.buffer {id = "b0", device = "n0", dtype = "i32", shape = array<i64: 4>, lifetime = "transient", origin = "prefill:input"}
  tmachine.buffer {id = "w", device = "n0", dtype = "f32", shape = array<i64: 64, 64>, lifetime = "weight", origin = "blk.0.attn_q.weight"}
  tmachine.buffer {id = "b1", device = "n0", dtype = "f32", shape = array<i64: 4, 64>, lifetime = "transient", origin = "prefill:q"}
  tmachine.buffer {id = "b2", device = "n0", dtype = "f32", shape = array<i64: 1, 64>, lifetime = "transient", origin = "prefill:h_last"}
  tmachine.stream attributes {engine = "cuda.stream", device = "n0"} {
  }
  tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
    tmachine.copy {id = "i.c0", cmd = "c0", src = "e0", dst = "b0", bytes = 16 : i64, step = "prefill", waits = [], lineage = "edge:e0"}
  }
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: stream n0/cuda.stream appears twice
  // CHECK-NEXT: {{^}}  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch {id = "i.c1", cmd = "c1", kernel = "gemv:_gemv_kernel", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, args = ["b0", "w", "b1"], scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, waits = ["c0"], lineage = "blk.0.attn_q -> c1"}
    tmachine.view {id = "i.c2", cmd = "c2", kind = "last_row", args = ["b1", "b2"], waits = [], lineage = "h_last"}
  }
}

// -----

// buffer: unknown lifetime
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/1"} {
  tmachine.buffer {id = "e0", device = "n0", dtype = "i32", shape = array<i64: 64>, lifetime = "edge", origin = "edge e0 (token_in)"}
  tmachine.buffer {id = "b0", device = "n0", dtype = "i32", shape = array<i64: 4>, lifetime = "transient", origin = "prefill:input"}
  tmachine.buffer {id = "w", device = "n0", dtype = "f32", shape = array<i64: 64, 64>, lifetime = "weight", origin = "blk.0.attn_q.weight"}
  tmachine.buffer {id = "b1", device = "n0", dtype = "f32", shape = array<i64: 4, 64>, lifetime = "transient", origin = "prefill:q"}
  tmachine.buffer {id = "b2", device = "n0", dtype = "f32", shape = array<i64: 1, 64>, lifetime = "scratch", origin = "prefill:h_last"}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: buffer 'b2': lifetime 'scratch' is not one of weight, kv, transient, edge
  // CHECK-NEXT: {{^}}  tmachine.buffer {id = "b2", device = "n0", dtype = "f32",
  tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
    tmachine.copy {id = "i.c0", cmd = "c0", src = "e0", dst = "b0", bytes = 16 : i64, step = "prefill", waits = [], lineage = "edge:e0"}
  }
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch {id = "i.c1", cmd = "c1", kernel = "gemv:_gemv_kernel", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, args = ["b0", "w", "b1"], scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, waits = ["c0"], lineage = "blk.0.attn_q -> c1"}
    tmachine.view {id = "i.c2", cmd = "c2", kind = "last_row", args = ["b1", "b2"], waits = [], lineage = "h_last"}
  }
}

// -----

// buffer: a negative dimension
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/1"} {
  tmachine.buffer {id = "e0", device = "n0", dtype = "i32", shape = array<i64: 64>, lifetime = "edge", origin = "edge e0 (token_in)"}
  tmachine.buffer {id = "b0", device = "n0", dtype = "i32", shape = array<i64: 4>, lifetime = "transient", origin = "prefill:input"}
  tmachine.buffer {id = "w", device = "n0", dtype = "f32", shape = array<i64: 64, 64>, lifetime = "weight", origin = "blk.0.attn_q.weight"}
  tmachine.buffer {id = "b1", device = "n0", dtype = "f32", shape = array<i64: 4, 64>, lifetime = "transient", origin = "prefill:q"}
  tmachine.buffer {id = "b2", device = "n0", dtype = "f32", shape = array<i64: -1, 64>, lifetime = "transient", origin = "prefill:h_last"}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: buffer 'b2': shape must be non-negative integers
  // CHECK-NEXT: {{^}}  tmachine.buffer {id = "b2", device = "n0", dtype = "f32",
  tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
    tmachine.copy {id = "i.c0", cmd = "c0", src = "e0", dst = "b0", bytes = 16 : i64, step = "prefill", waits = [], lineage = "edge:e0"}
  }
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch {id = "i.c1", cmd = "c1", kernel = "gemv:_gemv_kernel", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, args = ["b0", "w", "b1"], scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, waits = ["c0"], lineage = "blk.0.attn_q -> c1"}
    tmachine.view {id = "i.c2", cmd = "c2", kind = "last_row", args = ["b1", "b2"], waits = [], lineage = "h_last"}
  }
}

// -----

// stream: an op that is not an instruction
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
    tmachine.launch {id = "i.c1", cmd = "c1", kernel = "gemv:_gemv_kernel", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, args = ["b0", "w", "b1"], scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, waits = ["c0"], lineage = "blk.0.attn_q -> c1"}
    tmachine.view {id = "i.c2", cmd = "c2", kind = "last_row", args = ["b1", "b2"], waits = [], lineage = "h_last"}
    builtin.module {
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: unexpected op 'builtin.module' in a tmachine.stream
    // CHECK-NEXT: {{^}}  builtin.module {
    }
  }
}

// -----

// launch: a grid that is not 3 positive integers
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
    tmachine.launch {id = "i.c1", cmd = "c1", kernel = "gemv:_gemv_kernel", grid = array<i64: 4, 0, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, args = ["b0", "w", "b1"], scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, waits = ["c0"], lineage = "blk.0.attn_q -> c1"}
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: [AB-M-1] a machine program must respect its launch ABI and stream order: launch 'i.c1': grid must be 3 positive integers, got [4, 0, 1]
    // CHECK-NEXT: {{^}}  tmachine.launch {id = "i.c1", cmd = "c1",
    tmachine.view {id = "i.c2", cmd = "c2", kind = "last_row", args = ["b1", "b2"], waits = [], lineage = "h_last"}
  }
}

// -----

// launch: a kernel that is not module:function
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
    tmachine.launch {id = "i.c1", cmd = "c1", kernel = "gemv_kernel", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, args = ["b0", "w", "b1"], scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, waits = ["c0"], lineage = "blk.0.attn_q -> c1"}
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: [AB-M-1] a machine program must respect its launch ABI and stream order: launch 'i.c1': kernel 'gemv_kernel' is not 'module:function'
    // CHECK-NEXT: {{^}}  tmachine.launch {id = "i.c1", cmd = "c1", kernel = "gemv_kernel",
    tmachine.view {id = "i.c2", cmd = "c2", kind = "last_row", args = ["b1", "b2"], waits = [], lineage = "h_last"}
  }
}

// -----

// launch: a meta-parameter that is not an integer
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
    tmachine.launch {id = "i.c1", cmd = "c1", kernel = "gemv:_gemv_kernel", grid = array<i64: 4, 1, 1>, meta = {FMT = "q4_k", BLOCK_M = 1 : i64}, args = ["b0", "w", "b1"], scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, waits = ["c0"], lineage = "blk.0.attn_q -> c1"}
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: [AB-M-1] a machine program must respect its launch ABI and stream order: launch 'i.c1': meta-parameter 'FMT' must be an integer, got "q4_k"
    // CHECK-NEXT: {{^}}  tmachine.launch {id = "i.c1", cmd = "c1",
    tmachine.view {id = "i.c2", cmd = "c2", kind = "last_row", args = ["b1", "b2"], waits = [], lineage = "h_last"}
  }
}

// -----

// launch: a scalar that is neither a number nor a $runtime name
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
    tmachine.launch {id = "i.c1", cmd = "c1", kernel = "gemv:_gemv_kernel", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, args = ["b0", "w", "b1"], scalars = {N = 64 : i64, K = 64 : i64, start_pos = "start_pos"}, autotune = true, waits = ["c0"], lineage = "blk.0.attn_q -> c1"}
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: [AB-M-1] a machine program must respect its launch ABI and stream order: launch 'i.c1': scalar 'start_pos' must be a number or a '$runtime' name, got "start_pos"
    // CHECK-NEXT: {{^}}  tmachine.launch {id = "i.c1", cmd = "c1",
    tmachine.view {id = "i.c2", cmd = "c2", kind = "last_row", args = ["b1", "b2"], waits = [], lineage = "h_last"}
  }
}

// -----

// launch: args that are not strings (the shared string-array check)
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
    tmachine.launch {id = "i.c1", cmd = "c1", kernel = "gemv:_gemv_kernel", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, args = ["b0", 1 : i64, "b1"], scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, waits = ["c0"], lineage = "blk.0.attn_q -> c1"}
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: launch 'i.c1': args must be an array of strings, got 1 : i64
    // CHECK-NEXT: {{^}}  tmachine.launch {id = "i.c1", cmd = "c1",
    tmachine.view {id = "i.c2", cmd = "c2", kind = "last_row", args = ["b1", "b2"], waits = [], lineage = "h_last"}
  }
}

// -----

// view: unknown view kind
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
    tmachine.launch {id = "i.c1", cmd = "c1", kernel = "gemv:_gemv_kernel", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, args = ["b0", "w", "b1"], scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, waits = ["c0"], lineage = "blk.0.attn_q -> c1"}
    tmachine.view {id = "i.c2", cmd = "c2", kind = "first_row", args = ["b1", "b2"], waits = [], lineage = "h_last"}
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: view 'i.c2': unknown view kind 'first_row'
    // CHECK-NEXT: {{^}}  tmachine.view {id = "i.c2", cmd = "c2", kind = "first_row",
  }
}

// -----

// copy: negative bytes
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/1"} {
  tmachine.buffer {id = "e0", device = "n0", dtype = "i32", shape = array<i64: 64>, lifetime = "edge", origin = "edge e0 (token_in)"}
  tmachine.buffer {id = "b0", device = "n0", dtype = "i32", shape = array<i64: 4>, lifetime = "transient", origin = "prefill:input"}
  tmachine.buffer {id = "w", device = "n0", dtype = "f32", shape = array<i64: 64, 64>, lifetime = "weight", origin = "blk.0.attn_q.weight"}
  tmachine.buffer {id = "b1", device = "n0", dtype = "f32", shape = array<i64: 4, 64>, lifetime = "transient", origin = "prefill:q"}
  tmachine.buffer {id = "b2", device = "n0", dtype = "f32", shape = array<i64: 1, 64>, lifetime = "transient", origin = "prefill:h_last"}
  tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
    tmachine.copy {id = "i.c0", cmd = "c0", src = "e0", dst = "b0", bytes = -16 : i64, step = "prefill", waits = [], lineage = "edge:e0"}
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: copy 'i.c0': bytes must be >= 0
    // CHECK-NEXT: {{^}}  tmachine.copy {id = "i.c0", cmd = "c0", src = "e0", dst = "b0",
  }
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch {id = "i.c1", cmd = "c1", kernel = "gemv:_gemv_kernel", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, args = ["b0", "w", "b1"], scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, waits = ["c0"], lineage = "blk.0.attn_q -> c1"}
    tmachine.view {id = "i.c2", cmd = "c2", kind = "last_row", args = ["b1", "b2"], waits = [], lineage = "h_last"}
  }
}

// -----

// AB-M-1: a buffer id declared twice
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/1"} {
  tmachine.buffer {id = "e0", device = "n0", dtype = "i32", shape = array<i64: 64>, lifetime = "edge", origin = "edge e0 (token_in)"}
  tmachine.buffer {id = "b0", device = "n0", dtype = "i32", shape = array<i64: 4>, lifetime = "transient", origin = "prefill:input"}
  tmachine.buffer {id = "w", device = "n0", dtype = "f32", shape = array<i64: 64, 64>, lifetime = "weight", origin = "blk.0.attn_q.weight"}
  tmachine.buffer {id = "b1", device = "n0", dtype = "f32", shape = array<i64: 4, 64>, lifetime = "transient", origin = "prefill:q"}
  tmachine.buffer {id = "b2", device = "n0", dtype = "f32", shape = array<i64: 1, 64>, lifetime = "transient", origin = "prefill:h_last"}
  tmachine.buffer {id = "b2", device = "n0", dtype = "f32", shape = array<i64: 1, 64>, lifetime = "transient", origin = "decode:h_last"}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: [AB-M-1] a machine program must respect its launch ABI and stream order: duplicate buffer id 'b2'
  // CHECK-NEXT: {{^}}  tmachine.buffer {id = "b2", device = "n0", dtype = "f32",
  tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
    tmachine.copy {id = "i.c0", cmd = "c0", src = "e0", dst = "b0", bytes = 16 : i64, step = "prefill", waits = [], lineage = "edge:e0"}
  }
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch {id = "i.c1", cmd = "c1", kernel = "gemv:_gemv_kernel", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, args = ["b0", "w", "b1"], scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, waits = ["c0"], lineage = "blk.0.attn_q -> c1"}
    tmachine.view {id = "i.c2", cmd = "c2", kind = "last_row", args = ["b1", "b2"], waits = [], lineage = "h_last"}
  }
}

// -----

// AB-M-1: an instruction id used twice
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
    tmachine.launch {id = "i.c1", cmd = "c1", kernel = "gemv:_gemv_kernel", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, args = ["b0", "w", "b1"], scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, waits = ["c0"], lineage = "blk.0.attn_q -> c1"}
    tmachine.view {id = "i.c1", cmd = "c2", kind = "last_row", args = ["b1", "b2"], waits = [], lineage = "h_last"}
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: [AB-M-1] a machine program must respect its launch ABI and stream order: duplicate instruction id 'i.c1'
    // CHECK-NEXT: {{^}}  tmachine.view {id = "i.c1", cmd = "c2", kind = "last_row",
  }
}

// -----

// AB-M-1: an instruction of an unknown step
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/1"} {
  tmachine.buffer {id = "e0", device = "n0", dtype = "i32", shape = array<i64: 64>, lifetime = "edge", origin = "edge e0 (token_in)"}
  tmachine.buffer {id = "b0", device = "n0", dtype = "i32", shape = array<i64: 4>, lifetime = "transient", origin = "prefill:input"}
  tmachine.buffer {id = "w", device = "n0", dtype = "f32", shape = array<i64: 64, 64>, lifetime = "weight", origin = "blk.0.attn_q.weight"}
  tmachine.buffer {id = "b1", device = "n0", dtype = "f32", shape = array<i64: 4, 64>, lifetime = "transient", origin = "prefill:q"}
  tmachine.buffer {id = "b2", device = "n0", dtype = "f32", shape = array<i64: 1, 64>, lifetime = "transient", origin = "prefill:h_last"}
  tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
    tmachine.copy {id = "i.c0", cmd = "c0", src = "e0", dst = "b0", bytes = 16 : i64, step = "warmup", waits = [], lineage = "edge:e0"}
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: [AB-M-1] a machine program must respect its launch ABI and stream order: instruction 'i.c0' belongs to step 'warmup', not one of prefill, decode
    // CHECK-NEXT: {{^}}  tmachine.copy {id = "i.c0", cmd = "c0", src = "e0", dst = "b0",
  }
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch {id = "i.c1", cmd = "c1", kernel = "gemv:_gemv_kernel", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, args = ["b0", "w", "b1"], scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, waits = ["c0"], lineage = "blk.0.attn_q -> c1"}
    tmachine.view {id = "i.c2", cmd = "c2", kind = "last_row", args = ["b1", "b2"], waits = [], lineage = "h_last"}
  }
}

// -----

// AB-M-1: an empty buffer argument
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
    tmachine.launch {id = "i.c1", cmd = "c1", kernel = "gemv:_gemv_kernel", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, args = ["b0", "", "b1"], scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, waits = ["c0"], lineage = "blk.0.attn_q -> c1"}
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: [AB-M-1] a machine program must respect its launch ABI and stream order: instruction 'i.c1' has an empty buffer argument
    // CHECK-NEXT: {{^}}  tmachine.launch {id = "i.c1", cmd = "c1",
    tmachine.view {id = "i.c2", cmd = "c2", kind = "last_row", args = ["b1", "b2"], waits = [], lineage = "h_last"}
  }
}

// -----

// AB-M-1: a launch argument the program does not declare
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
    tmachine.launch {id = "i.c1", cmd = "c1", kernel = "gemv:_gemv_kernel", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, args = ["b0", "w9", "b1"], scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, waits = ["c0"], lineage = "blk.0.attn_q -> c1"}
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: [AB-M-1] a machine program must respect its launch ABI and stream order: instruction 'i.c1' names buffer 'w9', which the program does not declare
    // CHECK-NEXT: {{^}}  tmachine.launch {id = "i.c1", cmd = "c1",
    tmachine.view {id = "i.c2", cmd = "c2", kind = "last_row", args = ["b1", "b2"], waits = [], lineage = "h_last"}
  }
}

// -----

// AB-M-1: a wait for a command no instruction lowers
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
    tmachine.launch {id = "i.c1", cmd = "c1", kernel = "gemv:_gemv_kernel", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, args = ["b0", "w", "b1"], scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, waits = ["c7"], lineage = "blk.0.attn_q -> c1"}
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: [AB-M-1] a machine program must respect its launch ABI and stream order: instruction 'i.c1' waits for command 'c7' that no instruction of the program lowers
    // CHECK-NEXT: {{^}}  tmachine.launch {id = "i.c1", cmd = "c1",
    tmachine.view {id = "i.c2", cmd = "c2", kind = "last_row", args = ["b1", "b2"], waits = [], lineage = "h_last"}
  }
}

// -----

// AB-M-1: a wait on the instruction's own stream
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
    tmachine.launch {id = "i.c1", cmd = "c1", kernel = "gemv:_gemv_kernel", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, args = ["b0", "w", "b1"], scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, waits = ["c0"], lineage = "blk.0.attn_q -> c1"}
    tmachine.view {id = "i.c2", cmd = "c2", kind = "last_row", args = ["b1", "b2"], waits = ["c1"], lineage = "h_last"}
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: [AB-M-1] a machine program must respect its launch ABI and stream order: instruction 'i.c2' waits for command 'c1' of its own stream (stream order already orders them)
    // CHECK-NEXT: {{^}}  tmachine.view {id = "i.c2", cmd = "c2", kind = "last_row",
  }
}

// -----

// AB-M-1: stream order and waits that deadlock
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/1"} {
  tmachine.buffer {id = "e0", device = "n0", dtype = "i32", shape = array<i64: 64>, lifetime = "edge", origin = "edge e0 (token_in)"}
  tmachine.buffer {id = "b0", device = "n0", dtype = "i32", shape = array<i64: 4>, lifetime = "transient", origin = "prefill:input"}
  tmachine.buffer {id = "w", device = "n0", dtype = "f32", shape = array<i64: 64, 64>, lifetime = "weight", origin = "blk.0.attn_q.weight"}
  tmachine.buffer {id = "b1", device = "n0", dtype = "f32", shape = array<i64: 4, 64>, lifetime = "transient", origin = "prefill:q"}
  tmachine.buffer {id = "b2", device = "n0", dtype = "f32", shape = array<i64: 1, 64>, lifetime = "transient", origin = "prefill:h_last"}
  tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
    tmachine.copy {id = "i.c0", cmd = "c0", src = "e0", dst = "b0", bytes = 16 : i64, step = "prefill", waits = ["c2"], lineage = "edge:e0"}
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: [AB-M-1] a machine program must respect its launch ABI and stream order: stream order and waits deadlock at instruction 'i.c0'
    // CHECK-NEXT: {{^}}  tmachine.copy {id = "i.c0", cmd = "c0", src = "e0", dst = "b0",
  }
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch {id = "i.c1", cmd = "c1", kernel = "gemv:_gemv_kernel", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, args = ["b0", "w", "b1"], scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, waits = ["c0"], lineage = "blk.0.attn_q -> c1"}
    tmachine.view {id = "i.c2", cmd = "c2", kind = "last_row", args = ["b1", "b2"], waits = [], lineage = "h_last"}
  }
}
