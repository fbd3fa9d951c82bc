// RUN: pipeplan-opt %s -p 'pplan-legalize{target=virtual-queue}' --verify-diagnostics | filecheck %s
// RUN: pipeplan-opt %s -p 'pplan-legalize{target=virtual-slot}' --verify-diagnostics | filecheck %s --check-prefix=SLOT
// RUN: pipeplan-opt %s -p 'pplan-legalize{target=cuda-triton}' --verify-diagnostics | filecheck %s --check-prefix=TRITON

// A Q2_K matmul (blk.7.attn_q on stage 1): no target's kernel library executes Q2_K, so
// legalization fails with the lineage path model op -> stage/block -> portable task -> rejected
// candidates with reasons, never a generic implementation (AB-I-2, AB-D-1).

pplan.plan @run0 attributes {decode_pos = 1 : i64, model = "m", prompt_len = 1 : i64, source = "runplan @run0", stage_count = 2 : i64} {
  %0 = pplan.edge_object "e1" "activation" : !pplan.buffer<1x256xf32, edge>
  %1 = pplan.weight 1 "blk.7.attn_q.weight" : !pplan.buffer<256x256xq2_k, weight>
  pplan.step decode {
    pplan.stage 1 {
      %2 = pplan.task "recv.e1" recv(%0) -> "x" at "edge:e1" work [1, 256] bytes [1024, 1024] : !pplan.buffer<1x256xf32>
      %3 = pplan.task "b7.matmul.attn_q" matmul(%2, %1) -> "q" at "blk.7.attn_q" blk 7 work [1, 256, 256] flops 131072 bytes [1024, 21504, 1024] : !pplan.buffer<1x256xf32>
      pplan.yield
    }
    pplan.yield
  }
}

// CHECK: pplan-legalize: no legal implementation on target virtual-queue (virtual-queue@1) for model op blk.7.attn_q -> stage 1 block 7 (decode) -> task @decode.s1.b7.matmul.attn_q -> rejected candidates: vq.matmul: dtype q2_k unsupported (rule accepts bf16, f16, f32, i32, q4_0, q4_1, q4_k, q5_0, q5_1, q5_k, q6_k, q8_0)
// SLOT: pplan-legalize: no legal implementation on target virtual-slot (virtual-slot@1) for model op blk.7.attn_q -> stage 1 block 7 (decode) -> task @decode.s1.b7.matmul.attn_q -> rejected candidates: vs.matmul: dtype q2_k unsupported
// TRITON: pplan-legalize: no legal implementation on target cuda-triton (cuda-triton@1) for model op blk.7.attn_q -> stage 1 block 7 (decode) -> task @decode.s1.b7.matmul.attn_q -> rejected candidates: triton.matmul: dtype q2_k unsupported
