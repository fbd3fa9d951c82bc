// RUN: pipeplan-opt %s | filecheck %s
// RUN: %roundtrip | filecheck %s
// RUN: %generic-roundtrip | filecheck %s
// RUN: pipeplan-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

// Every pplan op (plan, buffer, task, candidates, candidate, costed_view, cost) and the three
// binding ops, in custom form; each prints back identically directly and through the generic
// form, whose values are all properties in MLIR-parseable carriers.

builtin.module {
  pplan.plan @run0 attributes {decode_pos = 1 : i64, model = "m", prompt_len = 1 : i64, source = "runplan @run0", stage_count = 1 : i64} {
    pplan.buffer @x {alignment = 64 : i64, bytes = 16 : i64, dtype = "f32", lifetime = "transient", memspace = "device", origin = "decode:x", shape = array<i64: 1, 4>, stage = 0 : i64}
    pplan.buffer @w {alignment = 32 : i64, bytes = 144 : i64, dtype = "q4_k", lifetime = "weight", memspace = "device", origin = "blk.0.attn_q.weight", shape = array<i64: 1, 256>, stage = 0 : i64}
    pplan.buffer @kv {alignment = 64 : i64, bytes = 32 : i64, dtype = "f16", lifetime = "kv", memspace = "device", origin = "blk.0.cache_k", shape = array<i64: 4, 1, 4>, stage = 0 : i64}
    pplan.buffer @edge.e1 {alignment = 64 : i64, bytes = 16 : i64, dtype = "f32", lifetime = "edge", memspace = "link", origin = "edge e1 (activation)", shape = array<i64: 1, 4>, stage = -1 : i64}
    pplan.task @t0 {alignment = 64 : i64, block = 0 : i64, bytes_read = 32 : i64, bytes_written = 16 : i64, collective = "none", deps = [], dtypes = ["f32", "f32", "f32"], flops = 4 : i64, layout = "row_major", memspace = "device", model_op = "blk.0.add(x)", op = "add", read_bytes = array<i64: 16, 16>, reads = [@x, @x], shape = array<i64: 1, 4>, stage = 0 : i64, step = "decode", write_bytes = array<i64: 16>, writes = [@x]}
    pplan.task @t1 {alignment = 64 : i64, block = -1 : i64, bytes_read = 16 : i64, bytes_written = 16 : i64, collective = "send", deps = [@t0], dtypes = ["f32", "f32"], edge = "e1", flops = 0 : i64, layout = "row_major", memspace = "link", model_op = "edge:e1", op = "send", read_bytes = array<i64: 16>, reads = [@x], shape = array<i64: 1, 4>, stage = 0 : i64, step = "decode", write_bytes = array<i64: 16>, writes = [@edge.e1]}
  }
  pplan.target_binding @target {abi = "vq-abi-1", architecture = "virtual-queue", capabilities = ["dtype:f32", "memspace:device"], library = "pipeplan-vq-kernels", library_version = "1", plugin_revision = "virtual-queue@1", runtime = "vq-runtime-1", target = "virtual-queue"}
  pplan.deployment_binding @deployment {devices = [{bandwidth_bytes_per_s = 1.000000e+11 : f64, flops_per_s = 1.000000e+12 : f64, id = "n0", link_bandwidth_bytes_per_s = 1.000000e+09 : f64, memory_bytes = 1000000 : i64, reserved_bytes = 160 : i64}], stage_devices = ["n0"], topology = "chain"}
  pplan.evidence_policy @policy {fallback = "allow", max_age_s = 0 : i64, providers = ["measured:/tmp/t.json", "roofline"], revision = "r1", uncertainty_budget = 1.000000e+00 : f64}
  pplan.candidates attributes {plan = @run0, portable_digest = "abc", selected = 1 : i64, target = "virtual-queue"} {
    pplan.candidate @c.t0.vq.add {impl = "vq.add", plugin_revision = "virtual-queue@1", rank = 0 : i64, rejected = [], resources = {engine = "queue.compute", workspace_bytes = 0 : i64}, rule = "vq.add", task = @t0}
  }
  pplan.costed_view attributes {deployment_fingerprint = "d", evidence_fingerprint = "e", plan = @run0, policy_fingerprint = "p", portable_digest = "abc", target_fingerprint = "t"} {
    pplan.cost {candidate = @c.t0.vq.add, confidence = 5.000000e-01 : f64, duration_s = 1.000000e-06 : f64, key = "add|f32,f32,f32|1x4", provider = "roofline", status = "fallback", task = @t0}
  }
}

// CHECK:      pplan.plan @run0 attributes {decode_pos = 1 : i64, model = "m", prompt_len = 1 : i64, source = "runplan @run0", stage_count = 1 : i64} {
// CHECK-NEXT:   pplan.buffer @x {alignment = 64 : i64, bytes = 16 : i64, dtype = "f32", lifetime = "transient", memspace = "device", origin = "decode:x", shape = array<i64: 1, 4>, stage = 0 : i64}
// CHECK-NEXT:   pplan.buffer @w {{.*}}dtype = "q4_k", lifetime = "weight"{{.*}}shape = array<i64: 1, 256>
// CHECK-NEXT:   pplan.buffer @kv {{.*}}lifetime = "kv"
// CHECK-NEXT:   pplan.buffer @edge.e1 {{.*}}lifetime = "edge", memspace = "link"{{.*}}stage = -1 : i64}
// CHECK-NEXT:   pplan.task @t0 {{.*}}deps = [], dtypes = ["f32", "f32", "f32"], flops = 4 : i64{{.*}}op = "add", read_bytes = array<i64: 16, 16>, reads = [@x, @x]
// CHECK-NEXT:   pplan.task @t1 {{.*}}collective = "send", deps = [@t0]{{.*}}edge = "e1"{{.*}}writes = [@edge.e1]}
// CHECK-NEXT: }
// CHECK-NEXT: pplan.target_binding @target {abi = "vq-abi-1", architecture = "virtual-queue"
// CHECK-NEXT: pplan.deployment_binding @deployment {devices = [{bandwidth_bytes_per_s = 1.000000e+11 : f64{{.*}}id = "n0"{{.*}}reserved_bytes = 160 : i64}], stage_devices = ["n0"], topology = "chain"}
// CHECK-NEXT: pplan.evidence_policy @policy {fallback = "allow", max_age_s = 0 : i64, providers = ["measured:/tmp/t.json", "roofline"]
// CHECK-NEXT: pplan.candidates attributes {plan = @run0, portable_digest = "abc", selected = 1 : i64, target = "virtual-queue"} {
// CHECK-NEXT:   pplan.candidate @c.t0.vq.add {impl = "vq.add", plugin_revision = "virtual-queue@1", rank = 0 : i64, rejected = [], resources = {engine = "queue.compute", workspace_bytes = 0 : i64}, rule = "vq.add", task = @t0}
// CHECK-NEXT: }
// CHECK-NEXT: pplan.costed_view attributes {{{.*}}plan = @run0{{.*}}} {
// CHECK-NEXT:   pplan.cost {candidate = @c.t0.vq.add, confidence = 5.000000e-01 : f64, duration_s = 1.000000e-06 : f64, key = "add|f32,f32,f32|1x4", provider = "roofline", status = "fallback", task = @t0}
// CHECK-NEXT: }

// GENERIC:      "pplan.plan"() <{sym_name = "run0", decode_pos = 1 : i64, model = "m", prompt_len = 1 : i64, source = "runplan @run0", stage_count = 1 : i64}> ({
// GENERIC-NEXT:   "pplan.buffer"() <{sym_name = "x", alignment = 64 : i64, bytes = 16 : i64, dtype = "f32"
// GENERIC:        "pplan.task"() <{sym_name = "t0", alignment = 64 : i64, block = 0 : i64
// GENERIC:      "pplan.target_binding"() <{sym_name = "target", abi = "vq-abi-1"
// GENERIC:      "pplan.deployment_binding"() <{sym_name = "deployment", devices = [{
// GENERIC:      "pplan.evidence_policy"() <{sym_name = "policy", fallback = "allow"
// GENERIC:      "pplan.candidates"() <{plan = @run0
// GENERIC-NEXT:   "pplan.candidate"() <{sym_name = "c.t0.vq.add", impl = "vq.add"
// GENERIC:      "pplan.costed_view"() <{deployment_fingerprint = "d"
// GENERIC-NEXT:   "pplan.cost"() <{candidate = @c.t0.vq.add
