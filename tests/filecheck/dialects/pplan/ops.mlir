// RUN: pipeplan-opt %s | filecheck %s
// RUN: %roundtrip | filecheck %s
// RUN: %generic-roundtrip | filecheck %s
// RUN: pipeplan-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

// Every pplan op (plan, the four declarations, step, stage, task with reads / in-place updates /
// token order, yield, the analysis headers candidates and costed_view, a task's #pplan.candidate / #pplan.cost annotations; task syntax with
// its defaults elided and stated) and the three
// binding ops, in custom form; each prints back identically directly and through the generic form. Buffers are SSA values of
// !pplan.buffer types; enums are #pplan<op ..> / #pplan<step ..> attributes, candidates and costs #pplan.candidate<..> / #pplan.cost<..>
// (MLIR keeps them verbatim).
// Properties print in the order the op declares them, whatever order the input gives them in (MLIR's
// generic print sorts them).

builtin.module {
  pplan.plan @run0 attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "runplan @run0"} {
    %0 = pplan.edge_object "e0" "token_in" : !pplan.buffer<4xi32, edge>
    %1 = pplan.edge_object "e1" "token_out" : !pplan.buffer<4xi32, edge>
    %2 = pplan.weight 0 "blk.0.attn_q.weight" : !pplan.buffer<1x256xq4_k, weight, align 32>
    %3 = pplan.table 0 "rope_table" : !pplan.buffer<4x2xf32, weight>
    %4 = pplan.kv 0 "blk.0.cache_k" : !pplan.buffer<4x1x4xf16, kv>
    %5, %6, %7 = pplan.step prefill {
      %8, %9, %10 = pplan.stage 0 {
        %11 = pplan.task recv(%0) -> "input" at "edge:e0" bytes [4, 4] : !pplan.buffer<1xi32>
        %12 = pplan.task add(%3, %3) -> "blk.0.x" at "blk.0.add(x)" flops 8 {pplan.candidates = [#pplan.candidate<"vq.add", "queue.compute", 0>, #pplan.candidate<"vs.add", "queue.compute", 1, rule "vs.add (align 128)", workspace 64, rejected ["vs.add: not selected (rank 1 >= keep 1)"]>], pplan.costs = [#pplan.cost<"vq.add", 1.0e-06 s, roofline, fallback, conf 0.5>, #pplan.cost<"vs.add (align 128)", 2.5e-07 s, measured, out_of_domain, conf 0.25>]} : !pplan.buffer<4x2xf32>
        %13 = pplan.task kv_cache_write(%12) updates(%4) at "blk.0.kv_cache_write()" work [1, 4] bytes [8, 8] : !pplan.buffer<4x1x4xf16, kv>
        %14, %15 = pplan.task send(%11) updates(%1) at "edge:e1" work [1] bytes [4, 4] token : !pplan.buffer<4xi32, edge>, !pplan.token
        pplan.yield %13, %14, %15
      }
      pplan.yield %8, %9, %10
    }
    pplan.step decode {
      pplan.stage 0 {
        %16 = pplan.task recv(%0) after(%7) -> "input" at "edge:e0" bytes [4, 4] : !pplan.buffer<1xi32>
        %17 = pplan.task attention(%3, %5, %5) -> "blk.0.attn" at "blk.0.attention(attn)" work [1, 4, 2] flops 30 bytes [32, 16, 16, 16] : !pplan.buffer<1x4xf32>
        %18 = pplan.task send(%16) updates(%6) at "edge:e1" work [1] bytes [4, 4] : !pplan.buffer<4xi32, edge>
        %19 = pplan.task "argmax.token" argmax(%17) -> "token" at "sampling" blk 0 work [1] flops 4 bytes [16, 4] : !pplan.buffer<1xi32>
        pplan.yield
      }
      pplan.yield
    }
  }
  pplan.target_binding @target {target = "virtual-queue", architecture = "virtual-queue", runtime = "vq-runtime-1", capabilities = ["dtype:f32", "memspace:device"], library = "pipeplan-vq-kernels", library_version = "1", abi = "vq-abi-1", plugin_revision = "virtual-queue@1"}
  pplan.deployment_binding @deployment {devices = [{bandwidth_bytes_per_s = 1.000000e+11 : f64, flops_per_s = 1.000000e+12 : f64, id = "n0", link_bandwidth_bytes_per_s = 1.000000e+09 : f64, memory_bytes = 1000000 : i64, reserved_bytes = 160 : i64}], stage_devices = ["n0"], topology = "chain"}
  pplan.evidence_policy @policy {providers = ["measured:/tmp/t.json", "roofline"], uncertainty_budget = 1.000000e+00 : f64, fallback = "allow", max_age_s = 0 : i64, revision = "r1"}
  pplan.candidates {plan = @run0, target = "virtual-queue", portable_digest = "abc", selected = 1 : i64}
  pplan.costed_view {plan = @run0, portable_digest = "abc", policy_fingerprint = "p", evidence_fingerprint = "e", target_fingerprint = "t", deployment_fingerprint = "d"}
}


// CHECK:      pplan.plan @run0 attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "runplan @run0"} {
// CHECK-NEXT:   %0 = pplan.edge_object "e0" "token_in" : !pplan.buffer<4xi32, edge>
// CHECK-NEXT:   %1 = pplan.edge_object "e1" "token_out" : !pplan.buffer<4xi32, edge>
// CHECK-NEXT:   %2 = pplan.weight 0 "blk.0.attn_q.weight" : !pplan.buffer<1x256xq4_k, weight, align 32>
// CHECK-NEXT:   %3 = pplan.table 0 "rope_table" : !pplan.buffer<4x2xf32, weight>
// CHECK-NEXT:   %4 = pplan.kv 0 "blk.0.cache_k" : !pplan.buffer<4x1x4xf16, kv>
// CHECK-NEXT:   %5, %6, %7 = pplan.step prefill {
// CHECK-NEXT:     %8, %9, %10 = pplan.stage 0 {
// CHECK-NEXT:       %11 = pplan.task recv(%0) -> "input" at "edge:e0" bytes [4, 4] : !pplan.buffer<1xi32>
// CHECK-NEXT:       %12 = pplan.task add(%3, %3) -> "blk.0.x" at "blk.0.add(x)" flops 8 {pplan.candidates = [#pplan.candidate<"vq.add", "queue.compute", 0>, #pplan.candidate<"vs.add", "queue.compute", 1, rule "vs.add (align 128)", workspace 64, rejected ["vs.add: not selected (rank 1 >= keep 1)"]>], pplan.costs = [#pplan.cost<"vq.add", 1.0e-06 s, roofline, fallback, conf 0.5>, #pplan.cost<"vs.add (align 128)", 2.5e-07 s, measured, out_of_domain, conf 0.25>]} : !pplan.buffer<4x2xf32>
// CHECK-NEXT:       %13 = pplan.task kv_cache_write(%12) updates(%4) at "blk.0.kv_cache_write()" work [1, 4] bytes [8, 8] : !pplan.buffer<4x1x4xf16, kv>
// CHECK-NEXT:       %14, %15 = pplan.task send(%11) updates(%1) at "edge:e1" work [1] bytes [4, 4] token : !pplan.buffer<4xi32, edge>, !pplan.token
// CHECK-NEXT:       pplan.yield %13, %14, %15
// CHECK-NEXT:     }
// CHECK-NEXT:     pplan.yield %8, %9, %10
// CHECK-NEXT:   }
// CHECK-NEXT:   pplan.step decode {
// CHECK-NEXT:     pplan.stage 0 {
// CHECK-NEXT:       %16 = pplan.task recv(%0) after(%7) -> "input" at "edge:e0" bytes [4, 4] : !pplan.buffer<1xi32>
// CHECK-NEXT:       %17 = pplan.task attention(%3, %5, %5) -> "blk.0.attn" at "blk.0.attention(attn)" work [1, 4, 2] flops 30 bytes [32, 16, 16, 16] : !pplan.buffer<1x4xf32>
// CHECK-NEXT:       %18 = pplan.task send(%16) updates(%6) at "edge:e1" work [1] bytes [4, 4] : !pplan.buffer<4xi32, edge>
// CHECK-NEXT:       %19 = pplan.task "argmax.token" argmax(%17) -> "token" at "sampling" blk 0 flops 4 : !pplan.buffer<1xi32>
// CHECK-NEXT:       pplan.yield
// CHECK-NEXT:     }
// CHECK-NEXT:     pplan.yield
// CHECK-NEXT:   }
// CHECK-NEXT: }
// CHECK-NEXT: pplan.target_binding @target {target = "virtual-queue", architecture = "virtual-queue", runtime = "vq-runtime-1", capabilities = ["dtype:f32", "memspace:device"], library = "pipeplan-vq-kernels", library_version = "1", abi = "vq-abi-1", plugin_revision = "virtual-queue@1"}
// CHECK-NEXT: pplan.deployment_binding @deployment {devices = [{bandwidth_bytes_per_s = 1.000000e+11 : f64, flops_per_s = 1.000000e+12 : f64, id = "n0", link_bandwidth_bytes_per_s = 1.000000e+09 : f64, memory_bytes = 1000000 : i64, reserved_bytes = 160 : i64}], stage_devices = ["n0"], topology = "chain"}
// CHECK-NEXT: pplan.evidence_policy @policy {providers = ["measured:/tmp/t.json", "roofline"], uncertainty_budget = 1.000000e+00 : f64, fallback = "allow", max_age_s = 0 : i64, revision = "r1"}
// CHECK-NEXT: pplan.candidates {plan = @run0, target = "virtual-queue", portable_digest = "abc", selected = 1 : i64}
// CHECK-NEXT: pplan.costed_view {plan = @run0, portable_digest = "abc", policy_fingerprint = "p", evidence_fingerprint = "e", target_fingerprint = "t", deployment_fingerprint = "d"}

// GENERIC:      "pplan.plan"() <{sym_name = "run0", stage_count = 1 : i64
// GENERIC:      %0 = "pplan.edge_object"() <{edge = "e0", kind = "token_in"}> : () -> !pplan.buffer<4xi32, edge>
// GENERIC:      %2 = "pplan.weight"() <{stage = 0 : i64, origin = "blk.0.attn_q.weight"}> : () -> !pplan.buffer<1x256xq4_k, weight, align 32>
// GENERIC:      "pplan.table"() <{stage = 0 : i64, origin = "rope_table"}>
// GENERIC:      "pplan.kv"() <{stage = 0 : i64, origin = "blk.0.cache_k"}>
// GENERIC:      %5, %6, %7 = "pplan.step"() <{step = #pplan<step prefill>}> ({
// GENERIC-NEXT:   %8, %9, %10 = "pplan.stage"() <{index = 0 : i64}> ({
// GENERIC-NEXT:     %11 = "pplan.task"(%0) <{task = "recv.e0", op = #pplan<op recv>, out = "input", model_op = "edge:e0", block = -1 : i64, flops = 0 : i64, work = array<i64: 1>, bytes = array<i64: 4, 4>, operandSegmentSizes = array<i32: 1, 0, 0>}> : (!pplan.buffer<4xi32, edge>) -> !pplan.buffer<1xi32>
// GENERIC:          %12 = "pplan.task"(%3, %3) <{{.*}}> {pplan.candidates = [#pplan.candidate<"vq.add", "queue.compute", 0>, #pplan.candidate<"vs.add", "queue.compute", 1, rule "vs.add (align 128)", workspace 64, rejected ["vs.add: not selected (rank 1 >= keep 1)"]>], pplan.costs = [#pplan.cost<"vq.add", 1.0e-06 s, roofline, fallback, conf 0.5>, #pplan.cost<"vs.add (align 128)", 2.5e-07 s, measured, out_of_domain, conf 0.25>]} : (!pplan.buffer<4x2xf32, weight>, !pplan.buffer<4x2xf32, weight>) -> !pplan.buffer<4x2xf32>
// GENERIC:          %14, %15 = "pplan.task"(%11, %1) <{{.*}}token, operandSegmentSizes = array<i32: 1, 1, 0>}> : (!pplan.buffer<1xi32>, !pplan.buffer<4xi32, edge>) -> (!pplan.buffer<4xi32, edge>, !pplan.token)
// GENERIC-NEXT:     "pplan.yield"(%13, %14, %15)
// GENERIC:          "pplan.task"(%0, %7) <{{.*}}operandSegmentSizes = array<i32: 1, 0, 1>}>
// GENERIC:      "pplan.target_binding"() <{sym_name = "target", target = "virtual-queue"
// GENERIC:      "pplan.deployment_binding"() <{sym_name = "deployment", devices = [{bandwidth_bytes_per_s = 1.000000e+11 : f64
// GENERIC:      "pplan.evidence_policy"() <{sym_name = "policy", providers = ["measured:/tmp/t.json"
// GENERIC:      "pplan.candidates"() <{plan = @run0, target = "virtual-queue"
// GENERIC:      "pplan.costed_view"() <{plan = @run0, portable_digest = "abc"
