// RUN: pipeplan-opt %s | filecheck %s
// RUN: %roundtrip | filecheck %s
// RUN: %generic-roundtrip | filecheck %s
// RUN: pipeplan-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

// Every pplan op (plan, buffer, task, candidates, candidate, costed_view, cost) and the three
// binding ops, in custom form; each prints back identically directly and through the generic
// form, whose values are all properties in MLIR-parseable carriers. Properties print in the order the
// op declares them, whatever order the input gives them in (MLIR's generic print sorts them).

builtin.module {
  pplan.plan @run0 attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "runplan @run0"} {
    pplan.buffer @x {dtype = "f32", shape = array<i64: 1, 4>, bytes = 16 : i64, alignment = 64 : i64, lifetime = "transient", memspace = "device", stage = 0 : i64, origin = "decode:x"}
    pplan.buffer @w {dtype = "q4_k", shape = array<i64: 1, 256>, bytes = 144 : i64, alignment = 32 : i64, lifetime = "weight", memspace = "device", stage = 0 : i64, origin = "blk.0.attn_q.weight"}
    pplan.buffer @kv {dtype = "f16", shape = array<i64: 4, 1, 4>, bytes = 32 : i64, alignment = 64 : i64, lifetime = "kv", memspace = "device", stage = 0 : i64, origin = "blk.0.cache_k"}
    pplan.buffer @edge.e1 {dtype = "f32", shape = array<i64: 1, 4>, bytes = 16 : i64, alignment = 64 : i64, lifetime = "edge", memspace = "link", stage = -1 : i64, origin = "edge e1 (activation)"}
    pplan.task @t0 {op = "add", step = "decode", stage = 0 : i64, block = 0 : i64, model_op = "blk.0.add(x)", flops = 4 : i64, bytes_read = 32 : i64, bytes_written = 16 : i64, reads = [@x, @x], read_bytes = array<i64: 16, 16>, writes = [@x], write_bytes = array<i64: 16>, dtypes = ["f32", "f32", "f32"], shape = array<i64: 1, 4>, layout = "row_major", alignment = 64 : i64, memspace = "device", collective = "none", deps = []}
    pplan.task @t1 {op = "send", step = "decode", stage = 0 : i64, block = -1 : i64, model_op = "edge:e1", flops = 0 : i64, bytes_read = 16 : i64, bytes_written = 16 : i64, reads = [@x], read_bytes = array<i64: 16>, writes = [@edge.e1], write_bytes = array<i64: 16>, dtypes = ["f32", "f32"], shape = array<i64: 1, 4>, layout = "row_major", alignment = 64 : i64, memspace = "link", collective = "send", edge = "e1", deps = [@t0]}
  }
  pplan.target_binding @target {target = "virtual-queue", architecture = "virtual-queue", runtime = "vq-runtime-1", capabilities = ["dtype:f32", "memspace:device"], library = "pipeplan-vq-kernels", library_version = "1", abi = "vq-abi-1", plugin_revision = "virtual-queue@1"}
  pplan.deployment_binding @deployment {devices = [{bandwidth_bytes_per_s = 1.000000e+11 : f64, flops_per_s = 1.000000e+12 : f64, id = "n0", link_bandwidth_bytes_per_s = 1.000000e+09 : f64, memory_bytes = 1000000 : i64, reserved_bytes = 160 : i64}], stage_devices = ["n0"], topology = "chain"}
  pplan.evidence_policy @policy {providers = ["measured:/tmp/t.json", "roofline"], uncertainty_budget = 1.000000e+00 : f64, fallback = "allow", max_age_s = 0 : i64, revision = "r1"}
  pplan.candidates attributes {plan = @run0, target = "virtual-queue", portable_digest = "abc", selected = 1 : i64} {
    pplan.candidate @c.t0.vq.add {task = @t0, impl = "vq.add", rule = "vq.add", plugin_revision = "virtual-queue@1", resources = {engine = "queue.compute", workspace_bytes = 0 : i64}, rejected = [], rank = 0 : i64}
  }
  pplan.costed_view attributes {plan = @run0, portable_digest = "abc", policy_fingerprint = "p", evidence_fingerprint = "e", target_fingerprint = "t", deployment_fingerprint = "d"} {
    pplan.cost {candidate = @c.t0.vq.add, task = @t0, duration_s = 1.000000e-06 : f64, provider = "roofline", confidence = 5.000000e-01 : f64, status = "fallback", key = "add|f32,f32,f32|1x4"}
  }
}

// CHECK:      pplan.plan @run0 attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "runplan @run0"} {
// CHECK-NEXT:   pplan.buffer @x {dtype = "f32", shape = array<i64: 1, 4>, bytes = 16 : i64, alignment = 64 : i64, lifetime = "transient", memspace = "device", stage = 0 : i64, origin = "decode:x"}
// CHECK-NEXT:   pplan.buffer @w {dtype = "q4_k", shape = array<i64: 1, 256>, bytes = 144 : i64, alignment = 32 : i64, lifetime = "weight", memspace = "device", stage = 0 : i64, origin = "blk.0.attn_q.weight"}
// CHECK-NEXT:   pplan.buffer @kv {dtype = "f16", shape = array<i64: 4, 1, 4>, bytes = 32 : i64, alignment = 64 : i64, lifetime = "kv", memspace = "device", stage = 0 : i64, origin = "blk.0.cache_k"}
// CHECK-NEXT:   pplan.buffer @edge.e1 {dtype = "f32", shape = array<i64: 1, 4>, bytes = 16 : i64, alignment = 64 : i64, lifetime = "edge", memspace = "link", stage = -1 : i64, origin = "edge e1 (activation)"}
// CHECK-NEXT:   pplan.task @t0 {op = "add", step = "decode", stage = 0 : i64, block = 0 : i64, model_op = "blk.0.add(x)", flops = 4 : i64, bytes_read = 32 : i64, bytes_written = 16 : i64, reads = [@x, @x], read_bytes = array<i64: 16, 16>, writes = [@x], write_bytes = array<i64: 16>, dtypes = ["f32", "f32", "f32"], shape = array<i64: 1, 4>, layout = "row_major", alignment = 64 : i64, memspace = "device", collective = "none", deps = []}
// CHECK-NEXT:   pplan.task @t1 {op = "send", step = "decode", stage = 0 : i64, block = -1 : i64, model_op = "edge:e1", flops = 0 : i64, bytes_read = 16 : i64, bytes_written = 16 : i64, reads = [@x], read_bytes = array<i64: 16>, writes = [@edge.e1], write_bytes = array<i64: 16>, dtypes = ["f32", "f32"], shape = array<i64: 1, 4>, layout = "row_major", alignment = 64 : i64, memspace = "link", collective = "send", edge = "e1", deps = [@t0]}
// CHECK-NEXT: }
// CHECK-NEXT: pplan.target_binding @target {target = "virtual-queue", architecture = "virtual-queue", runtime = "vq-runtime-1", capabilities = ["dtype:f32", "memspace:device"], library = "pipeplan-vq-kernels", library_version = "1", abi = "vq-abi-1", plugin_revision = "virtual-queue@1"}
// CHECK-NEXT: pplan.deployment_binding @deployment {devices = [{bandwidth_bytes_per_s = 1.000000e+11 : f64, flops_per_s = 1.000000e+12 : f64, id = "n0", link_bandwidth_bytes_per_s = 1.000000e+09 : f64, memory_bytes = 1000000 : i64, reserved_bytes = 160 : i64}], stage_devices = ["n0"], topology = "chain"}
// CHECK-NEXT: pplan.evidence_policy @policy {providers = ["measured:/tmp/t.json", "roofline"], uncertainty_budget = 1.000000e+00 : f64, fallback = "allow", max_age_s = 0 : i64, revision = "r1"}
// CHECK-NEXT: pplan.candidates attributes {plan = @run0, target = "virtual-queue", portable_digest = "abc", selected = 1 : i64} {
// CHECK-NEXT:   pplan.candidate @c.t0.vq.add {task = @t0, impl = "vq.add", rule = "vq.add", plugin_revision = "virtual-queue@1", resources = {engine = "queue.compute", workspace_bytes = 0 : i64}, rejected = [], rank = 0 : i64}
// CHECK-NEXT: }
// CHECK-NEXT: pplan.costed_view attributes {plan = @run0, portable_digest = "abc", policy_fingerprint = "p", evidence_fingerprint = "e", target_fingerprint = "t", deployment_fingerprint = "d"} {
// CHECK-NEXT:   pplan.cost {candidate = @c.t0.vq.add, task = @t0, duration_s = 1.000000e-06 : f64, provider = "roofline", confidence = 5.000000e-01 : f64, status = "fallback", key = "add|f32,f32,f32|1x4"}
// CHECK-NEXT: }

// GENERIC:      "pplan.plan"() <{sym_name = "run0", stage_count = 1 : i64
// GENERIC:      "pplan.buffer"() <{sym_name = "x", dtype = "f32"
// GENERIC:      "pplan.buffer"() <{sym_name = "w", dtype = "q4_k"
// GENERIC:      "pplan.buffer"() <{sym_name = "kv", dtype = "f16"
// GENERIC:      "pplan.buffer"() <{sym_name = "edge.e1", dtype = "f32"
// GENERIC:      "pplan.task"() <{sym_name = "t0", op = "add"
// GENERIC:      "pplan.task"() <{sym_name = "t1", op = "send"
// GENERIC:      "pplan.target_binding"() <{sym_name = "target", target = "virtual-queue"
// GENERIC:      "pplan.deployment_binding"() <{sym_name = "deployment", devices = [{bandwidth_bytes_per_s = 1.000000e+11 : f64
// GENERIC:      "pplan.evidence_policy"() <{sym_name = "policy", providers = ["measured:/tmp/t.json"
// GENERIC:      "pplan.candidates"() <{plan = @run0, target = "virtual-queue"
// GENERIC:      "pplan.candidate"() <{sym_name = "c.t0.vq.add", task = @t0
// GENERIC:      "pplan.costed_view"() <{plan = @run0, portable_digest = "abc"
// GENERIC:      "pplan.cost"() <{candidate = @c.t0.vq.add, task = @t0
