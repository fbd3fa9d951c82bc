// RUN: pipeplan-opt %s -p 'pplan-legalize{target=virtual-queue},pplan-select-implementations' | filecheck %s
// RUN: pipeplan-opt %s -p 'pplan-legalize{target=cuda-triton},pplan-select-implementations' | filecheck %s --check-prefix=TRITON

// A Q4_K matmul (blk.7.attn_q on stage 1): the queue target's kernel library is the CPU runtime's,
// which executes K-quants (issue 11 item 8), so it is legal there with provenance (AB-I-1); the
// cuda-triton target has a Q4_K matmul too. pplan-legalize-unsupported-dtype.mlir shows a type no
// target executes (Q2_K) failing with the lineage path (AB-I-2, AB-D-1).

pplan.plan @run0 attributes {decode_pos = 1 : i64, model = "m", prompt_len = 1 : i64, source = "runplan @run0", stage_count = 2 : i64} {
  pplan.buffer @x {alignment = 64 : i64, bytes = 1024 : i64, dtype = "f32", lifetime = "transient", memspace = "device", origin = "decode:x", shape = array<i64: 1, 256>, stage = 1 : i64}
  pplan.buffer @w {alignment = 64 : i64, bytes = 36864 : i64, dtype = "q4_k", lifetime = "weight", memspace = "device", origin = "blk.7.attn_q.weight", shape = array<i64: 256, 256>, stage = 1 : i64}
  pplan.buffer @q {alignment = 64 : i64, bytes = 1024 : i64, dtype = "f32", lifetime = "transient", memspace = "device", origin = "decode:q", shape = array<i64: 1, 256>, stage = 1 : i64}
  pplan.task @decode.s1.b7.matmul.attn_q {alignment = 64 : i64, block = 7 : i64, bytes_read = 37888 : i64, bytes_written = 1024 : i64, collective = "none", deps = [], dtypes = ["f32", "q4_k", "f32"], flops = 131072 : i64, layout = "row_major", memspace = "device", model_op = "blk.7.attn_q", op = "matmul", read_bytes = array<i64: 1024, 36864>, reads = [@x, @w], shape = array<i64: 1, 256, 256>, stage = 1 : i64, step = "decode", write_bytes = array<i64: 1024>, writes = [@q]}
}

// CHECK:      pplan.target_binding @target {{{.*}}"dtype:q4_k"{{.*}}plugin_revision = "virtual-queue@1"}
// CHECK:      pplan.candidates attributes {plan = @run0, target = "virtual-queue", portable_digest = "{{[0-9a-f]+}}", selected = 1 : i64} {
// CHECK-NEXT:   pplan.candidate @c.decode.s1.b7.matmul.attn_q.vq.matmul {task = @decode.s1.b7.matmul.attn_q, impl = "vq.matmul", rule = "vq.matmul", plugin_revision = "virtual-queue@1", resources = {engine = "queue.compute", workspace_bytes = 0 : i64}, rejected = [], rank = 0 : i64}
// CHECK-NEXT: }

// TRITON:      pplan.target_binding @target {{{.*}}target = "cuda-triton"{{.*}}abi = "triton-3.9-ptx"
// TRITON:      pplan.candidates attributes {plan = @run0, target = "cuda-triton", portable_digest = "{{[0-9a-f]+}}", selected = 1 : i64} {
// TRITON-NEXT:   pplan.candidate @c.decode.s1.b7.matmul.attn_q.triton.matmul {task = @decode.s1.b7.matmul.attn_q, impl = "triton.matmul", rule = "triton.matmul", plugin_revision = "cuda-triton@1", resources = {engine = "cuda.stream", workspace_bytes = 0 : i64}, rejected = ["triton.matmul_tc: dtype q4_k unsupported (rule accepts bf16, f16, f32); alignment 64 below required 128", "triton.matmul_tc (align 128): dtype q4_k unsupported (rule accepts bf16, f16, f32)"], rank = 0 : i64}
// TRITON-NEXT: }
