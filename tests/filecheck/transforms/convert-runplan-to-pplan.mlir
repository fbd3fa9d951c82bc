// RUN: pipeplan plan %models/stories260K.gguf --stages 2 --nodes %S/Inputs/pplan-pool2.toml --max-seq-len 64 > %t.runplan.mlir
// RUN: pipeplan-opt %t.runplan.mlir -p 'convert-runplan-to-pplan{prompt_len=4 pool="%S/Inputs/pplan-pool2.toml"}' | grep 'pplan.task @decode.s1\|pplan.task @prefill.s.\.\(send\|recv\)\|pplan.buffer @edge\|pplan.plan' | filecheck %s
// RUN: pipeplan-opt %t.runplan.mlir -p 'convert-runplan-to-pplan{prompt_len=4 pool="%S/Inputs/pplan-pool2.toml"},pplan-legalize{target=virtual-queue},pplan-select-implementations,pplan-resolve-costs{evidence=roofline}' | filecheck %s --check-prefix=PIPE

// stories260K (5 blocks, hidden 64, 8/4 heads, ffn 172, vocab 512) planned on 2 stages from the
// command line, then converted: stage 1 owns blocks [3, 5). The decode step of stage 1 is the recv
// of activation edge e1, 16 tasks per block in the runtime's kernel order, last_row, output norm,
// head, sampling and the send of token-out edge e2. Edge transfers are sized by the rows moved
// (prefill 4 tokens: 4*64*4 = 1024 bytes of activations, 4*4 = 16 bytes of token ids; decode one
// row: 256 and 4 bytes; the sampled token: 4 bytes), bounded by the ObjectSpecs (64x64 f32 =
// 16384 bytes, 64 i32 = 256 bytes).

// CHECK:      pplan.plan @{{.*}} attributes {stage_count = 2 : i64, prompt_len = 4 : i64, decode_pos = 4 : i64, model = "llama"
// CHECK-NEXT: pplan.buffer @edge.e0 {dtype = "i32", shape = array<i64: 64>, bytes = 256 : i64{{.*}}lifetime = "edge"
// CHECK-NEXT: pplan.buffer @edge.e1 {dtype = "f32", shape = array<i64: 64, 64>, bytes = 16384 : i64{{.*}}lifetime = "edge"
// CHECK-NEXT: pplan.buffer @edge.e2 {dtype = "i32", shape = array<i64: 64>, bytes = 256 : i64
// CHECK:      pplan.task @prefill.s0.recv.e0 {op = "recv"{{.*}}bytes_read = 16 : i64, bytes_written = 16 : i64
// CHECK:      pplan.task @prefill.s0.send.e1 {op = "send"{{.*}}bytes_read = 1024 : i64, bytes_written = 1024 : i64, reads = [@prefill.s0.output]{{.*}}writes = [@edge.e1]{{.*}}collective = "send", deps = [@prefill.s0.b2.add.output], edge = "e1"}
// CHECK:      pplan.task @prefill.s1.recv.e1 {op = "recv"{{.*}}bytes_read = 1024 : i64, bytes_written = 1024 : i64, reads = [@edge.e1]{{.*}}collective = "recv", deps = [@prefill.s0.send.e1], edge = "e1"}
// CHECK:      pplan.task @prefill.s1.send.e2 {op = "send"{{.*}}bytes_read = 4 : i64, bytes_written = 4 : i64
// CHECK:      pplan.task @decode.s1.recv.e1 {op = "recv", step = "decode", stage = 1 : i64, block = -1 : i64, model_op = "edge:e1", flops = 0 : i64, bytes_read = 256 : i64, bytes_written = 256 : i64
// CHECK-NEXT: pplan.task @decode.s1.b3.rms_norm.attn_norm {op = "rms_norm", step = "decode", stage = 1 : i64, block = 3 : i64, model_op = "blk.3.attn_norm", flops = 256 : i64
// CHECK-NEXT: pplan.task @decode.s1.b3.matmul.attn_q {op = "matmul", {{.*}}model_op = "blk.3.attn_q", flops = 8192 : i64, bytes_read = 16640 : i64, bytes_written = 256 : i64
// CHECK-NEXT: pplan.task @decode.s1.b3.matmul.attn_k {op = "matmul", {{.*}}flops = 4096 : i64
// CHECK-NEXT: pplan.task @decode.s1.b3.matmul.attn_v {op = "matmul", {{.*}}flops = 4096 : i64
// CHECK-NEXT: pplan.task @decode.s1.b3.rope.q {op = "rope",
// CHECK-NEXT: pplan.task @decode.s1.b3.rope.k {op = "rope",
// CHECK-NEXT: pplan.task @decode.s1.b3.kv_cache_write {op = "kv_cache_write", {{.*}}writes = [@s1.blk.3.cache_k, @s1.blk.3.cache_v], write_bytes = array<i64: 128, 128>
// CHECK-NEXT: pplan.task @decode.s1.b3.attention.attn {op = "attention", {{.*}}read_bytes = array<i64: 256, 640, 640>
// CHECK-NEXT: pplan.task @decode.s1.b3.matmul.attn_output {op = "matmul",
// CHECK-NEXT: pplan.task @decode.s1.b3.add.h_mid {op = "add",
// CHECK-NEXT: pplan.task @decode.s1.b3.rms_norm.ffn_norm {op = "rms_norm",
// CHECK-NEXT: pplan.task @decode.s1.b3.matmul.ffn_gate {op = "matmul", {{.*}}flops = 22016 : i64
// CHECK-NEXT: pplan.task @decode.s1.b3.matmul.ffn_up {op = "matmul",
// CHECK-NEXT: pplan.task @decode.s1.b3.silu_mul.ffn_act {op = "silu_mul",
// CHECK-NEXT: pplan.task @decode.s1.b3.matmul.ffn_down {op = "matmul",
// CHECK-NEXT: pplan.task @decode.s1.b3.add.h4 {op = "add",
// CHECK-NEXT: pplan.task @decode.s1.b4.rms_norm.attn_norm {op = "rms_norm",
// CHECK:      pplan.task @decode.s1.b4.add.h5 {op = "add",
// CHECK-NEXT: pplan.task @decode.s1.last_row.h_last {op = "last_row",
// CHECK-NEXT: pplan.task @decode.s1.rms_norm.output_norm {op = "rms_norm",
// CHECK-NEXT: pplan.task @decode.s1.matmul.output {op = "matmul", {{.*}}model_op = "output", flops = 65536 : i64
// CHECK-NEXT: pplan.task @decode.s1.argmax.token {op = "argmax", {{.*}}model_op = "sampling", flops = 512 : i64
// CHECK-NEXT: pplan.task @decode.s1.send.e2 {op = "send", {{.*}}bytes_read = 4 : i64, bytes_written = 4 : i64, reads = [@decode.s1.token]{{.*}}writes = [@edge.e2]

// The command-line pipeline of issue 4: bindings inserted, candidates selected, costs resolved.
// PIPE-NOT:   runplan.
// PIPE:       pplan.plan
// PIPE:       pplan.deployment_binding @deployment {devices = [{id = "n0"{{.*}}}], stage_devices = ["n0", "n1"], topology = "chain"}
// PIPE:       pplan.target_binding @target {{{.*}}target = "virtual-queue"
// PIPE:       pplan.candidates attributes {plan = @{{.*}}, target = "virtual-queue", portable_digest = "{{[0-9a-f]+}}", selected = 1 : i64}
// PIPE:       pplan.candidate @c.prefill.s0.recv.e0.vq.recv {task = @prefill.s0.recv.e0, impl = "vq.recv", rule = "vq.recv", plugin_revision = "virtual-queue@1", resources = {engine = "queue.copy", workspace_bytes = 0 : i64}, rejected = [], rank = 0 : i64}
// PIPE:       pplan.evidence_policy @policy {providers = ["roofline"], uncertainty_budget = 1.000000e+00 : f64, fallback = "allow", max_age_s = 0 : i64, revision = "r1"}
// PIPE:       pplan.costed_view attributes {plan = @{{.*}}, portable_digest = "{{[0-9a-f]+}}", policy_fingerprint = "{{[0-9a-f]+}}", evidence_fingerprint = "{{[0-9a-f]+}}", target_fingerprint = "{{[0-9a-f]+}}", deployment_fingerprint = "{{[0-9a-f]+}}"}
// PIPE:       pplan.cost {candidate = @c.decode.s1.b3.matmul.attn_q.vq.matmul, task = @decode.s1.b3.matmul.attn_q, duration_s = 8.4480{{[0-9]*}}e-07 : f64, provider = "roofline", confidence = 5.000000e-01 : f64, status = "direct", key = "matmul|f32,f32,f32|1x64x64"}
