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
      %2 = pplan.task "recv.e1" recv(%0) -> "x" at "edge:e1" work [1, 256] bytes [1024, 1024] : !pplan.buffer<1x256xf32>
      %3 = pplan.task "b7.matmul.attn_q" matmul(%2, %1) -> "q" at "blk.7.attn_q" blk 7 work [1, 256, 256] flops 131072 bytes [1024, 36864, 1024] : !pplan.buffer<1x256xf32>
      pplan.yield
    }
    pplan.yield
  }
}

// CHECK:      pplan.target_binding @target {{{.*}}"dtype:q4_k"{{.*}}plugin_revision = "virtual-queue@1"}
// CHECK:      pplan.candidates attributes {plan = @run0, target = "virtual-queue", portable_digest = "{{[0-9a-f]+}}", selected = 1 : i64} {
// CHECK-NEXT:   pplan.candidate @decode.s1.recv.e1 "vq.recv" {{.*}}
// CHECK-NEXT:   pplan.candidate @decode.s1.b7.matmul.attn_q "vq.matmul" rev "virtual-queue@1" on "queue.compute" rank 0
// CHECK-NEXT: }

// TRITON:      pplan.target_binding @target {{{.*}}target = "cuda-triton"{{.*}}abi = "triton-3.9-ptx"
// TRITON:      pplan.candidates attributes {plan = @run0, target = "cuda-triton", portable_digest = "{{[0-9a-f]+}}", selected = 1 : i64} {
// TRITON-NEXT:   pplan.candidate @decode.s1.recv.e1 {{.*}}
// TRITON-NEXT:   pplan.candidate @decode.s1.b7.matmul.attn_q "triton.matmul" rev "cuda-triton@1" on "cuda.stream" rejected ["triton.matmul_tc: dtype q4_k unsupported (rule accepts bf16, f16, f32); alignment 64 below required 128", "triton.matmul_tc (align 128): dtype q4_k unsupported (rule accepts bf16, f16, f32)"] rank 0
// TRITON-NEXT: }
