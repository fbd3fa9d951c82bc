// RUN: not pipeplan-opt %s 2>&1 | filecheck %s
// AB-S-5: two live transient allocations whose byte ranges overlap are rejected on parse, at the later allocation.
cplan.plan attributes {binder = "reference-queue", target = "vq@1", deployment = "dep", evidence = "roofline@r1", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64}, engines = {compute = 1 : i64}}
  cplan.alloc {id = "alloc.w", source = "w", device = "d0", space = "device", offset = 0 : i64, size = 128 : i64, alignment = 64 : i64, lifetime = "weight"}
  cplan.alloc {id = "alloc.a", source = "a", device = "d0", space = "device", offset = 128 : i64, size = 128 : i64, alignment = 64 : i64, lifetime = "transient"}
  cplan.alloc {id = "alloc.b", source = "b", device = "d0", space = "device", offset = 192 : i64, size = 64 : i64, alignment = 64 : i64, lifetime = "transient"}
  cplan.command {id = "cmd.t0", task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", deps = [], reads = ["alloc.w"], writes = ["alloc.a"], lineage = "stage 0 block 0 attn_norm", provider = "roofline", status = "direct", duration = 1.0e-06 : f64}
  cplan.command {id = "cmd.t1", task = "t1", op = "matmul", impl = "vq.matmul", device = "d0", engine = "compute", deps = ["cmd.t0"], reads = ["alloc.a"], writes = ["alloc.b"], lineage = "stage 0 block 0 attn_q", provider = "roofline", status = "direct", duration = 1.0e-06 : f64}
  cplan.queue_schedule {
    cplan.queue {device = "d0", engine = "compute", order = ["cmd.t0", "cmd.t1"]}
  }
}
// CHECK:      cplan-overlap.mlir:7:3: error: [AB-S-5] reused allocations must not overlap in any legal execution (unsafe_reuse): d0/device: allocations 'alloc.a' [128, 256) and 'alloc.b' [192, 256) overlap; they may be live at once: 'cmd.t1' (stage 0 block 0 attn_q) accesses both
// CHECK-NEXT: {{^}}  cplan.alloc {id = "alloc.b", source = "b", device = "d0", {{.*}}
// CHECK-NOT:  cplan.plan
