// RUN: pipeplan-opt %s -p 'pplan-legalize{target=virtual-queue}' --verify-diagnostics | filecheck %s
// RUN: pipeplan-opt %s -p 'pplan-legalize{target=virtual-slot}' --verify-diagnostics | filecheck %s --check-prefix=SLOT
// RUN: pipeplan-opt %s -p 'pplan-legalize{target=cuda-triton}' --verify-diagnostics | filecheck %s --check-prefix=TRITON

// A Q2_K matmul (blk.7.attn_q on stage 1): no target's kernel library executes Q2_K, so
// legalization fails with the lineage path model op -> stage/block -> portable task -> rejected
// candidates with reasons, never a generic implementation (AB-I-2, AB-D-1).

pplan.plan @run0 attributes {decode_pos = 1 : i64, model = "m", prompt_len = 1 : i64, source = "runplan @run0", stage_count = 2 : i64} {
  pplan.buffer @x {alignment = 64 : i64, bytes = 1024 : i64, dtype = "f32", lifetime = "transient", memspace = "device", origin = "decode:x", shape = array<i64: 1, 256>, stage = 1 : i64}
  pplan.buffer @w {alignment = 64 : i64, bytes = 21504 : i64, dtype = "q2_k", lifetime = "weight", memspace = "device", origin = "blk.7.attn_q.weight", shape = array<i64: 256, 256>, stage = 1 : i64}
  pplan.buffer @q {alignment = 64 : i64, bytes = 1024 : i64, dtype = "f32", lifetime = "transient", memspace = "device", origin = "decode:q", shape = array<i64: 1, 256>, stage = 1 : i64}
  pplan.task @decode.s1.b7.matmul.attn_q {alignment = 64 : i64, block = 7 : i64, bytes_read = 22528 : i64, bytes_written = 1024 : i64, collective = "none", deps = [], dtypes = ["f32", "q2_k", "f32"], flops = 131072 : i64, layout = "row_major", memspace = "device", model_op = "blk.7.attn_q", op = "matmul", read_bytes = array<i64: 1024, 21504>, reads = [@x, @w], shape = array<i64: 1, 256, 256>, stage = 1 : i64, step = "decode", write_bytes = array<i64: 1024>, writes = [@q]}
}

// CHECK: pplan-legalize: no legal implementation on target virtual-queue (virtual-queue@1) for model op blk.7.attn_q -> stage 1 block 7 (decode) -> task @decode.s1.b7.matmul.attn_q -> rejected candidates: vq.matmul: dtype q2_k unsupported (rule accepts bf16, f16, f32, i32, q4_0, q4_1, q4_k, q5_0, q5_1, q5_k, q6_k, q8_0)
// SLOT: pplan-legalize: no legal implementation on target virtual-slot (virtual-slot@1) for model op blk.7.attn_q -> stage 1 block 7 (decode) -> task @decode.s1.b7.matmul.attn_q -> rejected candidates: vs.matmul: dtype q2_k unsupported
// TRITON: pplan-legalize: no legal implementation on target cuda-triton (cuda-triton@1) for model op blk.7.attn_q -> stage 1 block 7 (decode) -> task @decode.s1.b7.matmul.attn_q -> rejected candidates: triton.matmul: dtype q2_k unsupported
