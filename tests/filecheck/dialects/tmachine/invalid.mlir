// RUN: %verify-located --parsing-diagnostics | filecheck %s
// Every tmachine verifier message, one case each: the op verifiers (program target and body, buffer
// lifetime and shape, an instruction's step (a #tmachine<step ...> enum: an unknown one is a parse error; the
// step of its lineage), the launch ABI of one launch, view kind, copy size) and the whole-program checks AB-M-1
// that tmachine.program's verifier runs on parse from the SSA structure (buffers and tokens before the streams;
// unique buffer, token and instruction ids; buffer and token operands declared by the program, buffer ids
// non-empty; each token signalled once; waits on tokens signalled by another stream; no deadlock). Each case is
// the sound program of ops.mlir with one change; the CHECK lines below the offending op show the message, its
// location and that op's text, never the whole module.

// program: a target that is not cuda-triton
tmachine.program attributes {target = "virtual-queue@1", concrete = "sha256:00", revision = "pipeplan-tmachine/3"} {
// CHECK:      invalid.mlir:[[# @LINE - 1]]:1: error: tmachine.program targets 'virtual-queue@1', expected a cuda-triton target
// CHECK-NEXT: {{^}}  tmachine.program attributes {target = "virtual-queue@1",
  %e0 = tmachine.buffer "e0" edge {device = "n0", dtype = "i32", shape = array<i64: 64>, origin = "edge e0 (token_in)"}
  %b0 = tmachine.buffer "b0" transient {device = "n0", dtype = "i32", shape = array<i64: 4>, origin = "prefill:input"}
  %w = tmachine.buffer "w" weight {device = "n0", dtype = "f32", shape = array<i64: 64, 64>, origin = "blk.0.attn_q.weight"}
  %b1 = tmachine.buffer "b1" transient {device = "n0", dtype = "f32", shape = array<i64: 4, 64>, origin = "prefill:q"}
  %b2 = tmachine.buffer "b2" transient {device = "n0", dtype = "f32", shape = array<i64: 1, 64>, origin = "prefill:h_last"}
  %done.c0 = tmachine.token "done.c0"
  tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
    tmachine.copy "i.c0" %e0 -> %b0 signal %done.c0 step prefill {cmd = "c0", bytes = 16 : i64, task = "prefill.s0.recv.e0", impl = "triton.recv", lineage = #cplan.lineage<prefill, stage 0, "edge:e0", edge "e0">}
  }
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch "i.c1" "gemv:_gemv_kernel" (%b0, %w, %b1) waits(%done.c0) {cmd = "c1", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, task = "prefill.s0.b0.matmul.attn_q", impl = "triton.matmul", lineage = #cplan.lineage<prefill, stage 0, block 0, "blk.0.attn_q">}
    tmachine.view "i.c2" "last_row" %b1 -> %b2 {cmd = "c2", task = "prefill.s0.last_row.h_last", impl = "triton.last_row", lineage = #cplan.lineage<prefill, stage 0, "h_last">}
  }
}

// -----

// program: an op that is neither buffer, token nor stream
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/3"} {
  %e0 = tmachine.buffer "e0" edge {device = "n0", dtype = "i32", shape = array<i64: 64>, origin = "edge e0 (token_in)"}
  %b0 = tmachine.buffer "b0" transient {device = "n0", dtype = "i32", shape = array<i64: 4>, origin = "prefill:input"}
  %w = tmachine.buffer "w" weight {device = "n0", dtype = "f32", shape = array<i64: 64, 64>, origin = "blk.0.attn_q.weight"}
  %b1 = tmachine.buffer "b1" transient {device = "n0", dtype = "f32", shape = array<i64: 4, 64>, origin = "prefill:q"}
  %b2 = tmachine.buffer "b2" transient {device = "n0", dtype = "f32", shape = array<i64: 1, 64>, origin = "prefill:h_last"}
  %done.c0 = tmachine.token "done.c0"
  builtin.module {
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: unexpected op 'builtin.module' in a tmachine.program (buffers, tokens and streams only)
  // CHECK-NEXT: {{^}}  builtin.module {
  }
  tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
    tmachine.copy "i.c0" %e0 -> %b0 signal %done.c0 step prefill {cmd = "c0", bytes = 16 : i64, task = "prefill.s0.recv.e0", impl = "triton.recv", lineage = #cplan.lineage<prefill, stage 0, "edge:e0", edge "e0">}
  }
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch "i.c1" "gemv:_gemv_kernel" (%b0, %w, %b1) waits(%done.c0) {cmd = "c1", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, task = "prefill.s0.b0.matmul.attn_q", impl = "triton.matmul", lineage = #cplan.lineage<prefill, stage 0, block 0, "blk.0.attn_q">}
    tmachine.view "i.c2" "last_row" %b1 -> %b2 {cmd = "c2", task = "prefill.s0.last_row.h_last", impl = "triton.last_row", lineage = #cplan.lineage<prefill, stage 0, "h_last">}
  }
}

// -----

// program: a buffer declared after a stream (it would not dominate that stream's uses)
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/3"} {
  %e0 = tmachine.buffer "e0" edge {device = "n0", dtype = "i32", shape = array<i64: 64>, origin = "edge e0 (token_in)"}
  %b0 = tmachine.buffer "b0" transient {device = "n0", dtype = "i32", shape = array<i64: 4>, origin = "prefill:input"}
  %w = tmachine.buffer "w" weight {device = "n0", dtype = "f32", shape = array<i64: 64, 64>, origin = "blk.0.attn_q.weight"}
  %b1 = tmachine.buffer "b1" transient {device = "n0", dtype = "f32", shape = array<i64: 4, 64>, origin = "prefill:q"}
  %b2 = tmachine.buffer "b2" transient {device = "n0", dtype = "f32", shape = array<i64: 1, 64>, origin = "prefill:h_last"}
  %done.c0 = tmachine.token "done.c0"
  tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
    tmachine.copy "i.c0" %e0 -> %b0 signal %done.c0 step prefill {cmd = "c0", bytes = 16 : i64, task = "prefill.s0.recv.e0", impl = "triton.recv", lineage = #cplan.lineage<prefill, stage 0, "edge:e0", edge "e0">}
  }
  %late = tmachine.buffer "late" transient {device = "n0", dtype = "f32", shape = array<i64: 1>, origin = "prefill:x"}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: 'tmachine.buffer' after a tmachine.stream (buffers and tokens come before the streams that use them)
  // CHECK-NEXT: {{^}}  %late = tmachine.buffer "late"
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch "i.c1" "gemv:_gemv_kernel" (%b0, %w, %b1) waits(%done.c0) {cmd = "c1", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, task = "prefill.s0.b0.matmul.attn_q", impl = "triton.matmul", lineage = #cplan.lineage<prefill, stage 0, block 0, "blk.0.attn_q">}
    tmachine.view "i.c2" "last_row" %b1 -> %b2 {cmd = "c2", task = "prefill.s0.last_row.h_last", impl = "triton.last_row", lineage = #cplan.lineage<prefill, stage 0, "h_last">}
  }
}

// -----

// program: two streams of one engine
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/3"} {
  %e0 = tmachine.buffer "e0" edge {device = "n0", dtype = "i32", shape = array<i64: 64>, origin = "edge e0 (token_in)"}
  %b0 = tmachine.buffer "b0" transient {device = "n0", dtype = "i32", shape = array<i64: 4>, origin = "prefill:input"}
  %w = tmachine.buffer "w" weight {device = "n0", dtype = "f32", shape = array<i64: 64, 64>, origin = "blk.0.attn_q.weight"}
  %b1 = tmachine.buffer "b1" transient {device = "n0", dtype = "f32", shape = array<i64: 4, 64>, origin = "prefill:q"}
  %b2 = tmachine.buffer "b2" transient {device = "n0", dtype = "f32", shape = array<i64: 1, 64>, origin = "prefill:h_last"}
  %done.c0 = tmachine.token "done.c0"
  tmachine.stream attributes {engine = "cuda.stream", device = "n0"} {
  }
  tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
    tmachine.copy "i.c0" %e0 -> %b0 signal %done.c0 step prefill {cmd = "c0", bytes = 16 : i64, task = "prefill.s0.recv.e0", impl = "triton.recv", lineage = #cplan.lineage<prefill, stage 0, "edge:e0", edge "e0">}
  }
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: stream n0/cuda.stream appears twice
  // CHECK-NEXT: {{^}}  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch "i.c1" "gemv:_gemv_kernel" (%b0, %w, %b1) waits(%done.c0) {cmd = "c1", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, task = "prefill.s0.b0.matmul.attn_q", impl = "triton.matmul", lineage = #cplan.lineage<prefill, stage 0, block 0, "blk.0.attn_q">}
    tmachine.view "i.c2" "last_row" %b1 -> %b2 {cmd = "c2", task = "prefill.s0.last_row.h_last", impl = "triton.last_row", lineage = #cplan.lineage<prefill, stage 0, "h_last">}
  }
}

// -----

// buffer: unknown lifetime
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/3"} {
  %e0 = tmachine.buffer "e0" edge {device = "n0", dtype = "i32", shape = array<i64: 64>, origin = "edge e0 (token_in)"}
  %b0 = tmachine.buffer "b0" transient {device = "n0", dtype = "i32", shape = array<i64: 4>, origin = "prefill:input"}
  %w = tmachine.buffer "w" weight {device = "n0", dtype = "f32", shape = array<i64: 64, 64>, origin = "blk.0.attn_q.weight"}
  %b1 = tmachine.buffer "b1" transient {device = "n0", dtype = "f32", shape = array<i64: 4, 64>, origin = "prefill:q"}
  %b2 = tmachine.buffer "b2" scratch {device = "n0", dtype = "f32", shape = array<i64: 1, 64>, origin = "prefill:h_last"}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:30
  // CHECK-NEXT: {{^}}  %b2 = tmachine.buffer "b2" scratch {device = "n0", dtype = "f32",
  // CHECK:      Expected `weight`, `kv`, `transient`, or `edge`.
  %done.c0 = tmachine.token "done.c0"
  tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
    tmachine.copy "i.c0" %e0 -> %b0 signal %done.c0 step prefill {cmd = "c0", bytes = 16 : i64, task = "prefill.s0.recv.e0", impl = "triton.recv", lineage = #cplan.lineage<prefill, stage 0, "edge:e0", edge "e0">}
  }
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch "i.c1" "gemv:_gemv_kernel" (%b0, %w, %b1) waits(%done.c0) {cmd = "c1", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, task = "prefill.s0.b0.matmul.attn_q", impl = "triton.matmul", lineage = #cplan.lineage<prefill, stage 0, block 0, "blk.0.attn_q">}
    tmachine.view "i.c2" "last_row" %b1 -> %b2 {cmd = "c2", task = "prefill.s0.last_row.h_last", impl = "triton.last_row", lineage = #cplan.lineage<prefill, stage 0, "h_last">}
  }
}

// -----

// buffer: a negative dimension
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/3"} {
  %e0 = tmachine.buffer "e0" edge {device = "n0", dtype = "i32", shape = array<i64: 64>, origin = "edge e0 (token_in)"}
  %b0 = tmachine.buffer "b0" transient {device = "n0", dtype = "i32", shape = array<i64: 4>, origin = "prefill:input"}
  %w = tmachine.buffer "w" weight {device = "n0", dtype = "f32", shape = array<i64: 64, 64>, origin = "blk.0.attn_q.weight"}
  %b1 = tmachine.buffer "b1" transient {device = "n0", dtype = "f32", shape = array<i64: 4, 64>, origin = "prefill:q"}
  %b2 = tmachine.buffer "b2" transient {device = "n0", dtype = "f32", shape = array<i64: -1, 64>, origin = "prefill:h_last"}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: buffer 'b2': shape must be non-negative integers
  // CHECK-NEXT: {{^}}  %b2 = tmachine.buffer "b2" transient {device = "n0", dtype = "f32",
  %done.c0 = tmachine.token "done.c0"
  tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
    tmachine.copy "i.c0" %e0 -> %b0 signal %done.c0 step prefill {cmd = "c0", bytes = 16 : i64, task = "prefill.s0.recv.e0", impl = "triton.recv", lineage = #cplan.lineage<prefill, stage 0, "edge:e0", edge "e0">}
  }
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch "i.c1" "gemv:_gemv_kernel" (%b0, %w, %b1) waits(%done.c0) {cmd = "c1", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, task = "prefill.s0.b0.matmul.attn_q", impl = "triton.matmul", lineage = #cplan.lineage<prefill, stage 0, block 0, "blk.0.attn_q">}
    tmachine.view "i.c2" "last_row" %b1 -> %b2 {cmd = "c2", task = "prefill.s0.last_row.h_last", impl = "triton.last_row", lineage = #cplan.lineage<prefill, stage 0, "h_last">}
  }
}

// -----

// stream: an op that is not an instruction
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/3"} {
  %e0 = tmachine.buffer "e0" edge {device = "n0", dtype = "i32", shape = array<i64: 64>, origin = "edge e0 (token_in)"}
  %b0 = tmachine.buffer "b0" transient {device = "n0", dtype = "i32", shape = array<i64: 4>, origin = "prefill:input"}
  %w = tmachine.buffer "w" weight {device = "n0", dtype = "f32", shape = array<i64: 64, 64>, origin = "blk.0.attn_q.weight"}
  %b1 = tmachine.buffer "b1" transient {device = "n0", dtype = "f32", shape = array<i64: 4, 64>, origin = "prefill:q"}
  %b2 = tmachine.buffer "b2" transient {device = "n0", dtype = "f32", shape = array<i64: 1, 64>, origin = "prefill:h_last"}
  %done.c0 = tmachine.token "done.c0"
  tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
    tmachine.copy "i.c0" %e0 -> %b0 signal %done.c0 step prefill {cmd = "c0", bytes = 16 : i64, task = "prefill.s0.recv.e0", impl = "triton.recv", lineage = #cplan.lineage<prefill, stage 0, "edge:e0", edge "e0">}
    builtin.module {
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: unexpected op 'builtin.module' in a tmachine.stream
    // CHECK-NEXT: {{^}}  builtin.module {
    }
  }
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch "i.c1" "gemv:_gemv_kernel" (%b0, %w, %b1) waits(%done.c0) {cmd = "c1", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, task = "prefill.s0.b0.matmul.attn_q", impl = "triton.matmul", lineage = #cplan.lineage<prefill, stage 0, block 0, "blk.0.attn_q">}
    tmachine.view "i.c2" "last_row" %b1 -> %b2 {cmd = "c2", task = "prefill.s0.last_row.h_last", impl = "triton.last_row", lineage = #cplan.lineage<prefill, stage 0, "h_last">}
  }
}

// -----

// launch: a grid that is not 3 positive integers
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/3"} {
  %e0 = tmachine.buffer "e0" edge {device = "n0", dtype = "i32", shape = array<i64: 64>, origin = "edge e0 (token_in)"}
  %b0 = tmachine.buffer "b0" transient {device = "n0", dtype = "i32", shape = array<i64: 4>, origin = "prefill:input"}
  %w = tmachine.buffer "w" weight {device = "n0", dtype = "f32", shape = array<i64: 64, 64>, origin = "blk.0.attn_q.weight"}
  %b1 = tmachine.buffer "b1" transient {device = "n0", dtype = "f32", shape = array<i64: 4, 64>, origin = "prefill:q"}
  %b2 = tmachine.buffer "b2" transient {device = "n0", dtype = "f32", shape = array<i64: 1, 64>, origin = "prefill:h_last"}
  %done.c0 = tmachine.token "done.c0"
  tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
    tmachine.copy "i.c0" %e0 -> %b0 signal %done.c0 step prefill {cmd = "c0", bytes = 16 : i64, task = "prefill.s0.recv.e0", impl = "triton.recv", lineage = #cplan.lineage<prefill, stage 0, "edge:e0", edge "e0">}
  }
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch "i.c1" "gemv:_gemv_kernel" (%b0, %w, %b1) waits(%done.c0) {cmd = "c1", grid = array<i64: 4, 0, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, task = "prefill.s0.b0.matmul.attn_q", impl = "triton.matmul", lineage = #cplan.lineage<prefill, stage 0, block 0, "blk.0.attn_q">}
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: [AB-M-1] a machine program must respect its launch ABI and stream order: launch 'i.c1': grid must be 3 positive integers, got [4, 0, 1]
    // CHECK-NEXT: {{^}}  tmachine.launch "i.c1" "gemv:_gemv_kernel"
    tmachine.view "i.c2" "last_row" %b1 -> %b2 {cmd = "c2", task = "prefill.s0.last_row.h_last", impl = "triton.last_row", lineage = #cplan.lineage<prefill, stage 0, "h_last">}
  }
}

// -----

// launch: a kernel that is not module:function
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/3"} {
  %e0 = tmachine.buffer "e0" edge {device = "n0", dtype = "i32", shape = array<i64: 64>, origin = "edge e0 (token_in)"}
  %b0 = tmachine.buffer "b0" transient {device = "n0", dtype = "i32", shape = array<i64: 4>, origin = "prefill:input"}
  %w = tmachine.buffer "w" weight {device = "n0", dtype = "f32", shape = array<i64: 64, 64>, origin = "blk.0.attn_q.weight"}
  %b1 = tmachine.buffer "b1" transient {device = "n0", dtype = "f32", shape = array<i64: 4, 64>, origin = "prefill:q"}
  %b2 = tmachine.buffer "b2" transient {device = "n0", dtype = "f32", shape = array<i64: 1, 64>, origin = "prefill:h_last"}
  %done.c0 = tmachine.token "done.c0"
  tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
    tmachine.copy "i.c0" %e0 -> %b0 signal %done.c0 step prefill {cmd = "c0", bytes = 16 : i64, task = "prefill.s0.recv.e0", impl = "triton.recv", lineage = #cplan.lineage<prefill, stage 0, "edge:e0", edge "e0">}
  }
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch "i.c1" "gemv_kernel" (%b0, %w, %b1) waits(%done.c0) {cmd = "c1", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, task = "prefill.s0.b0.matmul.attn_q", impl = "triton.matmul", lineage = #cplan.lineage<prefill, stage 0, block 0, "blk.0.attn_q">}
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: [AB-M-1] a machine program must respect its launch ABI and stream order: launch 'i.c1': kernel 'gemv_kernel' is not 'module:function'
    // CHECK-NEXT: {{^}}  tmachine.launch "i.c1" "gemv_kernel"
    tmachine.view "i.c2" "last_row" %b1 -> %b2 {cmd = "c2", task = "prefill.s0.last_row.h_last", impl = "triton.last_row", lineage = #cplan.lineage<prefill, stage 0, "h_last">}
  }
}

// -----

// launch: a meta-parameter that is not an integer
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/3"} {
  %e0 = tmachine.buffer "e0" edge {device = "n0", dtype = "i32", shape = array<i64: 64>, origin = "edge e0 (token_in)"}
  %b0 = tmachine.buffer "b0" transient {device = "n0", dtype = "i32", shape = array<i64: 4>, origin = "prefill:input"}
  %w = tmachine.buffer "w" weight {device = "n0", dtype = "f32", shape = array<i64: 64, 64>, origin = "blk.0.attn_q.weight"}
  %b1 = tmachine.buffer "b1" transient {device = "n0", dtype = "f32", shape = array<i64: 4, 64>, origin = "prefill:q"}
  %b2 = tmachine.buffer "b2" transient {device = "n0", dtype = "f32", shape = array<i64: 1, 64>, origin = "prefill:h_last"}
  %done.c0 = tmachine.token "done.c0"
  tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
    tmachine.copy "i.c0" %e0 -> %b0 signal %done.c0 step prefill {cmd = "c0", bytes = 16 : i64, task = "prefill.s0.recv.e0", impl = "triton.recv", lineage = #cplan.lineage<prefill, stage 0, "edge:e0", edge "e0">}
  }
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch "i.c1" "gemv:_gemv_kernel" (%b0, %w, %b1) waits(%done.c0) {cmd = "c1", grid = array<i64: 4, 1, 1>, meta = {FMT = "q4_k", BLOCK_M = 1 : i64}, scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, task = "prefill.s0.b0.matmul.attn_q", impl = "triton.matmul", lineage = #cplan.lineage<prefill, stage 0, block 0, "blk.0.attn_q">}
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: [AB-M-1] a machine program must respect its launch ABI and stream order: launch 'i.c1': meta-parameter 'FMT' must be an integer, got "q4_k"
    // CHECK-NEXT: {{^}}  tmachine.launch "i.c1" "gemv:_gemv_kernel"
    tmachine.view "i.c2" "last_row" %b1 -> %b2 {cmd = "c2", task = "prefill.s0.last_row.h_last", impl = "triton.last_row", lineage = #cplan.lineage<prefill, stage 0, "h_last">}
  }
}

// -----

// launch: a scalar that is neither a number nor a $runtime name
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/3"} {
  %e0 = tmachine.buffer "e0" edge {device = "n0", dtype = "i32", shape = array<i64: 64>, origin = "edge e0 (token_in)"}
  %b0 = tmachine.buffer "b0" transient {device = "n0", dtype = "i32", shape = array<i64: 4>, origin = "prefill:input"}
  %w = tmachine.buffer "w" weight {device = "n0", dtype = "f32", shape = array<i64: 64, 64>, origin = "blk.0.attn_q.weight"}
  %b1 = tmachine.buffer "b1" transient {device = "n0", dtype = "f32", shape = array<i64: 4, 64>, origin = "prefill:q"}
  %b2 = tmachine.buffer "b2" transient {device = "n0", dtype = "f32", shape = array<i64: 1, 64>, origin = "prefill:h_last"}
  %done.c0 = tmachine.token "done.c0"
  tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
    tmachine.copy "i.c0" %e0 -> %b0 signal %done.c0 step prefill {cmd = "c0", bytes = 16 : i64, task = "prefill.s0.recv.e0", impl = "triton.recv", lineage = #cplan.lineage<prefill, stage 0, "edge:e0", edge "e0">}
  }
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch "i.c1" "gemv:_gemv_kernel" (%b0, %w, %b1) waits(%done.c0) {cmd = "c1", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, scalars = {N = 64 : i64, K = 64 : i64, start_pos = "start_pos"}, autotune = true, task = "prefill.s0.b0.matmul.attn_q", impl = "triton.matmul", lineage = #cplan.lineage<prefill, stage 0, block 0, "blk.0.attn_q">}
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: [AB-M-1] a machine program must respect its launch ABI and stream order: launch 'i.c1': scalar 'start_pos' must be a number or a '$runtime' name, got "start_pos"
    // CHECK-NEXT: {{^}}  tmachine.launch "i.c1" "gemv:_gemv_kernel"
    tmachine.view "i.c2" "last_row" %b1 -> %b2 {cmd = "c2", task = "prefill.s0.last_row.h_last", impl = "triton.last_row", lineage = #cplan.lineage<prefill, stage 0, "h_last">}
  }
}

// -----

// view: unknown view kind
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/3"} {
  %e0 = tmachine.buffer "e0" edge {device = "n0", dtype = "i32", shape = array<i64: 64>, origin = "edge e0 (token_in)"}
  %b0 = tmachine.buffer "b0" transient {device = "n0", dtype = "i32", shape = array<i64: 4>, origin = "prefill:input"}
  %w = tmachine.buffer "w" weight {device = "n0", dtype = "f32", shape = array<i64: 64, 64>, origin = "blk.0.attn_q.weight"}
  %b1 = tmachine.buffer "b1" transient {device = "n0", dtype = "f32", shape = array<i64: 4, 64>, origin = "prefill:q"}
  %b2 = tmachine.buffer "b2" transient {device = "n0", dtype = "f32", shape = array<i64: 1, 64>, origin = "prefill:h_last"}
  %done.c0 = tmachine.token "done.c0"
  tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
    tmachine.copy "i.c0" %e0 -> %b0 signal %done.c0 step prefill {cmd = "c0", bytes = 16 : i64, task = "prefill.s0.recv.e0", impl = "triton.recv", lineage = #cplan.lineage<prefill, stage 0, "edge:e0", edge "e0">}
  }
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch "i.c1" "gemv:_gemv_kernel" (%b0, %w, %b1) waits(%done.c0) {cmd = "c1", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, task = "prefill.s0.b0.matmul.attn_q", impl = "triton.matmul", lineage = #cplan.lineage<prefill, stage 0, block 0, "blk.0.attn_q">}
    tmachine.view "i.c2" "first_row" %b1 -> %b2 {cmd = "c2", task = "prefill.s0.last_row.h_last", impl = "triton.last_row", lineage = #cplan.lineage<prefill, stage 0, "h_last">}
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: view 'i.c2': unknown view kind 'first_row'
    // CHECK-NEXT: {{^}}  tmachine.view "i.c2" "first_row" %b1 -> %b2
  }
}

// -----

// copy: negative bytes
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/3"} {
  %e0 = tmachine.buffer "e0" edge {device = "n0", dtype = "i32", shape = array<i64: 64>, origin = "edge e0 (token_in)"}
  %b0 = tmachine.buffer "b0" transient {device = "n0", dtype = "i32", shape = array<i64: 4>, origin = "prefill:input"}
  %w = tmachine.buffer "w" weight {device = "n0", dtype = "f32", shape = array<i64: 64, 64>, origin = "blk.0.attn_q.weight"}
  %b1 = tmachine.buffer "b1" transient {device = "n0", dtype = "f32", shape = array<i64: 4, 64>, origin = "prefill:q"}
  %b2 = tmachine.buffer "b2" transient {device = "n0", dtype = "f32", shape = array<i64: 1, 64>, origin = "prefill:h_last"}
  %done.c0 = tmachine.token "done.c0"
  tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
    tmachine.copy "i.c0" %e0 -> %b0 signal %done.c0 step prefill {cmd = "c0", bytes = -1 : i64, task = "prefill.s0.recv.e0", impl = "triton.recv", lineage = #cplan.lineage<prefill, stage 0, "edge:e0", edge "e0">}
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: copy 'i.c0': bytes must be >= 0
    // CHECK-NEXT: {{^}}  tmachine.copy "i.c0" %e0 -> %b0 signal %done.c0
  }
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch "i.c1" "gemv:_gemv_kernel" (%b0, %w, %b1) waits(%done.c0) {cmd = "c1", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, task = "prefill.s0.b0.matmul.attn_q", impl = "triton.matmul", lineage = #cplan.lineage<prefill, stage 0, block 0, "blk.0.attn_q">}
    tmachine.view "i.c2" "last_row" %b1 -> %b2 {cmd = "c2", task = "prefill.s0.last_row.h_last", impl = "triton.last_row", lineage = #cplan.lineage<prefill, stage 0, "h_last">}
  }
}

// -----

// program: two buffers with one id
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/3"} {
  %e0 = tmachine.buffer "e0" edge {device = "n0", dtype = "i32", shape = array<i64: 64>, origin = "edge e0 (token_in)"}
  %b0 = tmachine.buffer "b0" transient {device = "n0", dtype = "i32", shape = array<i64: 4>, origin = "prefill:input"}
  %w = tmachine.buffer "w" weight {device = "n0", dtype = "f32", shape = array<i64: 64, 64>, origin = "blk.0.attn_q.weight"}
  %b1 = tmachine.buffer "b1" transient {device = "n0", dtype = "f32", shape = array<i64: 4, 64>, origin = "prefill:q"}
  %b2 = tmachine.buffer "b1" transient {device = "n0", dtype = "f32", shape = array<i64: 1, 64>, origin = "prefill:h_last"}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: [AB-M-1] a machine program must respect its launch ABI and stream order: duplicate buffer id 'b1'
  // CHECK-NEXT: {{^}}  %b2 = tmachine.buffer "b1"
  %done.c0 = tmachine.token "done.c0"
  tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
    tmachine.copy "i.c0" %e0 -> %b0 signal %done.c0 step prefill {cmd = "c0", bytes = 16 : i64, task = "prefill.s0.recv.e0", impl = "triton.recv", lineage = #cplan.lineage<prefill, stage 0, "edge:e0", edge "e0">}
  }
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch "i.c1" "gemv:_gemv_kernel" (%b0, %w, %b1) waits(%done.c0) {cmd = "c1", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, task = "prefill.s0.b0.matmul.attn_q", impl = "triton.matmul", lineage = #cplan.lineage<prefill, stage 0, block 0, "blk.0.attn_q">}
    tmachine.view "i.c2" "last_row" %b1 -> %b2 {cmd = "c2", task = "prefill.s0.last_row.h_last", impl = "triton.last_row", lineage = #cplan.lineage<prefill, stage 0, "h_last">}
  }
}

// -----

// program: two tokens with one id
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/3"} {
  %e0 = tmachine.buffer "e0" edge {device = "n0", dtype = "i32", shape = array<i64: 64>, origin = "edge e0 (token_in)"}
  %b0 = tmachine.buffer "b0" transient {device = "n0", dtype = "i32", shape = array<i64: 4>, origin = "prefill:input"}
  %w = tmachine.buffer "w" weight {device = "n0", dtype = "f32", shape = array<i64: 64, 64>, origin = "blk.0.attn_q.weight"}
  %b1 = tmachine.buffer "b1" transient {device = "n0", dtype = "f32", shape = array<i64: 4, 64>, origin = "prefill:q"}
  %b2 = tmachine.buffer "b2" transient {device = "n0", dtype = "f32", shape = array<i64: 1, 64>, origin = "prefill:h_last"}
  %done.c0 = tmachine.token "done.c0"
  %done.c1 = tmachine.token "done.c0"
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: [AB-M-1] a machine program must respect its launch ABI and stream order: duplicate token id 'done.c0'
  // CHECK-NEXT: {{^}}  %done.c1 = tmachine.token "done.c0"
  tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
    tmachine.copy "i.c0" %e0 -> %b0 signal %done.c0 step prefill {cmd = "c0", bytes = 16 : i64, task = "prefill.s0.recv.e0", impl = "triton.recv", lineage = #cplan.lineage<prefill, stage 0, "edge:e0", edge "e0">}
  }
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch "i.c1" "gemv:_gemv_kernel" (%b0, %w, %b1) waits(%done.c0) {cmd = "c1", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, task = "prefill.s0.b0.matmul.attn_q", impl = "triton.matmul", lineage = #cplan.lineage<prefill, stage 0, block 0, "blk.0.attn_q">}
    tmachine.view "i.c2" "last_row" %b1 -> %b2 {cmd = "c2", task = "prefill.s0.last_row.h_last", impl = "triton.last_row", lineage = #cplan.lineage<prefill, stage 0, "h_last">}
  }
}

// -----

// program: two instructions with one id
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/3"} {
  %e0 = tmachine.buffer "e0" edge {device = "n0", dtype = "i32", shape = array<i64: 64>, origin = "edge e0 (token_in)"}
  %b0 = tmachine.buffer "b0" transient {device = "n0", dtype = "i32", shape = array<i64: 4>, origin = "prefill:input"}
  %w = tmachine.buffer "w" weight {device = "n0", dtype = "f32", shape = array<i64: 64, 64>, origin = "blk.0.attn_q.weight"}
  %b1 = tmachine.buffer "b1" transient {device = "n0", dtype = "f32", shape = array<i64: 4, 64>, origin = "prefill:q"}
  %b2 = tmachine.buffer "b2" transient {device = "n0", dtype = "f32", shape = array<i64: 1, 64>, origin = "prefill:h_last"}
  %done.c0 = tmachine.token "done.c0"
  tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
    tmachine.copy "i.c0" %e0 -> %b0 signal %done.c0 step prefill {cmd = "c0", bytes = 16 : i64, task = "prefill.s0.recv.e0", impl = "triton.recv", lineage = #cplan.lineage<prefill, stage 0, "edge:e0", edge "e0">}
  }
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch "i.c1" "gemv:_gemv_kernel" (%b0, %w, %b1) waits(%done.c0) {cmd = "c1", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, task = "prefill.s0.b0.matmul.attn_q", impl = "triton.matmul", lineage = #cplan.lineage<prefill, stage 0, block 0, "blk.0.attn_q">}
    tmachine.view "i.c1" "last_row" %b1 -> %b2 {cmd = "c2", task = "prefill.s0.last_row.h_last", impl = "triton.last_row", lineage = #cplan.lineage<prefill, stage 0, "h_last">}
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: [AB-M-1] a machine program must respect its launch ABI and stream order: duplicate instruction id 'i.c1'
    // CHECK-NEXT: {{^}}  tmachine.view "i.c1" "last_row"
  }
}

// -----

// instruction: a step that is not prefill or decode (a parse error: the step is a #tmachine<step ...> enum)
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/3"} {
  %e0 = tmachine.buffer "e0" edge {device = "n0", dtype = "i32", shape = array<i64: 64>, origin = "edge e0 (token_in)"}
  %b0 = tmachine.buffer "b0" transient {device = "n0", dtype = "i32", shape = array<i64: 4>, origin = "prefill:input"}
  %w = tmachine.buffer "w" weight {device = "n0", dtype = "f32", shape = array<i64: 64, 64>, origin = "blk.0.attn_q.weight"}
  %b1 = tmachine.buffer "b1" transient {device = "n0", dtype = "f32", shape = array<i64: 4, 64>, origin = "prefill:q"}
  %b2 = tmachine.buffer "b2" transient {device = "n0", dtype = "f32", shape = array<i64: 1, 64>, origin = "prefill:h_last"}
  %done.c0 = tmachine.token "done.c0"
  tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
    tmachine.copy "i.c0" %e0 -> %b0 signal %done.c0 step warmup {cmd = "c0", bytes = 16 : i64, task = "prefill.s0.recv.e0", impl = "triton.recv", lineage = #cplan.lineage<prefill, stage 0, "edge:e0", edge "e0">}
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:58
    // CHECK-NEXT: {{^}}  tmachine.copy "i.c0" %e0 -> %b0 signal %done.c0 step warmup {cmd = "c0",
    // CHECK:      Expected `prefill`, or `decode`.
  }
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch "i.c1" "gemv:_gemv_kernel" (%b0, %w, %b1) waits(%done.c0) {cmd = "c1", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, task = "prefill.s0.b0.matmul.attn_q", impl = "triton.matmul", lineage = #cplan.lineage<prefill, stage 0, block 0, "blk.0.attn_q">}
    tmachine.view "i.c2" "last_row" %b1 -> %b2 {cmd = "c2", task = "prefill.s0.last_row.h_last", impl = "triton.last_row", lineage = #cplan.lineage<prefill, stage 0, "h_last">}
  }
}

// -----

// instruction: a step other than its lineage's (the step of the command it lowers)
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/3"} {
  %e0 = tmachine.buffer "e0" edge {device = "n0", dtype = "i32", shape = array<i64: 64>, origin = "edge e0 (token_in)"}
  %b0 = tmachine.buffer "b0" transient {device = "n0", dtype = "i32", shape = array<i64: 4>, origin = "prefill:input"}
  %w = tmachine.buffer "w" weight {device = "n0", dtype = "f32", shape = array<i64: 64, 64>, origin = "blk.0.attn_q.weight"}
  %b1 = tmachine.buffer "b1" transient {device = "n0", dtype = "f32", shape = array<i64: 4, 64>, origin = "prefill:q"}
  %b2 = tmachine.buffer "b2" transient {device = "n0", dtype = "f32", shape = array<i64: 1, 64>, origin = "prefill:h_last"}
  %done.c0 = tmachine.token "done.c0"
  tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
    tmachine.copy "i.c0" %e0 -> %b0 signal %done.c0 step decode {cmd = "c0", bytes = 16 : i64, task = "prefill.s0.recv.e0", impl = "triton.recv", lineage = #cplan.lineage<prefill, stage 0, "edge:e0", edge "e0">}
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: [AB-M-1] a machine program must respect its launch ABI and stream order: instruction 'i.c0' runs in step 'decode' but lowers a command of step 'prefill' (its lineage)
    // CHECK-NEXT: {{^}}  tmachine.copy "i.c0" %e0 -> %b0 signal %done.c0 step decode {cmd = "c0",
  }
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch "i.c1" "gemv:_gemv_kernel" (%b0, %w, %b1) waits(%done.c0) {cmd = "c1", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, task = "prefill.s0.b0.matmul.attn_q", impl = "triton.matmul", lineage = #cplan.lineage<prefill, stage 0, block 0, "blk.0.attn_q">}
    tmachine.view "i.c2" "last_row" %b1 -> %b2 {cmd = "c2", task = "prefill.s0.last_row.h_last", impl = "triton.last_row", lineage = #cplan.lineage<prefill, stage 0, "h_last">}
  }
}

// -----

// instruction: a buffer argument whose buffer has an empty id
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/3"} {
  %e0 = tmachine.buffer "e0" edge {device = "n0", dtype = "i32", shape = array<i64: 64>, origin = "edge e0 (token_in)"}
  %b0 = tmachine.buffer "b0" transient {device = "n0", dtype = "i32", shape = array<i64: 4>, origin = "prefill:input"}
  %w = tmachine.buffer "" weight {device = "n0", dtype = "f32", shape = array<i64: 64, 64>, origin = "blk.0.attn_q.weight"}
  %b1 = tmachine.buffer "b1" transient {device = "n0", dtype = "f32", shape = array<i64: 4, 64>, origin = "prefill:q"}
  %b2 = tmachine.buffer "b2" transient {device = "n0", dtype = "f32", shape = array<i64: 1, 64>, origin = "prefill:h_last"}
  %done.c0 = tmachine.token "done.c0"
  tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
    tmachine.copy "i.c0" %e0 -> %b0 signal %done.c0 step prefill {cmd = "c0", bytes = 16 : i64, task = "prefill.s0.recv.e0", impl = "triton.recv", lineage = #cplan.lineage<prefill, stage 0, "edge:e0", edge "e0">}
  }
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch "i.c1" "gemv:_gemv_kernel" (%b0, %w, %b1) waits(%done.c0) {cmd = "c1", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, task = "prefill.s0.b0.matmul.attn_q", impl = "triton.matmul", lineage = #cplan.lineage<prefill, stage 0, block 0, "blk.0.attn_q">}
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: [AB-M-1] a machine program must respect its launch ABI and stream order: instruction 'i.c1' has an empty buffer argument
    // CHECK-NEXT: {{^}}  tmachine.launch "i.c1" "gemv:_gemv_kernel"
    tmachine.view "i.c2" "last_row" %b1 -> %b2 {cmd = "c2", task = "prefill.s0.last_row.h_last", impl = "triton.last_row", lineage = #cplan.lineage<prefill, stage 0, "h_last">}
  }
}

// -----

// instruction: a buffer value defined outside the program
%w.ghost = builtin.unrealized_conversion_cast to !tmachine.buffer
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/3"} {
  %e0 = tmachine.buffer "e0" edge {device = "n0", dtype = "i32", shape = array<i64: 64>, origin = "edge e0 (token_in)"}
  %b0 = tmachine.buffer "b0" transient {device = "n0", dtype = "i32", shape = array<i64: 4>, origin = "prefill:input"}
  %w = tmachine.buffer "w" weight {device = "n0", dtype = "f32", shape = array<i64: 64, 64>, origin = "blk.0.attn_q.weight"}
  %b1 = tmachine.buffer "b1" transient {device = "n0", dtype = "f32", shape = array<i64: 4, 64>, origin = "prefill:q"}
  %b2 = tmachine.buffer "b2" transient {device = "n0", dtype = "f32", shape = array<i64: 1, 64>, origin = "prefill:h_last"}
  %done.c0 = tmachine.token "done.c0"
  tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
    tmachine.copy "i.c0" %e0 -> %b0 signal %done.c0 step prefill {cmd = "c0", bytes = 16 : i64, task = "prefill.s0.recv.e0", impl = "triton.recv", lineage = #cplan.lineage<prefill, stage 0, "edge:e0", edge "e0">}
  }
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch "i.c1" "gemv:_gemv_kernel" (%b0, %w.ghost, %b1) waits(%done.c0) {cmd = "c1", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, task = "prefill.s0.b0.matmul.attn_q", impl = "triton.matmul", lineage = #cplan.lineage<prefill, stage 0, block 0, "blk.0.attn_q">}
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: [AB-M-1] a machine program must respect its launch ABI and stream order: instruction 'i.c1' names buffer '%w.ghost', which the program does not declare
    // CHECK-NEXT: {{^}}  tmachine.launch "i.c1" "gemv:_gemv_kernel" (%b0, %w.ghost, %b1)
    tmachine.view "i.c2" "last_row" %b1 -> %b2 {cmd = "c2", task = "prefill.s0.last_row.h_last", impl = "triton.last_row", lineage = #cplan.lineage<prefill, stage 0, "h_last">}
  }
}

// -----

// instruction: a token value defined outside the program
%done.ghost = builtin.unrealized_conversion_cast to !tmachine.token
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/3"} {
  %e0 = tmachine.buffer "e0" edge {device = "n0", dtype = "i32", shape = array<i64: 64>, origin = "edge e0 (token_in)"}
  %b0 = tmachine.buffer "b0" transient {device = "n0", dtype = "i32", shape = array<i64: 4>, origin = "prefill:input"}
  %w = tmachine.buffer "w" weight {device = "n0", dtype = "f32", shape = array<i64: 64, 64>, origin = "blk.0.attn_q.weight"}
  %b1 = tmachine.buffer "b1" transient {device = "n0", dtype = "f32", shape = array<i64: 4, 64>, origin = "prefill:q"}
  %b2 = tmachine.buffer "b2" transient {device = "n0", dtype = "f32", shape = array<i64: 1, 64>, origin = "prefill:h_last"}
  %done.c0 = tmachine.token "done.c0"
  tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
    tmachine.copy "i.c0" %e0 -> %b0 signal %done.c0 step prefill {cmd = "c0", bytes = 16 : i64, task = "prefill.s0.recv.e0", impl = "triton.recv", lineage = #cplan.lineage<prefill, stage 0, "edge:e0", edge "e0">}
  }
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch "i.c1" "gemv:_gemv_kernel" (%b0, %w, %b1) waits(%done.ghost) {cmd = "c1", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, task = "prefill.s0.b0.matmul.attn_q", impl = "triton.matmul", lineage = #cplan.lineage<prefill, stage 0, block 0, "blk.0.attn_q">}
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: [AB-M-1] a machine program must respect its launch ABI and stream order: instruction 'i.c1' uses token '%done.ghost', which the program does not declare
    // CHECK-NEXT: {{^}}  tmachine.launch "i.c1" "gemv:_gemv_kernel"
    tmachine.view "i.c2" "last_row" %b1 -> %b2 {cmd = "c2", task = "prefill.s0.last_row.h_last", impl = "triton.last_row", lineage = #cplan.lineage<prefill, stage 0, "h_last">}
  }
}

// -----

// token: signalled by two instructions
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/3"} {
  %e0 = tmachine.buffer "e0" edge {device = "n0", dtype = "i32", shape = array<i64: 64>, origin = "edge e0 (token_in)"}
  %b0 = tmachine.buffer "b0" transient {device = "n0", dtype = "i32", shape = array<i64: 4>, origin = "prefill:input"}
  %w = tmachine.buffer "w" weight {device = "n0", dtype = "f32", shape = array<i64: 64, 64>, origin = "blk.0.attn_q.weight"}
  %b1 = tmachine.buffer "b1" transient {device = "n0", dtype = "f32", shape = array<i64: 4, 64>, origin = "prefill:q"}
  %b2 = tmachine.buffer "b2" transient {device = "n0", dtype = "f32", shape = array<i64: 1, 64>, origin = "prefill:h_last"}
  %done.c0 = tmachine.token "done.c0"
  tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
    tmachine.copy "i.c0" %e0 -> %b0 signal %done.c0 step prefill {cmd = "c0", bytes = 16 : i64, task = "prefill.s0.recv.e0", impl = "triton.recv", lineage = #cplan.lineage<prefill, stage 0, "edge:e0", edge "e0">}
  }
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch "i.c1" "gemv:_gemv_kernel" (%b0, %w, %b1) waits(%done.c0) {cmd = "c1", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, task = "prefill.s0.b0.matmul.attn_q", impl = "triton.matmul", lineage = #cplan.lineage<prefill, stage 0, block 0, "blk.0.attn_q">}
    tmachine.view "i.c2" "last_row" %b1 -> %b2 signal %done.c0 {cmd = "c2", task = "prefill.s0.last_row.h_last", impl = "triton.last_row", lineage = #cplan.lineage<prefill, stage 0, "h_last">}
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: [AB-M-1] a machine program must respect its launch ABI and stream order: token 'done.c0' is signalled by instruction 'i.c0' and by 'i.c2'
    // CHECK-NEXT: {{^}}  tmachine.view "i.c2" "last_row" %b1 -> %b2 signal %done.c0
  }
}

// -----

// wait: a token no instruction signals
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/3"} {
  %e0 = tmachine.buffer "e0" edge {device = "n0", dtype = "i32", shape = array<i64: 64>, origin = "edge e0 (token_in)"}
  %b0 = tmachine.buffer "b0" transient {device = "n0", dtype = "i32", shape = array<i64: 4>, origin = "prefill:input"}
  %w = tmachine.buffer "w" weight {device = "n0", dtype = "f32", shape = array<i64: 64, 64>, origin = "blk.0.attn_q.weight"}
  %b1 = tmachine.buffer "b1" transient {device = "n0", dtype = "f32", shape = array<i64: 4, 64>, origin = "prefill:q"}
  %b2 = tmachine.buffer "b2" transient {device = "n0", dtype = "f32", shape = array<i64: 1, 64>, origin = "prefill:h_last"}
  %done.c0 = tmachine.token "done.c0"
  tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
    tmachine.copy "i.c0" %e0 -> %b0 step prefill {cmd = "c0", bytes = 16 : i64, task = "prefill.s0.recv.e0", impl = "triton.recv", lineage = #cplan.lineage<prefill, stage 0, "edge:e0", edge "e0">}
  }
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch "i.c1" "gemv:_gemv_kernel" (%b0, %w, %b1) waits(%done.c0) {cmd = "c1", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, task = "prefill.s0.b0.matmul.attn_q", impl = "triton.matmul", lineage = #cplan.lineage<prefill, stage 0, block 0, "blk.0.attn_q">}
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: [AB-M-1] a machine program must respect its launch ABI and stream order: instruction 'i.c1' waits for token 'done.c0' that no instruction of the program signals
    // CHECK-NEXT: {{^}}  tmachine.launch "i.c1" "gemv:_gemv_kernel"
    tmachine.view "i.c2" "last_row" %b1 -> %b2 {cmd = "c2", task = "prefill.s0.last_row.h_last", impl = "triton.last_row", lineage = #cplan.lineage<prefill, stage 0, "h_last">}
  }
}

// -----

// wait: a token of its own stream
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/3"} {
  %e0 = tmachine.buffer "e0" edge {device = "n0", dtype = "i32", shape = array<i64: 64>, origin = "edge e0 (token_in)"}
  %b0 = tmachine.buffer "b0" transient {device = "n0", dtype = "i32", shape = array<i64: 4>, origin = "prefill:input"}
  %w = tmachine.buffer "w" weight {device = "n0", dtype = "f32", shape = array<i64: 64, 64>, origin = "blk.0.attn_q.weight"}
  %b1 = tmachine.buffer "b1" transient {device = "n0", dtype = "f32", shape = array<i64: 4, 64>, origin = "prefill:q"}
  %b2 = tmachine.buffer "b2" transient {device = "n0", dtype = "f32", shape = array<i64: 1, 64>, origin = "prefill:h_last"}
  %done.c0 = tmachine.token "done.c0"
  %done.c1 = tmachine.token "done.c1"
  tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
    tmachine.copy "i.c0" %e0 -> %b0 signal %done.c0 step prefill {cmd = "c0", bytes = 16 : i64, task = "prefill.s0.recv.e0", impl = "triton.recv", lineage = #cplan.lineage<prefill, stage 0, "edge:e0", edge "e0">}
  }
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch "i.c1" "gemv:_gemv_kernel" (%b0, %w, %b1) signal %done.c1 {cmd = "c1", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, task = "prefill.s0.b0.matmul.attn_q", impl = "triton.matmul", lineage = #cplan.lineage<prefill, stage 0, block 0, "blk.0.attn_q">}
    tmachine.view "i.c2" "last_row" %b1 -> %b2 waits(%done.c1) {cmd = "c2", task = "prefill.s0.last_row.h_last", impl = "triton.last_row", lineage = #cplan.lineage<prefill, stage 0, "h_last">}
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: [AB-M-1] a machine program must respect its launch ABI and stream order: instruction 'i.c2' waits for token 'done.c1' signalled by 'i.c1' of its own stream (stream order already orders them)
    // CHECK-NEXT: {{^}}  tmachine.view "i.c2" "last_row" %b1 -> %b2 waits(%done.c1)
  }
}

// -----

// program: stream order and waits deadlock
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "pipeplan-tmachine/3"} {
  %e0 = tmachine.buffer "e0" edge {device = "n0", dtype = "i32", shape = array<i64: 64>, origin = "edge e0 (token_in)"}
  %b0 = tmachine.buffer "b0" transient {device = "n0", dtype = "i32", shape = array<i64: 4>, origin = "prefill:input"}
  %w = tmachine.buffer "w" weight {device = "n0", dtype = "f32", shape = array<i64: 64, 64>, origin = "blk.0.attn_q.weight"}
  %b1 = tmachine.buffer "b1" transient {device = "n0", dtype = "f32", shape = array<i64: 4, 64>, origin = "prefill:q"}
  %b2 = tmachine.buffer "b2" transient {device = "n0", dtype = "f32", shape = array<i64: 1, 64>, origin = "prefill:h_last"}
  %done.c0 = tmachine.token "done.c0"
  %done.c2 = tmachine.token "done.c2"
  tmachine.stream attributes {device = "n0", engine = "cuda.copy"} {
    tmachine.copy "i.c0" %e0 -> %b0 waits(%done.c2) signal %done.c0 step prefill {cmd = "c0", bytes = 16 : i64, task = "prefill.s0.recv.e0", impl = "triton.recv", lineage = #cplan.lineage<prefill, stage 0, "edge:e0", edge "e0">}
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: [AB-M-1] a machine program must respect its launch ABI and stream order: stream order and waits deadlock at instruction 'i.c0'
    // CHECK-NEXT: {{^}}  tmachine.copy "i.c0" %e0 -> %b0 waits(%done.c2)
  }
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch "i.c1" "gemv:_gemv_kernel" (%b0, %w, %b1) waits(%done.c0) {cmd = "c1", grid = array<i64: 4, 1, 1>, meta = {FMT = 3 : i64, BLOCK_M = 1 : i64}, scalars = {N = 64 : i64, K = 64 : i64, start_pos = "$start_pos"}, autotune = true, task = "prefill.s0.b0.matmul.attn_q", impl = "triton.matmul", lineage = #cplan.lineage<prefill, stage 0, block 0, "blk.0.attn_q">}
    tmachine.view "i.c2" "last_row" %b1 -> %b2 signal %done.c2 {cmd = "c2", task = "prefill.s0.last_row.h_last", impl = "triton.last_row", lineage = #cplan.lineage<prefill, stage 0, "h_last">}
  }
}
