// RUN: pipeplan-opt %s -p cplan-verify --split-input-file --verify-diagnostics | filecheck %s
// RUN: pipeplan-opt %s -p cplan-verify --split-input-file --verify-diagnostics --disable-verify | filecheck %s --check-prefix=PASS
// One plan per construction invariant of seeds/003 (AB-S-1..7), each hand-broken in exactly that way;
// the first is the sound plan, which cplan-verify leaves unchanged. cplan.plan's verifier rejects each
// broken plan on parse ([AB-S-n] <invariant> (<code>): ...); with --disable-verify the plans reach the
// cplan-verify pass, which reports the same violation in its own form (AB-S-n <code>: ...).
// the sound plan passes
cplan.plan attributes {binder = "reference-queue", target = "vq@1", deployment = "dep", evidence = "roofline@r1", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
  %w = cplan.alloc "alloc.w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 128 : i64, alignment = 64 : i64}
  %a = cplan.alloc "alloc.a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %b = cplan.alloc "alloc.b" transient {source = "b", device = "d0", space = "device", offset = 192 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "cmd.t0" (%w) -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "cmd.t1" (%a) -> (%b) after(%t0) cost direct by roofline {task = "t1", op = "matmul", impl = "vq.matmul", device = "d0", engine = "copy", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_q">, duration = 1.0e-06 : f64}
  cplan.sync %t0 -> %t1
  cplan.queue_schedule {
    cplan.queue "d0" "compute" [%t0]
    cplan.queue "d0" "copy" [%t1]
  }
}
// CHECK-NOT: AB-S
// CHECK: cplan.queue_schedule
// PASS-NOT: AB-S
// PASS: cplan.queue_schedule

// -----

// AB-S-1: a dependency cycle (t0 waits on t1's timepoint, a forward use; an unknown command cannot be named)
cplan.plan attributes {binder = "reference-queue", target = "vq@1", deployment = "dep", evidence = "roofline@r1", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
  %w = cplan.alloc "alloc.w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 128 : i64, alignment = 64 : i64}
  %a = cplan.alloc "alloc.a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %b = cplan.alloc "alloc.b" transient {source = "b", device = "d0", space = "device", offset = 192 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "cmd.t0" (%w) -> (%a) after(%t1) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "cmd.t1" (%a) -> (%b) after(%t0) cost direct by roofline {task = "t1", op = "matmul", impl = "vq.matmul", device = "d0", engine = "copy", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_q">, duration = 1.0e-06 : f64}
  cplan.sync %t0 -> %t1
  cplan.queue_schedule {
    cplan.queue "d0" "compute" [%t0]
    cplan.queue "d0" "copy" [%t1]
  }
}
// CHECK: [AB-S-1] {{.*}} (dependency_cycle): command dependencies form a cycle through 'cmd.t0' (model op blk.0.attn_norm -> stage 0 block 0 (decode) -> task @t0 -> candidate vq.rms_norm), 'cmd.t1' (model op blk.0.attn_q -> stage 0 block 0 (decode) -> task @t1 -> candidate vq.matmul)
// PASS: AB-S-1 dependency_cycle: command dependencies form a cycle through 'cmd.t0' (model op blk.0.attn_norm -> stage 0 block 0 (decode) -> task @t0 -> candidate vq.rms_norm), 'cmd.t1' (model op blk.0.attn_q -> stage 0 block 0 (decode) -> task @t1 -> candidate vq.matmul)

// -----

// AB-S-2: the wait of the cross-queue dependency t0 -> t1 is dropped
cplan.plan attributes {binder = "reference-queue", target = "vq@1", deployment = "dep", evidence = "roofline@r1", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
  %w = cplan.alloc "alloc.w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 128 : i64, alignment = 64 : i64}
  %a = cplan.alloc "alloc.a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %b = cplan.alloc "alloc.b" transient {source = "b", device = "d0", space = "device", offset = 192 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "cmd.t0" (%w) -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "cmd.t1" (%a) -> (%b) after(%t0) cost direct by roofline {task = "t1", op = "matmul", impl = "vq.matmul", device = "d0", engine = "copy", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_q">, duration = 1.0e-06 : f64}
  cplan.queue_schedule {
    cplan.queue "d0" "compute" [%t0]
    cplan.queue "d0" "copy" [%t1]
  }
}
// CHECK: [AB-S-2] {{.*}} (unenforced_dependency): dependency 'cmd.t0' (model op blk.0.attn_norm -> stage 0 block 0 (decode) -> task @t0 -> candidate vq.rms_norm) -> 'cmd.t1' (model op blk.0.attn_q -> stage 0 block 0 (decode) -> task @t1 -> candidate vq.matmul) is not enforced by queue order or signal/wait (missing wait)
// PASS: AB-S-2 unenforced_dependency: dependency 'cmd.t0' (model op blk.0.attn_norm -> stage 0 block 0 (decode) -> task @t0 -> candidate vq.rms_norm) -> 'cmd.t1' (model op blk.0.attn_q -> stage 0 block 0 (decode) -> task @t1 -> candidate vq.matmul) is not enforced by queue order or signal/wait (missing wait)

// -----

// AB-S-3: a generic implementation
cplan.plan attributes {binder = "reference-queue", target = "vq@1", deployment = "dep", evidence = "roofline@r1", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
  %w = cplan.alloc "alloc.w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 128 : i64, alignment = 64 : i64}
  %a = cplan.alloc "alloc.a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %b = cplan.alloc "alloc.b" transient {source = "b", device = "d0", space = "device", offset = 192 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "cmd.t0" (%w) -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "generic", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "cmd.t1" (%a) -> (%b) after(%t0) cost direct by roofline {task = "t1", op = "matmul", impl = "vq.matmul", device = "d0", engine = "copy", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_q">, duration = 1.0e-06 : f64}
  cplan.sync %t0 -> %t1
  cplan.queue_schedule {
    cplan.queue "d0" "compute" [%t0]
    cplan.queue "d0" "copy" [%t1]
  }
}
// CHECK: [AB-S-3] {{.*}} (no_implementation): command 'cmd.t0' (model op blk.0.attn_norm -> stage 0 block 0 (decode) -> task @t0 -> candidate generic) has no legal implementation ('generic')
// PASS: AB-S-3 no_implementation: command 'cmd.t0' (model op blk.0.attn_norm -> stage 0 block 0 (decode) -> task @t0 -> candidate generic) has no legal implementation ('generic')

// -----

// AB-S-4: t1 reads a transient that no command writes
cplan.plan attributes {binder = "reference-queue", target = "vq@1", deployment = "dep", evidence = "roofline@r1", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
  %w = cplan.alloc "alloc.w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 128 : i64, alignment = 64 : i64}
  %a = cplan.alloc "alloc.a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %b = cplan.alloc "alloc.b" transient {source = "b", device = "d0", space = "device", offset = 192 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "cmd.t0" (%w) -> () cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "cmd.t1" (%a) -> (%b) after(%t0) cost direct by roofline {task = "t1", op = "matmul", impl = "vq.matmul", device = "d0", engine = "copy", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_q">, duration = 1.0e-06 : f64}
  cplan.sync %t0 -> %t1
  cplan.queue_schedule {
    cplan.queue "d0" "compute" [%t0]
    cplan.queue "d0" "copy" [%t1]
  }
}
// CHECK: [AB-S-4] {{.*}} (lifetime_gap): transient buffer 'alloc.a' (source 'a') is read by 'cmd.t1' (model op blk.0.attn_q -> stage 0 block 0 (decode) -> task @t1 -> candidate vq.matmul) before any producer is guaranteed to have written it (producers: none)
// PASS: AB-S-4 lifetime_gap: transient buffer 'alloc.a' (source 'a') is read by 'cmd.t1' (model op blk.0.attn_q -> stage 0 block 0 (decode) -> task @t1 -> candidate vq.matmul) before any producer is guaranteed to have written it (producers: none)

// -----

// AB-S-5: a and b are both accessed by t1 but share bytes
cplan.plan attributes {binder = "reference-queue", target = "vq@1", deployment = "dep", evidence = "roofline@r1", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
  %w = cplan.alloc "alloc.w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 128 : i64, alignment = 64 : i64}
  %a = cplan.alloc "alloc.a" transient {source = "a", device = "d0", space = "device", offset = 192 : i64, size = 64 : i64, alignment = 64 : i64}
  %b = cplan.alloc "alloc.b" transient {source = "b", device = "d0", space = "device", offset = 192 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "cmd.t0" (%w) -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "cmd.t1" (%a) -> (%b) after(%t0) cost direct by roofline {task = "t1", op = "matmul", impl = "vq.matmul", device = "d0", engine = "copy", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_q">, duration = 1.0e-06 : f64}
  cplan.sync %t0 -> %t1
  cplan.queue_schedule {
    cplan.queue "d0" "compute" [%t0]
    cplan.queue "d0" "copy" [%t1]
  }
}
// CHECK: [AB-S-5] {{.*}} (unsafe_reuse): d0/device: allocations 'alloc.a' [192, 256) and 'alloc.b' [192, 256) overlap; they may be live at once: 'cmd.t1' (model op blk.0.attn_q -> stage 0 block 0 (decode) -> task @t1 -> candidate vq.matmul) accesses both
// PASS: AB-S-5 unsafe_reuse: d0/device: allocations 'alloc.a' [192, 256) and 'alloc.b' [192, 256) overlap; they may be live at once: 'cmd.t1' (model op blk.0.attn_q -> stage 0 block 0 (decode) -> task @t1 -> candidate vq.matmul) accesses both

// -----

// AB-S-6: the device holds 200 bytes, the plan needs 256
cplan.plan attributes {binder = "reference-queue", target = "vq@1", deployment = "dep", evidence = "roofline@r1", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 200 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
  %w = cplan.alloc "alloc.w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 128 : i64, alignment = 64 : i64}
  %a = cplan.alloc "alloc.a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %b = cplan.alloc "alloc.b" transient {source = "b", device = "d0", space = "device", offset = 192 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "cmd.t0" (%w) -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "cmd.t1" (%a) -> (%b) after(%t0) cost direct by roofline {task = "t1", op = "matmul", impl = "vq.matmul", device = "d0", engine = "copy", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_q">, duration = 1.0e-06 : f64}
  cplan.sync %t0 -> %t1
  cplan.queue_schedule {
    cplan.queue "d0" "compute" [%t0]
    cplan.queue "d0" "copy" [%t1]
  }
}
// CHECK: [AB-S-6] {{.*}} (capacity_exceeded): device 'd0' memory space 'device': peak 256 bytes exceeds capacity 200; largest: alloc.w (128 B), alloc.a (64 B), alloc.b (64 B)
// PASS: AB-S-6 capacity_exceeded: device 'd0' memory space 'device': peak 256 bytes exceeds capacity 200; largest: alloc.w (128 B), alloc.a (64 B), alloc.b (64 B)

// -----

// AB-S-7: a fallback cost under the strict risk policy
cplan.plan attributes {binder = "reference-queue", target = "vq@1", deployment = "dep", evidence = "roofline@r1", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
  %w = cplan.alloc "alloc.w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 128 : i64, alignment = 64 : i64}
  %a = cplan.alloc "alloc.a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %b = cplan.alloc "alloc.b" transient {source = "b", device = "d0", space = "device", offset = 192 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "cmd.t0" (%w) -> (%a) cost fallback by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "cmd.t1" (%a) -> (%b) after(%t0) cost direct by roofline {task = "t1", op = "matmul", impl = "vq.matmul", device = "d0", engine = "copy", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_q">, duration = 1.0e-06 : f64}
  cplan.sync %t0 -> %t1
  cplan.queue_schedule {
    cplan.queue "d0" "compute" [%t0]
    cplan.queue "d0" "copy" [%t1]
  }
}
// CHECK: [AB-S-7] {{.*}} (cost_not_covered): command 'cmd.t0' (model op blk.0.attn_norm -> stage 0 block 0 (decode) -> task @t0 -> candidate vq.rms_norm) uses a fallback cost (provider 'roofline') that risk policy 'strict' does not cover
// PASS: AB-S-7 cost_not_covered: command 'cmd.t0' (model op blk.0.attn_norm -> stage 0 block 0 (decode) -> task @t0 -> candidate vq.rms_norm) uses a fallback cost (provider 'roofline') that risk policy 'strict' does not cover
