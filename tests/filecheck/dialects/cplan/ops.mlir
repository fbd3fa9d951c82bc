// RUN: pipeplan-opt %s | filecheck %s
// RUN: %roundtrip | filecheck %s
// RUN: %generic-roundtrip | filecheck %s
// RUN: pipeplan-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC
// RUN: pipeplan-opt %s -p cplan-verify | filecheck %s

// Every cplan op in its custom form, once with the queue schedule extension and once with the slot
// dataflow extension (AB-R-7); both plans satisfy the seven invariants (AB-S-1..7), so cplan-verify
// leaves them unchanged. Allocations are !cplan.alloc values and every command yields a !cplan.timepoint
// (issue 13 item 1): commands take the allocations they read/write and the timepoints they wait on as
// operands; syncs, queues, slots and firing rules name commands by their timepoints. A command's cost prints
// as `cost <status> [by <provider>]` (the #cplan<cost_status ...> and #cplan<provider ...> enums; a missing cost
// has no provider and no duration). The generic form carries the remaining values as properties (<{...}>).

cplan.plan attributes {binder = "reference-queue", target = "virtual-queue@1", deployment = "dep", evidence = "roofline@r1", risk = "strict", source = "sha256:00"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64, link = 1024 : i64}, engines = {queue.compute = 1 : i64, queue.copy = 1 : i64}}
  cplan.device {id = "d1", capacity = {device = 4096 : i64}, engines = {queue.compute = 1 : i64}}
  cplan.link {id = "l0", src = "d0", dst = "d1", capacity = 1024 : i64}
  %0 = cplan.alloc "alloc.w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 100 : i64, alignment = 64 : i64}
  %1 = cplan.alloc "alloc.a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %2 = cplan.alloc "alloc.e" edge {source = "e", device = "d0", space = "link", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %3 = cplan.alloc "alloc.c" transient {source = "c", device = "d1", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %4 = cplan.command "cmd.t0" (%0) -> (%1) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "queue.compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 2.5e-06 : f64}
  %5 = cplan.command "cmd.t1" (%1) -> (%2) after(%4) cost direct by roofline {task = "t1", op = "send", impl = "vq.send", device = "d0", engine = "queue.copy", lineage = #cplan.lineage<decode, stage 0, "edge:e1", edge "e1">, duration = 1.0e-06 : f64, link = "l0"}
  %6 = cplan.command "cmd.t2" (%2) -> (%3) after(%5) cost direct by roofline {task = "t2", op = "add", impl = "vq.add", device = "d1", engine = "queue.compute", lineage = #cplan.lineage<decode, stage 1, block 1, "blk.1.add(h_mid)">, duration = 1.0e-06 : f64}
  cplan.sync %4 -> %5
  cplan.sync %5 -> %6
  cplan.queue_schedule {
    cplan.queue "d0" "queue.compute" [%4]
    cplan.queue "d0" "queue.copy" [%5]
    cplan.queue "d1" "queue.compute" [%6]
  }
}

// CHECK:      cplan.plan attributes {binder = "reference-queue", target = "virtual-queue@1", deployment = "dep", evidence = "roofline@r1", risk = "strict", source = "sha256:00"} {
// CHECK-NEXT:   cplan.device {id = "d0", capacity = {device = 4096 : i64, link = 1024 : i64}, engines = {queue.compute = 1 : i64, queue.copy = 1 : i64}}
// CHECK-NEXT:   cplan.device {id = "d1", capacity = {device = 4096 : i64}, engines = {queue.compute = 1 : i64}}
// CHECK-NEXT:   cplan.link {id = "l0", src = "d0", dst = "d1", capacity = 1024 : i64}
// CHECK-NEXT:   %0 = cplan.alloc "alloc.w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 100 : i64, alignment = 64 : i64}
// CHECK-NEXT:   %1 = cplan.alloc "alloc.a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
// CHECK-NEXT:   %2 = cplan.alloc "alloc.e" edge {source = "e", device = "d0", space = "link", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
// CHECK-NEXT:   %3 = cplan.alloc "alloc.c" transient {source = "c", device = "d1", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
// CHECK-NEXT:   %4 = cplan.command "cmd.t0" (%0) -> (%1) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "queue.compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 2.500000e-06 : f64}
// CHECK-NEXT:   %5 = cplan.command "cmd.t1" (%1) -> (%2) after(%4) cost direct by roofline {task = "t1", op = "send", impl = "vq.send", device = "d0", engine = "queue.copy", lineage = #cplan.lineage<decode, stage 0, "edge:e1", edge "e1">, duration = 1.000000e-06 : f64, link = "l0"}
// CHECK-NEXT:   %6 = cplan.command "cmd.t2" (%2) -> (%3) after(%5) cost direct by roofline {task = "t2", op = "add", impl = "vq.add", device = "d1", engine = "queue.compute", lineage = #cplan.lineage<decode, stage 1, block 1, "blk.1.add(h_mid)">, duration = 1.000000e-06 : f64}
// CHECK-NEXT:   cplan.sync %4 -> %5
// CHECK-NEXT:   cplan.sync %5 -> %6
// CHECK-NEXT:   cplan.queue_schedule {
// CHECK-NEXT:     cplan.queue "d0" "queue.compute" [%4]
// CHECK-NEXT:     cplan.queue "d0" "queue.copy" [%5]
// CHECK-NEXT:     cplan.queue "d1" "queue.compute" [%6]
// CHECK-NEXT:   }
// CHECK-NEXT: }

// GENERIC: "cplan.plan"() <{binder = "reference-queue", target = "virtual-queue@1", deployment = "dep", evidence = "roofline@r1", risk = "strict", source = "sha256:00"}> ({
// GENERIC: %1 = "cplan.alloc"() <{id = "alloc.a", source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64, lifetime = #cplan<lifetime transient>}> : () -> !cplan.alloc
// GENERIC: %5 = "cplan.command"(%1, %2, %4) <{id = "cmd.t1", {{.*}}, provider = #cplan<provider roofline>, status = #cplan<cost_status direct>, duration = 1.000000e-06 : f64, link = "l0", operandSegmentSizes = array<i32: 1, 1, 1>}> : (!cplan.alloc, !cplan.alloc, !cplan.timepoint) -> !cplan.timepoint
// GENERIC: "cplan.sync"(%4, %5) : (!cplan.timepoint, !cplan.timepoint) -> ()
// GENERIC: "cplan.queue_schedule"() ({
// GENERIC: "cplan.queue"(%4) <{device = "d0", engine = "queue.compute"}> : (!cplan.timepoint) -> ()

cplan.plan attributes {binder = "reference-slot", target = "virtual-slot@1", deployment = "dep", evidence = "roofline@r1", risk = "accept-missing", source = "sha256:00"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64}, engines = {slot.dataflow = 2 : i64}}
  %7 = cplan.alloc "alloc.a" transient {source = "a", device = "d0", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %8 = cplan.alloc "alloc.b" transient {source = "b", device = "d0", space = "device", offset = 64 : i64, size = 64 : i64, alignment = 64 : i64}
  %9 = cplan.command "cmd.t0" () -> (%7) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vs.rms_norm", device = "d0", engine = "slot.dataflow", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %10 = cplan.command "cmd.t1" (%7) -> (%8) after(%9) cost missing {task = "t1", op = "add", impl = "vs.add", device = "d0", engine = "slot.dataflow", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.add(h_mid)">}
  cplan.slot_dataflow {
    cplan.slot "slot.d0.slot.dataflow" on "d0" "slot.dataflow" [%9, %10]
    cplan.fire %9 on "slot.d0.slot.dataflow" after []
    cplan.fire %10 on "slot.d0.slot.dataflow" after [%9]
  }
}

// CHECK:      cplan.plan attributes {binder = "reference-slot", target = "virtual-slot@1", deployment = "dep", evidence = "roofline@r1", risk = "accept-missing", source = "sha256:00"} {
// CHECK:        %10 = cplan.command "cmd.t1" (%7) -> (%8) after(%9) cost missing {task = "t1", op = "add", impl = "vs.add", device = "d0", engine = "slot.dataflow", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.add(h_mid)">}
// CHECK-NEXT:   cplan.slot_dataflow {
// CHECK-NEXT:     cplan.slot "slot.d0.slot.dataflow" on "d0" "slot.dataflow" [%9, %10]
// CHECK-NEXT:     cplan.fire %9 on "slot.d0.slot.dataflow" after []
// CHECK-NEXT:     cplan.fire %10 on "slot.d0.slot.dataflow" after [%9]
// CHECK-NEXT:   }
// CHECK-NEXT: }

// GENERIC: %10 = "cplan.command"(%7, %8, %9) <{id = "cmd.t1", {{.*}}, status = #cplan<cost_status missing>, operandSegmentSizes = array<i32: 1, 1, 1>}>
// GENERIC: "cplan.slot_dataflow"() ({
// GENERIC: "cplan.fire"(%10, %9) <{slot = "slot.d0.slot.dataflow"}> : (!cplan.timepoint, !cplan.timepoint) -> ()
