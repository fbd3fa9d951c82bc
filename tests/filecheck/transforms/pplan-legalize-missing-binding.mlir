// RUN: pipeplan-opt %s -p 'pplan-legalize' --verify-diagnostics | filecheck %s
// RUN: pipeplan-opt %s -p 'pplan-legalize{target=virtual-queue},pplan-select-implementations,pplan-resolve-costs{evidence=roofline}' --verify-diagnostics | filecheck %s --check-prefix=DEPLOY
// RUN: pipeplan-opt %s -p 'pplan-legalize{target=no-such-target}' --verify-diagnostics | filecheck %s --check-prefix=UNKNOWN

// The binding gate never reads a default (AB-G-1, AB-G-4): without a TargetBinding (no target
// option, no pplan.target_binding op) legalization fails naming it; without a DeploymentBinding
// cost resolution fails naming it; an unknown target is a diagnostic listing the known ones.

pplan.plan @run0 attributes {decode_pos = 1 : i64, model = "m", prompt_len = 1 : i64, source = "runplan @run0", stage_count = 1 : i64} {
  pplan.buffer @x {alignment = 64 : i64, bytes = 16 : i64, dtype = "f32", lifetime = "transient", memspace = "device", origin = "decode:x", shape = array<i64: 1, 4>, stage = 0 : i64}
  pplan.task @t {alignment = 64 : i64, block = 0 : i64, bytes_read = 32 : i64, bytes_written = 16 : i64, collective = "none", deps = [], dtypes = ["f32", "f32", "f32"], flops = 4 : i64, layout = "row_major", memspace = "device", model_op = "blk.0.add(x)", op = "add", read_bytes = array<i64: 16, 16>, reads = [@x, @x], shape = array<i64: 1, 4>, stage = 0 : i64, step = "decode", write_bytes = array<i64: 16>, writes = [@x]}
}

// CHECK: missing binding: TargetBinding (pplan.target_binding) is required by pplan-legalize; add a pplan.target_binding op or pass pplan-legalize{target=<name>}
// DEPLOY: missing binding: DeploymentBinding (pplan.deployment_binding) is required by pplan-resolve-costs; add a pplan.deployment_binding op or pass convert-runplan-to-pplan{pool=<pool.toml>}
// UNKNOWN: pplan-legalize: unknown target 'no-such-target'; known targets: cuda-triton, virtual-queue, virtual-slot
