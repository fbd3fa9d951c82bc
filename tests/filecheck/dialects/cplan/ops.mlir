// RUN: pipeplan-opt %s | filecheck %s
// RUN: %roundtrip | filecheck %s
// RUN: %generic-roundtrip | filecheck %s
// RUN: pipeplan-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC
// RUN: pipeplan-opt %s -p cplan-verify | filecheck %s

// Every cplan op in its custom form, once with the queue schedule extension and once with the slot
// dataflow extension (AB-R-7); both plans satisfy the seven invariants (AB-S-1..7), so cplan-verify
// leaves them unchanged. The generic form carries every value as a property (<{...}>).

cplan.plan attributes {binder = "reference-queue", target = "virtual-queue@1", deployment = "dep", evidence = "roofline@r1", risk = "strict", source = "sha256:00"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64, link = 1024 : i64}, engines = {queue.compute = 1 : i64, queue.copy = 1 : i64}}
  cplan.device {id = "d1", capacity = {device = 4096 : i64}, engines = {queue.compute = 1 : i64}}
  cplan.link {id = "l0", src = "d0", dst = "d1", capacity = 1024 : i64}
  cplan.alloc {id = "alloc.w", source = "w", device = "d0", space = "device", offset = 0 : i64, size = 100 : i64, alignment = 64 : i64, lifetime = "weight"}
  cplan.alloc {id = "alloc.a", source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64, lifetime = "transient"}
  cplan.alloc {id = "alloc.e", source = "e", device = "d0", space = "link", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64, lifetime = "edge"}
  cplan.alloc {id = "alloc.c", source = "c", device = "d1", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64, lifetime = "transient"}
  cplan.command {id = "cmd.t0", task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "queue.compute", deps = [], reads = ["alloc.w"], writes = ["alloc.a"], lineage = "stage 0 block 0 attn_norm", provider = "roofline", status = "direct", duration = 2.5e-06 : f64}
  cplan.command {id = "cmd.t1", task = "t1", op = "send", impl = "vq.send", device = "d0", engine = "queue.copy", deps = ["cmd.t0"], reads = ["alloc.a"], writes = ["alloc.e"], lineage = "stage 0 send", provider = "roofline", status = "direct", duration = 1.0e-06 : f64, link = "l0"}
  cplan.command {id = "cmd.t2", task = "t2", op = "add", impl = "vq.add", device = "d1", engine = "queue.compute", deps = ["cmd.t1"], reads = ["alloc.e"], writes = ["alloc.c"], lineage = "stage 1 add", provider = "roofline", status = "direct", duration = 1.0e-06 : f64}
  cplan.sync {signal = "cmd.t0", wait = "cmd.t1"}
  cplan.sync {signal = "cmd.t1", wait = "cmd.t2"}
  cplan.queue_schedule {
    cplan.queue {device = "d0", engine = "queue.compute", order = ["cmd.t0"]}
    cplan.queue {device = "d0", engine = "queue.copy", order = ["cmd.t1"]}
    cplan.queue {device = "d1", engine = "queue.compute", order = ["cmd.t2"]}
  }
}

// CHECK:      cplan.plan attributes {binder = "reference-queue", target = "virtual-queue@1", deployment = "dep", evidence = "roofline@r1", risk = "strict", source = "sha256:00"} {
// CHECK-NEXT:   cplan.device {id = "d0", capacity = {device = 4096 : i64, link = 1024 : i64}, engines = {queue.compute = 1 : i64, queue.copy = 1 : i64}}
// CHECK-NEXT:   cplan.device {id = "d1", capacity = {device = 4096 : i64}, engines = {queue.compute = 1 : i64}}
// CHECK-NEXT:   cplan.link {id = "l0", src = "d0", dst = "d1", capacity = 1024 : i64}
// CHECK-NEXT:   cplan.alloc {id = "alloc.w", source = "w", device = "d0", space = "device", offset = 0 : i64, size = 100 : i64, alignment = 64 : i64, lifetime = "weight"}
// CHECK-NEXT:   cplan.alloc {id = "alloc.a", source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64, lifetime = "transient"}
// CHECK-NEXT:   cplan.alloc {id = "alloc.e", source = "e", device = "d0", space = "link", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64, lifetime = "edge"}
// CHECK-NEXT:   cplan.alloc {id = "alloc.c", source = "c", device = "d1", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64, lifetime = "transient"}
// CHECK-NEXT:   cplan.command {id = "cmd.t0", task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "queue.compute", deps = [], reads = ["alloc.w"], writes = ["alloc.a"], lineage = "stage 0 block 0 attn_norm", provider = "roofline", status = "direct", duration = 2.500000e-06 : f64}
// CHECK-NEXT:   cplan.command {id = "cmd.t1", task = "t1", op = "send", impl = "vq.send", device = "d0", engine = "queue.copy", deps = ["cmd.t0"], reads = ["alloc.a"], writes = ["alloc.e"], lineage = "stage 0 send", provider = "roofline", status = "direct", duration = 1.000000e-06 : f64, link = "l0"}
// CHECK-NEXT:   cplan.command {id = "cmd.t2", task = "t2", op = "add", impl = "vq.add", device = "d1", engine = "queue.compute", deps = ["cmd.t1"], reads = ["alloc.e"], writes = ["alloc.c"], lineage = "stage 1 add", provider = "roofline", status = "direct", duration = 1.000000e-06 : f64}
// CHECK-NEXT:   cplan.sync {signal = "cmd.t0", wait = "cmd.t1"}
// CHECK-NEXT:   cplan.sync {signal = "cmd.t1", wait = "cmd.t2"}
// CHECK-NEXT:   cplan.queue_schedule {
// CHECK-NEXT:     cplan.queue {device = "d0", engine = "queue.compute", order = ["cmd.t0"]}
// CHECK-NEXT:     cplan.queue {device = "d0", engine = "queue.copy", order = ["cmd.t1"]}
// CHECK-NEXT:     cplan.queue {device = "d1", engine = "queue.compute", order = ["cmd.t2"]}
// CHECK-NEXT:   }
// CHECK-NEXT: }

// GENERIC: "cplan.plan"() <{binder = "reference-queue", target = "virtual-queue@1", deployment = "dep", evidence = "roofline@r1", risk = "strict", source = "sha256:00"}> ({
// GENERIC: "cplan.alloc"() <{id = "alloc.a", source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64, lifetime = "transient"}> : () -> ()
// GENERIC: "cplan.command"() <{id = "cmd.t1", {{.*}}link = "l0"}> : () -> ()
// GENERIC: "cplan.sync"() <{signal = "cmd.t0", wait = "cmd.t1"}> : () -> ()
// GENERIC: "cplan.queue_schedule"() ({
// GENERIC: "cplan.queue"() <{device = "d0", engine = "queue.compute", order = ["cmd.t0"]}> : () -> ()

cplan.plan attributes {binder = "reference-slot", target = "virtual-slot@1", deployment = "dep", evidence = "roofline@r1", risk = "accept-missing", source = "sha256:00"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64}, engines = {slot.dataflow = 2 : i64}}
  cplan.alloc {id = "alloc.a", source = "a", device = "d0", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64, lifetime = "transient"}
  cplan.alloc {id = "alloc.b", source = "b", device = "d0", space = "device", offset = 64 : i64, size = 64 : i64, alignment = 64 : i64, lifetime = "transient"}
  cplan.command {id = "cmd.t0", task = "t0", op = "rms_norm", impl = "vs.rms_norm", device = "d0", engine = "slot.dataflow", deps = [], reads = [], writes = ["alloc.a"], lineage = "stage 0 a", provider = "roofline", status = "direct", duration = 1.0e-06 : f64}
  cplan.command {id = "cmd.t1", task = "t1", op = "add", impl = "vs.add", device = "d0", engine = "slot.dataflow", deps = ["cmd.t0"], reads = ["alloc.a"], writes = ["alloc.b"], lineage = "stage 0 b", provider = "", status = "missing"}
  cplan.slot_dataflow {
    cplan.slot {id = "slot.d0.slot.dataflow", device = "d0", engine = "slot.dataflow", commands = ["cmd.t0", "cmd.t1"]}
    cplan.fire {command = "cmd.t0", slot = "slot.d0.slot.dataflow", after = []}
    cplan.fire {command = "cmd.t1", slot = "slot.d0.slot.dataflow", after = ["cmd.t0"]}
  }
}

// CHECK:      cplan.plan attributes {binder = "reference-slot", target = "virtual-slot@1", deployment = "dep", evidence = "roofline@r1", risk = "accept-missing", source = "sha256:00"} {
// CHECK:        cplan.command {id = "cmd.t1", task = "t1", op = "add", impl = "vs.add", device = "d0", engine = "slot.dataflow", deps = ["cmd.t0"], reads = ["alloc.a"], writes = ["alloc.b"], lineage = "stage 0 b", provider = "", status = "missing"}
// CHECK-NEXT:   cplan.slot_dataflow {
// CHECK-NEXT:     cplan.slot {id = "slot.d0.slot.dataflow", device = "d0", engine = "slot.dataflow", commands = ["cmd.t0", "cmd.t1"]}
// CHECK-NEXT:     cplan.fire {command = "cmd.t0", slot = "slot.d0.slot.dataflow", after = []}
// CHECK-NEXT:     cplan.fire {command = "cmd.t1", slot = "slot.d0.slot.dataflow", after = ["cmd.t0"]}
// CHECK-NEXT:   }
// CHECK-NEXT: }

// GENERIC: "cplan.slot_dataflow"() ({
// GENERIC: "cplan.fire"() <{command = "cmd.t1", slot = "slot.d0.slot.dataflow", after = ["cmd.t0"]}> : () -> ()
