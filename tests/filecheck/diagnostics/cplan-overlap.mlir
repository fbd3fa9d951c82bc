// RUN: not pipeplan-opt %s 2>&1 | filecheck %s
// AB-S-5: two live transient allocations whose byte ranges overlap are rejected on parse, at the later allocation.
cplan.plan attributes {binder = "reference-queue", target = "vq@1", deployment = "dep", evidence = "roofline@r1", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64}, engines = {compute = 1 : i64}}
  %w = cplan.alloc "alloc.w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 128 : i64, alignment = 64 : i64}
  %a = cplan.alloc "alloc.a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 128 : i64, alignment = 64 : i64}
  %b = cplan.alloc "alloc.b" transient {source = "b", device = "d0", space = "device", offset = 192 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "cmd.t0" (%w) -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "cmd.t1" (%a) -> (%b) after(%t0) cost direct by roofline {task = "t1", op = "matmul", impl = "vq.matmul", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_q">, duration = 1.0e-06 : f64}
  cplan.queue_schedule {
    cplan.queue "d0" "compute" [%t0, %t1]
  }
}
// CHECK:      cplan-overlap.mlir:7:3: error: [AB-S-5] reused allocations must not overlap in any legal execution (unsafe_reuse): d0/device: allocations 'alloc.a' [128, 256) and 'alloc.b' [192, 256) overlap; they may be live at once: 'cmd.t1' (model op blk.0.attn_q -> stage 0 block 0 (decode) -> task @t1 -> candidate vq.matmul) accesses both
// CHECK-NEXT: {{^}}  %b = cplan.alloc "alloc.b" transient {source = "b", device = "d0", {{.*}}
// CHECK-NOT:  cplan.plan
