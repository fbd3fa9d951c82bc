// RUN: pipeplan-opt %s -p 'pplan-legalize{target=virtual-queue},pplan-select-implementations' | filecheck %s
// RUN: pipeplan-opt %s -p 'pplan-legalize{target=cuda-triton},pplan-select-implementations' | filecheck %s --check-prefix=TRITON

// A Q4_K matmul (blk.7.attn_q on stage 1): the queue target's kernel library is the CPU runtime's,
// which executes K-quants (issue 11 item 8), so it is legal there with provenance (AB-I-1); the
// cuda-triton target has a Q4_K matmul too (the recv in front of it defines its activation operand). pplan-legalize-unsupported-dtype.mlir shows a type no
// target executes (Q2_K) failing with the lineage path (AB-I-2, AB-D-1).

pplan.plan @run0 attributes {decode_pos = 1 : i64, model = "m", prompt_len = 1 : i64, source = "runplan @run0", stage_count = 2 : i64} {
  %0 = pplan.edge_object "e1" "activation" : !pplan.buffer<1x256xf32, edge>
  %1 = pplan.weight 1 "blk.7.attn_q.weight" : !pplan.buffer<256x256xq4_k, weight>
  pplan.step decode {
    pplan.stage 1 {
      %2 = pplan.task recv(%0) -> "x" at "edge:e1" : !pplan.buffer<1x256xf32>
      %3 = pplan.task matmul(%2, %1) -> "q" at "blk.7.attn_q" work [1, 256, 256] : !pplan.buffer<1x256xf32>
      pplan.yield
    }
    pplan.yield
  }
}

// CHECK:      pplan.task recv(%0) -> "x" at "edge:e1" {pplan.candidates = [#pplan.candidate<"vq.recv", "queue.copy", 0>]}
// CHECK-NEXT: pplan.task matmul(%{{[0-9]+}}, %1) -> "q" at "blk.7.attn_q" work [1, 256, 256] {pplan.candidates = [#pplan.candidate<"vq.matmul", "queue.compute", 0>]} : !pplan.buffer<1x256xf32>
// CHECK:      pplan.target_binding @target {{{.*}}"dtype:q4_k"{{.*}}plugin_revision = "virtual-queue@1"}
// CHECK-NEXT: pplan.candidates {plan = @run0, target = "virtual-queue", portable_digest = "{{[0-9a-f]+}}", selected = 1 : i64}

// TRITON:      pplan.task recv(%0) -> "x" at "edge:e1" {pplan.candidates = [#pplan.candidate<"triton.recv", {{.*}}>]}
// TRITON-NEXT: pplan.task matmul(%{{[0-9]+}}, %1) -> "q" at "blk.7.attn_q" work [1, 256, 256] {pplan.candidates = [#pplan.candidate<"triton.matmul", "cuda.stream", 0, rejected ["triton.matmul_tc: dtype q4_k unsupported (rule accepts bf16, f16, f32); alignment 64 below required 128", "triton.matmul_tc (align 128): dtype q4_k unsupported (rule accepts bf16, f16, f32)"]>]} : !pplan.buffer<1x256xf32>
// TRITON:      pplan.target_binding @target {{{.*}}target = "cuda-triton"{{.*}}abi = "triton-3.9-ptx"{{.*}}plugin_revision = "cuda-triton@1"}
// TRITON-NEXT: pplan.candidates {plan = @run0, target = "cuda-triton", portable_digest = "{{[0-9a-f]+}}", selected = 1 : i64}
