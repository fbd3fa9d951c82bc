// RUN: pipeplan plan %models/stories260K.gguf --stages 2 --nodes %S/Inputs/pplan-pool2.toml --max-seq-len 64 > %t.runplan.mlir
// RUN: pipeplan-opt %t.runplan.mlir -p 'convert-runplan-to-pplan{prompt_len=4 pool="%S/Inputs/pplan-pool2.toml"}' | filecheck %s
// RUN: pipeplan-opt %t.runplan.mlir -p 'convert-runplan-to-pplan{prompt_len=4 pool="%S/Inputs/pplan-pool2.toml"},pplan-legalize{target=virtual-queue},pplan-select-implementations,pplan-resolve-costs{evidence=roofline}' | filecheck %s --check-prefix=PIPE

// stories260K (5 blocks, hidden 64, 8/4 heads, ffn 172, vocab 512) planned on 2 stages from the
// command line, then converted: stage 1 owns blocks [3, 5). The decode step of stage 1 is the recv
// of activation edge e1, 16 tasks per block in the runtime's kernel order, last_row, output norm,
// head, sampling and the send of token-out edge e2. Edge transfers are sized by the rows moved
// (prefill 4 tokens: 4*64*4 = 1024 bytes of activations, 4*4 = 16 bytes of token ids; decode one
// row: 256 and 4 bytes; the sampled token: 4 bytes), bounded by the ObjectSpecs (64x64 f32 =
// 16384 bytes, 64 i32 = 256 bytes).

// Buffers are SSA values: the edge objects are declared once and each send yields the next version
// of its edge object, which the recv of the next stage reads; the kv_cache_write of each block yields
// the next versions of its caches, which attention reads; the token loop is a !pplan.token from the
// prefill's token-out send to the decode's token-in recv. Types carry dtype, shape, lifetime and
// alignment, so bytes, dtypes and memory spaces are not repeated per task.

// CHECK:      pplan.plan @{{.*}} attributes {stage_count = 2 : i64, prompt_len = 4 : i64, decode_pos = 4 : i64, model = "llama"
// CHECK-NEXT: [[E0:%[0-9]+]] = pplan.edge_object "e0" "token_in" : !pplan.buffer<64xi32, edge>
// CHECK-NEXT: [[E1:%[0-9]+]] = pplan.edge_object "e1" "activation" : !pplan.buffer<64x64xf32, edge>
// CHECK-NEXT: [[E2:%[0-9]+]] = pplan.edge_object "e2" "token_out" : !pplan.buffer<64xi32, edge>
// CHECK-NEXT: pplan.weight 0 "token_embd.weight" : !pplan.buffer<512x64xf32, weight, align 32>
// CHECK:      pplan.step prefill {
// CHECK-NEXT:   pplan.stage 0 {
// CHECK-NEXT:     pplan.task recv([[E0]]) -> "input" at "edge:e0" bytes [16, 16] : !pplan.buffer<4xi32>
// CHECK:          [[SE1:%[0-9]+]] = pplan.task send(%{{[0-9]+}}) updates([[E1]]) at "edge:e1" work [4, 64] bytes [1024, 1024] : !pplan.buffer<64x64xf32, edge>
// CHECK-NEXT:     pplan.yield {{.*}}[[SE1]]
// CHECK-NEXT:   }
// CHECK-NEXT:   pplan.stage 1 {
// CHECK-NEXT:     pplan.task recv(%{{[0-9]+}}) -> "input" at "edge:e1" bytes [1024, 1024] : !pplan.buffer<4x64xf32>
// CHECK:          %{{[0-9]+}}, [[TOK:%[0-9]+]] = pplan.task send(%{{[0-9]+}}) updates([[E2]]) at "edge:e2" work [1] bytes [4, 4] token : !pplan.buffer<64xi32, edge>, !pplan.token
// CHECK:      pplan.step decode {
// CHECK-NEXT:   pplan.stage 0 {
// CHECK-NEXT:     pplan.task recv([[E0]]) after(%{{[0-9]+}}) -> "input" at "edge:e0" bytes [4, 4] : !pplan.buffer<1xi32>
// CHECK:        pplan.stage 1 {
// CHECK-NEXT:     [[X:%[0-9]+]] = pplan.task recv(%{{[0-9]+}}) -> "input" at "edge:e1" bytes [256, 256] : !pplan.buffer<1x64xf32>
// CHECK-NEXT:     [[XN:%[0-9]+]] = pplan.task rms_norm([[X]], %{{[0-9]+}}) -> "blk.3.attn_in" at "blk.3.attn_norm" flops 256 : !pplan.buffer<1x64xf32>
// CHECK-NEXT:     pplan.task matmul([[XN]], %{{[0-9]+}}) -> "blk.3.q_proj" at "blk.3.attn_q" work [1, 64, 64] : !pplan.buffer<1x64xf32>
// CHECK-NEXT:     pplan.task matmul([[XN]], %{{[0-9]+}}) -> "blk.3.k_proj" at "blk.3.attn_k" work [1, 32, 64] :
// CHECK-NEXT:     pplan.task matmul([[XN]], %{{[0-9]+}}) -> "blk.3.v" at "blk.3.attn_v" work [1, 32, 64] :
// CHECK-NEXT:     pplan.task rope({{.*}} at "blk.3.rope(q)" flops 192 bytes [256, 32, 256] :
// CHECK-NEXT:     pplan.task rope({{.*}} at "blk.3.rope(k)" flops 96 bytes [128, 32, 128] :
// CHECK-NEXT:     [[CK:%[0-9]+]], [[CV:%[0-9]+]] = pplan.task kv_cache_write(%{{[0-9]+}}, %{{[0-9]+}}) updates(%{{[0-9]+}}, %{{[0-9]+}}) at "blk.3.kv_cache_write()" work [1, 32] bytes [128, 128, 128, 128] : !pplan.buffer<64x4x8xf32, kv>, !pplan.buffer<64x4x8xf32, kv>
// CHECK-NEXT:     pplan.task attention(%{{[0-9]+}}, [[CK]], [[CV]]) -> "blk.3.attn" at "blk.3.attention(attn)" work [1, 64, 5] flops 1480 bytes [256, 640, 640, 256]
// CHECK-NEXT:     pplan.task matmul({{.*}} at "blk.3.attn_output" work [1, 64, 64] :
// CHECK-NEXT:     pplan.task add([[X]], {{.*}} at "blk.3.add(h_mid)" flops 64 :
// CHECK-NEXT:     pplan.task rms_norm({{.*}} at "blk.3.ffn_norm" flops 256 :
// CHECK-NEXT:     pplan.task matmul({{.*}} at "blk.3.ffn_gate" work [1, 172, 64] :
// CHECK-NEXT:     pplan.task matmul({{.*}} at "blk.3.ffn_up" work [1, 172, 64] :
// CHECK-NEXT:     pplan.task silu_mul({{.*}} at "blk.3.silu_mul(ffn_act)" flops 860 :
// CHECK-NEXT:     pplan.task matmul({{.*}} at "blk.3.ffn_down" work [1, 64, 172] :
// CHECK-NEXT:     pplan.task add({{.*}} at "blk.3.add(h4)" flops 64 :
// CHECK-NEXT:     pplan.task rms_norm({{.*}} at "blk.4.attn_norm" flops 256 :
// CHECK:          pplan.task add({{.*}} at "blk.4.add(h5)" flops 64 :
// CHECK-NEXT:     pplan.task last_row({{.*}} -> "h_last" at "last_row(h_last)" :
// CHECK-NEXT:     pplan.task rms_norm({{.*}} -> "h_norm" at "output_norm" flops 256 :
// CHECK-NEXT:     pplan.task matmul({{.*}} -> "output" at "output" work [1, 512, 64] :
// CHECK-NEXT:     [[T:%[0-9]+]] = pplan.task "argmax.token" argmax({{.*}} -> "token" at "sampling" flops 512 :
// CHECK-NEXT:     pplan.task send([[T]]) updates(%{{[0-9]+}}) at "edge:e2" work [1] bytes [4, 4] : !pplan.buffer<64xi32, edge>
// CHECK-NEXT:     pplan.yield
// CHECK-NEXT:   }
// CHECK-NEXT:   pplan.yield
// CHECK-NEXT: }
// CHECK-NEXT: }

// The command-line pipeline of issue 4: bindings inserted, candidates selected, costs resolved.
// PIPE-NOT:   runplan.
// PIPE:       pplan.plan
// PIPE:       pplan.task recv(%{{[0-9]+}}) -> "input" at "edge:e0" bytes [16, 16] {pplan.candidates = [#pplan.candidate<"vq.recv", "queue.copy", 0>], pplan.costs = [#pplan.cost<"vq.recv", {{.*}} s, roofline, direct, conf 0.5>]} : !pplan.buffer<4xi32>
// PIPE:       pplan.task matmul({{.*}}) -> "blk.3.q_proj" at "blk.3.attn_q" work [1, 64, 64] {pplan.candidates = [#pplan.candidate<"vq.matmul", "queue.compute", 0>], pplan.costs = [#pplan.cost<"vq.matmul", 8.448{{[0-9]*}}e-07 s, roofline, direct, conf 0.5>]} : !pplan.buffer<1x64xf32>
// PIPE:       pplan.deployment_binding @deployment {devices = [{{{.*}}id = "n0"{{.*}}}], stage_devices = ["n0", "n1"], topology = "chain"}
// PIPE:       pplan.target_binding @target {{{.*}}target = "virtual-queue"{{.*}}plugin_revision = "virtual-queue@1"}
// PIPE:       pplan.candidates {plan = @{{.*}}, target = "virtual-queue", portable_digest = "{{[0-9a-f]+}}", selected = 1 : i64}
// PIPE:       pplan.evidence_policy @policy {providers = ["roofline"], uncertainty_budget = 1.000000e+00 : f64, fallback = "allow", max_age_s = 0 : i64, revision = "r1"}
// PIPE:       pplan.costed_view {plan = @{{.*}}, portable_digest = "{{[0-9a-f]+}}", policy_fingerprint = "{{[0-9a-f]+}}", evidence_fingerprint = "{{[0-9a-f]+}}", target_fingerprint = "{{[0-9a-f]+}}", deployment_fingerprint = "{{[0-9a-f]+}}"}
