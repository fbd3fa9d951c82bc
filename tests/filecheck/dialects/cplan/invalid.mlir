// RUN: %verify-located --parsing-diagnostics | filecheck %s
// Every cplan verifier message, one case each: the op verifiers (what one op or one extension can check
// alone) and the seven construction invariants AB-S-1..7 that cplan.plan's verifier checks on parse. Each
// case is one of two sound plans (a queue plan over two devices and a link, a slot plan) with one change; the
// CHECK lines below the offending op show the message, its location (that op's line) and that op's text,
// never the whole module. References are SSA uses (!cplan.alloc, !cplan.timepoint), so an unknown dependency,
// queue/slot/sync member or buffer cannot be written (the parser rejects an undefined value); a dependency
// cycle needs a forward use of a timepoint.

// a plan without a target extension
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
// CHECK:      invalid.mlir:[[# @LINE - 1]]:1: error: a plan needs exactly one target extension (queue_schedule or slot_dataflow), found 0
// CHECK-NEXT: {{^}}  cplan.plan attributes {binder = "reference-queue", target = "t",
  cplan.device {id = "d0", capacity = {device = 4096 : i64, link = 1024 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
  cplan.device {id = "d1", capacity = {device = 4096 : i64}, engines = {compute = 1 : i64}}
  cplan.link {id = "l0", src = "d0", dst = "d1", capacity = 1024 : i64}
  %w = cplan.alloc "w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 100 : i64, alignment = 64 : i64}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %e = cplan.alloc "e" edge {source = "e", device = "d0", space = "link", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %c = cplan.alloc "c" transient {source = "c", device = "d1", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "t0" (%w) -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "t1" (%a) -> (%e) after(%t0) cost direct by roofline {task = "t1", op = "send", impl = "vq.send", device = "d0", engine = "copy", lineage = #cplan.lineage<decode, stage 0, "edge:e1", edge "e1">, duration = 1.0e-06 : f64, link = "l0"}
  %t2 = cplan.command "t2" (%e) -> (%c) after(%t1) cost direct by roofline {task = "t2", op = "add", impl = "vq.add", device = "d1", engine = "compute", lineage = #cplan.lineage<decode, stage 1, block 1, "blk.1.add(h_mid)">, duration = 1.0e-06 : f64}
  cplan.sync %t0 -> %t1
  cplan.sync %t1 -> %t2
}

// -----

// two target extensions
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.queue_schedule {
  }
  cplan.slot_dataflow {
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: a plan needs exactly one target extension (queue_schedule or slot_dataflow), found 2
  // CHECK-NEXT: {{^}}  cplan.slot_dataflow {
  }
}

// -----

// unknown binder
cplan.plan attributes {binder = "magic", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
// CHECK:      invalid.mlir:[[# @LINE - 1]]:1: error: unknown binder 'magic', expected one of reference-queue, reference-slot, list-schedule
// CHECK-NEXT: {{^}}  cplan.plan attributes {binder = "magic", target = "t",
  cplan.queue_schedule {
  }
}

// -----

// unknown risk policy
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "yolo", source = "s"} {
// CHECK:      invalid.mlir:[[# @LINE - 1]]:1: error: unknown risk policy 'yolo', expected one of strict, accept-fallback, accept-out-of-domain, accept-missing
// CHECK-NEXT: {{^}}  cplan.plan attributes {binder = "reference-queue", target = "t",
  cplan.queue_schedule {
  }
}

// -----

// the extension is not the last op
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.queue_schedule {
  }
  cplan.device {id = "d0", capacity = {device = 64 : i64}, engines = {c = 1 : i64}}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: the target extension must be the last op of the plan
  // CHECK-NEXT: {{^}}  cplan.device {id = "d0", capacity = {device = 64 : i64},
}

// -----

// an op of another kind in the plan body
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  builtin.module {
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: unexpected op 'builtin.module' in a cplan.plan body
  // CHECK-NEXT: {{^}}  builtin.module {
  }
  cplan.queue_schedule {
  }
}

// -----

// device: negative capacity
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = -1 : i64}, engines = {c = 1 : i64}}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: device 'd0': capacity of 'device' is negative (-1)
  // CHECK-NEXT: {{^}}  cplan.device {id = "d0", capacity = {device = -1 : i64},
  cplan.queue_schedule {
  }
}

// -----

// device: an engine without slots
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 64 : i64}, engines = {e = 0 : i64}}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: device 'd0': engine 'e' needs at least one slot, has 0
  // CHECK-NEXT: {{^}}  cplan.device {id = "d0", capacity = {device = 64 : i64},
  cplan.queue_schedule {
  }
}

// -----

// device: a capacity that is not an integer
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = "big"}, engines = {c = 1 : i64}}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: expected an integer for key 'device', got "big"
  // CHECK-NEXT: {{^}}  cplan.device {id = "d0", capacity = {device = "big"},
  cplan.queue_schedule {
  }
}

// -----

// link: negative capacity
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.link {id = "l0", src = "d0", dst = "d1", capacity = -1 : i64}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: link 'l0': capacity is negative
  // CHECK-NEXT: {{^}}  cplan.link {id = "l0", src = "d0", dst = "d1", capacity = -1 : i64}
  cplan.queue_schedule {
  }
}

// -----

// alloc: alignment not a power of two
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  %b = cplan.alloc "b" transient {source = "b", device = "d0", space = "device", offset = 0 : i64, size = 8 : i64, alignment = 48 : i64}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: alloc 'b': alignment 48 is not a positive power of two
  // CHECK-NEXT: {{^}}  %b = cplan.alloc "b" transient {source = "b", device = "d0", space = "device",
  cplan.queue_schedule {
  }
}

// -----

// alloc: negative size
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  %b = cplan.alloc "b" transient {source = "b", device = "d0", space = "device", offset = 0 : i64, size = -8 : i64, alignment = 64 : i64}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: alloc 'b': offset and size must be non-negative
  // CHECK-NEXT: {{^}}  %b = cplan.alloc "b" transient {source = "b", device = "d0", space = "device",
  cplan.queue_schedule {
  }
}

// -----

// alloc: misaligned offset
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  %b = cplan.alloc "b" transient {source = "b", device = "d0", space = "device", offset = 32 : i64, size = 8 : i64, alignment = 64 : i64}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: alloc 'b': offset 32 is not a multiple of alignment 64
  // CHECK-NEXT: {{^}}  %b = cplan.alloc "b" transient {source = "b", device = "d0", space = "device",
  cplan.queue_schedule {
  }
}

// -----

// alloc: unknown lifetime (a parse error: the lifetime is a #cplan<lifetime ...> enum)
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  %b = cplan.alloc "b" forever {source = "b", device = "d0", space = "device", offset = 0 : i64, size = 8 : i64, alignment = 64 : i64}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:24
  // CHECK-NEXT: {{^}}  %b = cplan.alloc "b" forever {source = "b", device = "d0", space = "device",
  // CHECK:      Expected `weight`, `kv`, `transient`, or `edge`.
  cplan.queue_schedule {
  }
}

// -----

// command: unknown cost status (a parse error: the status is a #cplan<cost_status ...> enum)
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  %w = cplan.alloc "w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 100 : i64, alignment = 64 : i64}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "t0" (%w) -> (%a) cost guessed by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:46
  // CHECK-NEXT: {{^}}  %t0 = cplan.command "t0" (%w) -> (%a) cost guessed by roofline {task = "t0",
  // CHECK:      Expected `direct`, `fallback`, `out_of_domain`, or `missing`.
  cplan.queue_schedule {
  }
}

// -----

// command: unknown cost provider (a parse error: the provider is a #cplan<provider ...> enum)
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  %w = cplan.alloc "w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 100 : i64, alignment = 64 : i64}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "t0" (%w) -> (%a) cost direct by oracle {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:56
  // CHECK-NEXT: {{^}}  %t0 = cplan.command "t0" (%w) -> (%a) cost direct by oracle {task = "t0",
  // CHECK:      Expected `roofline`, or `measured`.
  cplan.queue_schedule {
  }
}

// -----

// command: a direct cost without duration
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64, link = 1024 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
  cplan.device {id = "d1", capacity = {device = 4096 : i64}, engines = {compute = 1 : i64}}
  cplan.link {id = "l0", src = "d0", dst = "d1", capacity = 1024 : i64}
  %w = cplan.alloc "w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 100 : i64, alignment = 64 : i64}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %e = cplan.alloc "e" edge {source = "e", device = "d0", space = "link", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %c = cplan.alloc "c" transient {source = "c", device = "d1", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "t0" (%w) -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: command 't0': duration must be present exactly when the cost is not missing
  // CHECK-NEXT: {{^}}  %t0 = cplan.command "t0" {{.*}}{task = "t0", op = "rms_norm",
  %t1 = cplan.command "t1" (%a) -> (%e) after(%t0) cost direct by roofline {task = "t1", op = "send", impl = "vq.send", device = "d0", engine = "copy", lineage = #cplan.lineage<decode, stage 0, "edge:e1", edge "e1">, duration = 1.0e-06 : f64, link = "l0"}
  %t2 = cplan.command "t2" (%e) -> (%c) after(%t1) cost direct by roofline {task = "t2", op = "add", impl = "vq.add", device = "d1", engine = "compute", lineage = #cplan.lineage<decode, stage 1, block 1, "blk.1.add(h_mid)">, duration = 1.0e-06 : f64}
  cplan.sync %t0 -> %t1
  cplan.sync %t1 -> %t2
  cplan.queue_schedule {
    cplan.queue "d0" "compute" [%t0]
    cplan.queue "d0" "copy" [%t1]
    cplan.queue "d1" "compute" [%t2]
  }
}

// -----

// command: a direct cost without its provider
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64, link = 1024 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
  cplan.device {id = "d1", capacity = {device = 4096 : i64}, engines = {compute = 1 : i64}}
  cplan.link {id = "l0", src = "d0", dst = "d1", capacity = 1024 : i64}
  %w = cplan.alloc "w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 100 : i64, alignment = 64 : i64}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %e = cplan.alloc "e" edge {source = "e", device = "d0", space = "link", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %c = cplan.alloc "c" transient {source = "c", device = "d1", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "t0" (%w) -> (%a) cost direct {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: command 't0': provider must be present exactly when the cost is not missing
  // CHECK-NEXT: {{^}}  %t0 = cplan.command "t0" {{.*}}{task = "t0", op = "rms_norm",
  %t1 = cplan.command "t1" (%a) -> (%e) after(%t0) cost direct by roofline {task = "t1", op = "send", impl = "vq.send", device = "d0", engine = "copy", lineage = #cplan.lineage<decode, stage 0, "edge:e1", edge "e1">, duration = 1.0e-06 : f64, link = "l0"}
  %t2 = cplan.command "t2" (%e) -> (%c) after(%t1) cost direct by roofline {task = "t2", op = "add", impl = "vq.add", device = "d1", engine = "compute", lineage = #cplan.lineage<decode, stage 1, block 1, "blk.1.add(h_mid)">, duration = 1.0e-06 : f64}
  cplan.sync %t0 -> %t1
  cplan.sync %t1 -> %t2
  cplan.queue_schedule {
    cplan.queue "d0" "compute" [%t0]
    cplan.queue "d0" "copy" [%t1]
    cplan.queue "d1" "compute" [%t2]
  }
}

// -----

// command: negative duration
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64, link = 1024 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
  cplan.device {id = "d1", capacity = {device = 4096 : i64}, engines = {compute = 1 : i64}}
  cplan.link {id = "l0", src = "d0", dst = "d1", capacity = 1024 : i64}
  %w = cplan.alloc "w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 100 : i64, alignment = 64 : i64}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %e = cplan.alloc "e" edge {source = "e", device = "d0", space = "link", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %c = cplan.alloc "c" transient {source = "c", device = "d1", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "t0" (%w) -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = -1.0 : f64}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: command 't0': duration must be >= 0 seconds
  // CHECK-NEXT: {{^}}  %t0 = cplan.command "t0" {{.*}}{task = "t0", op = "rms_norm",
  %t1 = cplan.command "t1" (%a) -> (%e) after(%t0) cost direct by roofline {task = "t1", op = "send", impl = "vq.send", device = "d0", engine = "copy", lineage = #cplan.lineage<decode, stage 0, "edge:e1", edge "e1">, duration = 1.0e-06 : f64, link = "l0"}
  %t2 = cplan.command "t2" (%e) -> (%c) after(%t1) cost direct by roofline {task = "t2", op = "add", impl = "vq.add", device = "d1", engine = "compute", lineage = #cplan.lineage<decode, stage 1, block 1, "blk.1.add(h_mid)">, duration = 1.0e-06 : f64}
  cplan.sync %t0 -> %t1
  cplan.sync %t1 -> %t2
  cplan.queue_schedule {
    cplan.queue "d0" "compute" [%t0]
    cplan.queue "d0" "copy" [%t1]
    cplan.queue "d1" "compute" [%t2]
  }
}

// -----

// queue_schedule: an op that is not a queue
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.queue_schedule {
    builtin.module {
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: queue_schedule may hold only cplan.queue ops, found 'builtin.module'
    // CHECK-NEXT: {{^}}  builtin.module {
    }
  }
}

// -----

// queue_schedule: two queues of one engine
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64, link = 1024 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
  cplan.device {id = "d1", capacity = {device = 4096 : i64}, engines = {compute = 1 : i64}}
  cplan.link {id = "l0", src = "d0", dst = "d1", capacity = 1024 : i64}
  %w = cplan.alloc "w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 100 : i64, alignment = 64 : i64}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %e = cplan.alloc "e" edge {source = "e", device = "d0", space = "link", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %c = cplan.alloc "c" transient {source = "c", device = "d1", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "t0" (%w) -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "t1" (%a) -> (%e) after(%t0) cost direct by roofline {task = "t1", op = "send", impl = "vq.send", device = "d0", engine = "copy", lineage = #cplan.lineage<decode, stage 0, "edge:e1", edge "e1">, duration = 1.0e-06 : f64, link = "l0"}
  %t2 = cplan.command "t2" (%e) -> (%c) after(%t1) cost direct by roofline {task = "t2", op = "add", impl = "vq.add", device = "d1", engine = "compute", lineage = #cplan.lineage<decode, stage 1, block 1, "blk.1.add(h_mid)">, duration = 1.0e-06 : f64}
  cplan.sync %t0 -> %t1
  cplan.sync %t1 -> %t2
  cplan.queue_schedule {
    cplan.queue "d0" "compute" [%t0]
    cplan.queue "d0" "compute" [%t1]
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: queue_schedule: two queues for device 'd0' engine 'compute'
    // CHECK-NEXT: {{^}}  cplan.queue "d0" "compute" [%t1]
    cplan.queue "d1" "compute" [%t2]
  }
}

// -----

// queue_schedule: a command in two queue positions
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64, link = 1024 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
  cplan.device {id = "d1", capacity = {device = 4096 : i64}, engines = {compute = 1 : i64}}
  cplan.link {id = "l0", src = "d0", dst = "d1", capacity = 1024 : i64}
  %w = cplan.alloc "w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 100 : i64, alignment = 64 : i64}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %e = cplan.alloc "e" edge {source = "e", device = "d0", space = "link", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %c = cplan.alloc "c" transient {source = "c", device = "d1", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "t0" (%w) -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "t1" (%a) -> (%e) after(%t0) cost direct by roofline {task = "t1", op = "send", impl = "vq.send", device = "d0", engine = "copy", lineage = #cplan.lineage<decode, stage 0, "edge:e1", edge "e1">, duration = 1.0e-06 : f64, link = "l0"}
  %t2 = cplan.command "t2" (%e) -> (%c) after(%t1) cost direct by roofline {task = "t2", op = "add", impl = "vq.add", device = "d1", engine = "compute", lineage = #cplan.lineage<decode, stage 1, block 1, "blk.1.add(h_mid)">, duration = 1.0e-06 : f64}
  cplan.sync %t0 -> %t1
  cplan.sync %t1 -> %t2
  cplan.queue_schedule {
    cplan.queue "d0" "compute" [%t0]
    cplan.queue "d0" "copy" [%t1, %t0]
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: queue_schedule: command 't0' appears in more than one queue position
    // CHECK-NEXT: {{^}}  cplan.queue "d0" "copy" [%t1, %t0]
    cplan.queue "d1" "compute" [%t2]
  }
}

// -----

// slot_dataflow: duplicate slot
cplan.plan attributes {binder = "reference-slot", target = "t", deployment = "d", evidence = "e", risk = "accept-missing", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64}, engines = {df = 2 : i64}}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %b = cplan.alloc "b" transient {source = "b", device = "d0", space = "device", offset = 64 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "t0" () -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vs.rms_norm", device = "d0", engine = "df", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "t1" (%a) -> (%b) after(%t0) cost missing {task = "t1", op = "add", impl = "vs.add", device = "d0", engine = "df", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.add(h_mid)">}
  cplan.slot_dataflow {
    cplan.slot "s0" on "d0" "df" [%t0, %t1]
    cplan.slot "s0" on "d0" "df" []
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: slot_dataflow: duplicate slot 's0'
    // CHECK-NEXT: {{^}}  cplan.slot "s0" on "d0" "df" []
    cplan.fire %t0 on "s0" after []
    cplan.fire %t1 on "s0" after [%t0]
  }
}

// -----

// slot_dataflow: two firing rules of one command
cplan.plan attributes {binder = "reference-slot", target = "t", deployment = "d", evidence = "e", risk = "accept-missing", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64}, engines = {df = 2 : i64}}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %b = cplan.alloc "b" transient {source = "b", device = "d0", space = "device", offset = 64 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "t0" () -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vs.rms_norm", device = "d0", engine = "df", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "t1" (%a) -> (%b) after(%t0) cost missing {task = "t1", op = "add", impl = "vs.add", device = "d0", engine = "df", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.add(h_mid)">}
  cplan.slot_dataflow {
    cplan.slot "s0" on "d0" "df" [%t0, %t1]
    cplan.fire %t0 on "s0" after []
    cplan.fire %t1 on "s0" after [%t0]
    cplan.fire %t1 on "s0" after []
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: slot_dataflow: command 't1' has more than one firing rule
    // CHECK-NEXT: {{^}}  cplan.fire %t1 on "s0" after []
  }
}

// -----

// slot_dataflow: an op that is neither slot nor fire
cplan.plan attributes {binder = "reference-slot", target = "t", deployment = "d", evidence = "e", risk = "accept-missing", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64}, engines = {df = 2 : i64}}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %b = cplan.alloc "b" transient {source = "b", device = "d0", space = "device", offset = 64 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "t0" () -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vs.rms_norm", device = "d0", engine = "df", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "t1" (%a) -> (%b) after(%t0) cost missing {task = "t1", op = "add", impl = "vs.add", device = "d0", engine = "df", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.add(h_mid)">}
  cplan.slot_dataflow {
    builtin.module {
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: slot_dataflow may hold only cplan.slot and cplan.fire ops, found 'builtin.module'
    // CHECK-NEXT: {{^}}  builtin.module {
    }
    cplan.slot "s0" on "d0" "df" [%t0, %t1]
    cplan.fire %t0 on "s0" after []
    cplan.fire %t1 on "s0" after [%t0]
  }
}

// -----

// slot_dataflow: a command bound to two slots
cplan.plan attributes {binder = "reference-slot", target = "t", deployment = "d", evidence = "e", risk = "accept-missing", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64}, engines = {df = 2 : i64}}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %b = cplan.alloc "b" transient {source = "b", device = "d0", space = "device", offset = 64 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "t0" () -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vs.rms_norm", device = "d0", engine = "df", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "t1" (%a) -> (%b) after(%t0) cost missing {task = "t1", op = "add", impl = "vs.add", device = "d0", engine = "df", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.add(h_mid)">}
  cplan.slot_dataflow {
    cplan.slot "s0" on "d0" "df" [%t0, %t1]
    cplan.slot "s1" on "d0" "df" [%t1]
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: slot_dataflow: command 't1' is bound to slots 's0' and 's1'
    // CHECK-NEXT: {{^}}  cplan.slot "s1" on "d0" "df"
    cplan.fire %t0 on "s0" after []
    cplan.fire %t1 on "s0" after [%t0]
  }
}

// -----

// slot_dataflow: a firing rule on an unknown slot
cplan.plan attributes {binder = "reference-slot", target = "t", deployment = "d", evidence = "e", risk = "accept-missing", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64}, engines = {df = 2 : i64}}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %b = cplan.alloc "b" transient {source = "b", device = "d0", space = "device", offset = 64 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "t0" () -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vs.rms_norm", device = "d0", engine = "df", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "t1" (%a) -> (%b) after(%t0) cost missing {task = "t1", op = "add", impl = "vs.add", device = "d0", engine = "df", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.add(h_mid)">}
  cplan.slot_dataflow {
    cplan.slot "s0" on "d0" "df" [%t0, %t1]
    cplan.fire %t0 on "s0" after []
    cplan.fire %t1 on "s9" after [%t0]
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: slot_dataflow: firing rule of 't1' names unknown slot 's9'
    // CHECK-NEXT: {{^}}  cplan.fire %t1 on "s9" after [%t0]
  }
}

// -----

// slot_dataflow: a command firing on a slot it is not bound to
cplan.plan attributes {binder = "reference-slot", target = "t", deployment = "d", evidence = "e", risk = "accept-missing", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64}, engines = {df = 2 : i64}}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %b = cplan.alloc "b" transient {source = "b", device = "d0", space = "device", offset = 64 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "t0" () -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vs.rms_norm", device = "d0", engine = "df", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "t1" (%a) -> (%b) after(%t0) cost missing {task = "t1", op = "add", impl = "vs.add", device = "d0", engine = "df", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.add(h_mid)">}
  cplan.slot_dataflow {
    cplan.slot "s0" on "d0" "df" [%t0]
    cplan.slot "s1" on "d0" "df" [%t1]
    cplan.fire %t0 on "s1" after []
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: slot_dataflow: command 't0' fires on slot 's1' but is not bound to it
    // CHECK-NEXT: {{^}}  cplan.fire %t0 on "s1" after []
    cplan.fire %t1 on "s1" after [%t0]
  }
}

// -----

// slot_dataflow: a bound command without a firing rule
cplan.plan attributes {binder = "reference-slot", target = "t", deployment = "d", evidence = "e", risk = "accept-missing", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64}, engines = {df = 2 : i64}}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %b = cplan.alloc "b" transient {source = "b", device = "d0", space = "device", offset = 64 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "t0" () -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vs.rms_norm", device = "d0", engine = "df", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "t1" (%a) -> (%b) after(%t0) cost missing {task = "t1", op = "add", impl = "vs.add", device = "d0", engine = "df", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.add(h_mid)">}
  cplan.slot_dataflow {
    cplan.slot "s0" on "d0" "df" [%t0, %t1]
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: slot_dataflow: command 't1' has no firing rule
    // CHECK-NEXT: {{^}}  cplan.slot "s0" on "d0" "df"
    cplan.fire %t0 on "s0" after []
  }
}

// -----

// AB-S-1: duplicate command id
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64, link = 1024 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
  cplan.device {id = "d1", capacity = {device = 4096 : i64}, engines = {compute = 1 : i64}}
  cplan.link {id = "l0", src = "d0", dst = "d1", capacity = 1024 : i64}
  %w = cplan.alloc "w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 100 : i64, alignment = 64 : i64}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %e = cplan.alloc "e" edge {source = "e", device = "d0", space = "link", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %c = cplan.alloc "c" transient {source = "c", device = "d1", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "t0" (%w) -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "t1" (%a) -> (%e) after(%t0) cost direct by roofline {task = "t1", op = "send", impl = "vq.send", device = "d0", engine = "copy", lineage = #cplan.lineage<decode, stage 0, "edge:e1", edge "e1">, duration = 1.0e-06 : f64, link = "l0"}
  %t2 = cplan.command "t2" (%e) -> (%c) after(%t1) cost direct by roofline {task = "t2", op = "add", impl = "vq.add", device = "d1", engine = "compute", lineage = #cplan.lineage<decode, stage 1, block 1, "blk.1.add(h_mid)">, duration = 1.0e-06 : f64}
  %t2b = cplan.command "t2" (%e) -> (%c) after(%t1) cost direct by roofline {task = "t2", op = "mul", impl = "vq.add", device = "d1", engine = "compute", lineage = #cplan.lineage<decode, stage 1, block 1, "blk.1.mul">, duration = 1.0e-06 : f64}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: [AB-S-1] command dependencies must be closed and acyclic (duplicate_command): command id 't2' (model op blk.1.add(h_mid) -> stage 1 block 1 (decode) -> task @t2 -> candidate vq.add) is declared twice
  // CHECK-NEXT: {{^}}  %t2b = cplan.command "t2" {{.*}}{task = "t2", op = "mul", impl = "vq.add",
  cplan.sync %t0 -> %t1
  cplan.sync %t1 -> %t2
  cplan.queue_schedule {
    cplan.queue "d0" "compute" [%t0]
    cplan.queue "d0" "copy" [%t1]
    cplan.queue "d1" "compute" [%t2, %t2b]
  }
}

// -----

// AB-S-1: a dependency cycle
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64, link = 1024 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
  cplan.device {id = "d1", capacity = {device = 4096 : i64}, engines = {compute = 1 : i64}}
  cplan.link {id = "l0", src = "d0", dst = "d1", capacity = 1024 : i64}
  %w = cplan.alloc "w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 100 : i64, alignment = 64 : i64}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %e = cplan.alloc "e" edge {source = "e", device = "d0", space = "link", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %c = cplan.alloc "c" transient {source = "c", device = "d1", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "t0" (%w) -> (%a) after(%t2) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: [AB-S-1] command dependencies must be closed and acyclic (dependency_cycle): command dependencies form a cycle through 't0' (model op blk.0.attn_norm -> stage 0 block 0 (decode) -> task @t0 -> candidate vq.rms_norm), 't1' (model op edge:e1 -> stage 0 (decode) -> task @t1 -> candidate vq.send), 't2' (model op blk.1.add(h_mid) -> stage 1 block 1 (decode) -> task @t2 -> candidate vq.add)
  // CHECK-NEXT: {{^}}  %t0 = cplan.command "t0" {{.*}}{task = "t0", op = "rms_norm",
  %t1 = cplan.command "t1" (%a) -> (%e) after(%t0) cost direct by roofline {task = "t1", op = "send", impl = "vq.send", device = "d0", engine = "copy", lineage = #cplan.lineage<decode, stage 0, "edge:e1", edge "e1">, duration = 1.0e-06 : f64, link = "l0"}
  %t2 = cplan.command "t2" (%e) -> (%c) after(%t1) cost direct by roofline {task = "t2", op = "add", impl = "vq.add", device = "d1", engine = "compute", lineage = #cplan.lineage<decode, stage 1, block 1, "blk.1.add(h_mid)">, duration = 1.0e-06 : f64}
  cplan.sync %t0 -> %t1
  cplan.sync %t1 -> %t2
  cplan.queue_schedule {
    cplan.queue "d0" "compute" [%t0]
    cplan.queue "d0" "copy" [%t1]
    cplan.queue "d1" "compute" [%t2]
  }
}

// -----

// AB-S-2: a command in no queue
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64, link = 1024 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
  cplan.device {id = "d1", capacity = {device = 4096 : i64}, engines = {compute = 1 : i64}}
  cplan.link {id = "l0", src = "d0", dst = "d1", capacity = 1024 : i64}
  %w = cplan.alloc "w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 100 : i64, alignment = 64 : i64}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %e = cplan.alloc "e" edge {source = "e", device = "d0", space = "link", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %c = cplan.alloc "c" transient {source = "c", device = "d1", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "t0" (%w) -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "t1" (%a) -> (%e) after(%t0) cost direct by roofline {task = "t1", op = "send", impl = "vq.send", device = "d0", engine = "copy", lineage = #cplan.lineage<decode, stage 0, "edge:e1", edge "e1">, duration = 1.0e-06 : f64, link = "l0"}
  %t2 = cplan.command "t2" (%e) -> (%c) after(%t1) cost direct by roofline {task = "t2", op = "add", impl = "vq.add", device = "d1", engine = "compute", lineage = #cplan.lineage<decode, stage 1, block 1, "blk.1.add(h_mid)">, duration = 1.0e-06 : f64}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: [AB-S-2] queue order and signal/wait edges must not deadlock and must enforce every dependency (unscheduled_command): command 't2' (model op blk.1.add(h_mid) -> stage 1 block 1 (decode) -> task @t2 -> candidate vq.add) is in no queue
  // CHECK-NEXT: {{^}}  %t2 = cplan.command "t2" {{.*}}{task = "t2", op = "add", impl = "vq.add",
  cplan.sync %t0 -> %t1
  cplan.sync %t1 -> %t2
  cplan.queue_schedule {
    cplan.queue "d0" "compute" [%t0]
    cplan.queue "d0" "copy" [%t1]
    cplan.queue "d1" "compute" []
  }
}

// -----

// AB-S-2: a command whose queue is on another engine
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64, link = 1024 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
  cplan.device {id = "d1", capacity = {device = 4096 : i64}, engines = {compute = 1 : i64}}
  cplan.link {id = "l0", src = "d0", dst = "d1", capacity = 1024 : i64}
  %w = cplan.alloc "w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 100 : i64, alignment = 64 : i64}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %e = cplan.alloc "e" edge {source = "e", device = "d0", space = "link", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %c = cplan.alloc "c" transient {source = "c", device = "d1", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "t0" (%w) -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: [AB-S-2] queue order and signal/wait edges must not deadlock and must enforce every dependency (placement_mismatch): command 't0' (model op blk.0.attn_norm -> stage 0 block 0 (decode) -> task @t0 -> candidate vq.rms_norm) is placed on d0/compute but its queue is on d0/copy
  // CHECK-NEXT: {{^}}  %t0 = cplan.command "t0" {{.*}}{task = "t0", op = "rms_norm",
  %t1 = cplan.command "t1" (%a) -> (%e) after(%t0) cost direct by roofline {task = "t1", op = "send", impl = "vq.send", device = "d0", engine = "copy", lineage = #cplan.lineage<decode, stage 0, "edge:e1", edge "e1">, duration = 1.0e-06 : f64, link = "l0"}
  %t2 = cplan.command "t2" (%e) -> (%c) after(%t1) cost direct by roofline {task = "t2", op = "add", impl = "vq.add", device = "d1", engine = "compute", lineage = #cplan.lineage<decode, stage 1, block 1, "blk.1.add(h_mid)">, duration = 1.0e-06 : f64}
  cplan.sync %t0 -> %t1
  cplan.sync %t1 -> %t2
  cplan.queue_schedule {
    cplan.queue "d0" "compute" []
    cplan.queue "d0" "copy" [%t0, %t1]
    cplan.queue "d1" "compute" [%t2]
  }
}

// -----

// AB-S-2: queue order against a signal/wait edge (deadlock)
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64, link = 1024 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
  cplan.device {id = "d1", capacity = {device = 4096 : i64}, engines = {compute = 1 : i64}}
  cplan.link {id = "l0", src = "d0", dst = "d1", capacity = 1024 : i64}
  %w = cplan.alloc "w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 100 : i64, alignment = 64 : i64}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %e = cplan.alloc "e" edge {source = "e", device = "d0", space = "link", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %c = cplan.alloc "c" transient {source = "c", device = "d1", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "t0" (%w) -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: [AB-S-2] queue order and signal/wait edges must not deadlock and must enforce every dependency (deadlock): queue order and signal/wait edges form a cycle (deadlock) through 't0' (model op blk.0.attn_norm -> stage 0 block 0 (decode) -> task @t0 -> candidate vq.rms_norm), 't1' (model op edge:e1 -> stage 0 (decode) -> task @t1 -> candidate vq.send), 't2' (model op blk.1.add(h_mid) -> stage 1 block 1 (decode) -> task @t2 -> candidate vq.add)
  // CHECK-NEXT: {{^}}  %t0 = cplan.command "t0" {{.*}}{task = "t0", op = "rms_norm",
  %t1 = cplan.command "t1" (%a) -> (%e) after(%t0) cost direct by roofline {task = "t1", op = "send", impl = "vq.send", device = "d0", engine = "copy", lineage = #cplan.lineage<decode, stage 0, "edge:e1", edge "e1">, duration = 1.0e-06 : f64, link = "l0"}
  %t2 = cplan.command "t2" (%e) -> (%c) after(%t1) cost direct by roofline {task = "t2", op = "add", impl = "vq.add", device = "d1", engine = "compute", lineage = #cplan.lineage<decode, stage 1, block 1, "blk.1.add(h_mid)">, duration = 1.0e-06 : f64}
  cplan.sync %t0 -> %t1
  cplan.sync %t2 -> %t0
  cplan.sync %t1 -> %t2
  cplan.queue_schedule {
    cplan.queue "d0" "compute" [%t0]
    cplan.queue "d0" "copy" [%t1]
    cplan.queue "d1" "compute" [%t2]
  }
}

// -----

// AB-S-2: a dependency no wait enforces
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64, link = 1024 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
  cplan.device {id = "d1", capacity = {device = 4096 : i64}, engines = {compute = 1 : i64}}
  cplan.link {id = "l0", src = "d0", dst = "d1", capacity = 1024 : i64}
  %w = cplan.alloc "w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 100 : i64, alignment = 64 : i64}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %e = cplan.alloc "e" edge {source = "e", device = "d0", space = "link", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %c = cplan.alloc "c" transient {source = "c", device = "d1", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "t0" (%w) -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "t1" (%a) -> (%e) after(%t0) cost direct by roofline {task = "t1", op = "send", impl = "vq.send", device = "d0", engine = "copy", lineage = #cplan.lineage<decode, stage 0, "edge:e1", edge "e1">, duration = 1.0e-06 : f64, link = "l0"}
  %t2 = cplan.command "t2" (%e) -> (%c) after(%t1) cost direct by roofline {task = "t2", op = "add", impl = "vq.add", device = "d1", engine = "compute", lineage = #cplan.lineage<decode, stage 1, block 1, "blk.1.add(h_mid)">, duration = 1.0e-06 : f64}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: [AB-S-2] queue order and signal/wait edges must not deadlock and must enforce every dependency (unenforced_dependency): dependency 't1' (model op edge:e1 -> stage 0 (decode) -> task @t1 -> candidate vq.send) -> 't2' (model op blk.1.add(h_mid) -> stage 1 block 1 (decode) -> task @t2 -> candidate vq.add) is not enforced by queue order or signal/wait (missing wait)
  // CHECK-NEXT: {{^}}  %t2 = cplan.command "t2" {{.*}}{task = "t2", op = "add", impl = "vq.add",
  cplan.sync %t0 -> %t1
  cplan.queue_schedule {
    cplan.queue "d0" "compute" [%t0]
    cplan.queue "d0" "copy" [%t1]
    cplan.queue "d1" "compute" [%t2]
  }
}

// -----

// AB-S-3: no legal implementation
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64, link = 1024 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
  cplan.device {id = "d1", capacity = {device = 4096 : i64}, engines = {compute = 1 : i64}}
  cplan.link {id = "l0", src = "d0", dst = "d1", capacity = 1024 : i64}
  %w = cplan.alloc "w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 100 : i64, alignment = 64 : i64}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %e = cplan.alloc "e" edge {source = "e", device = "d0", space = "link", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %c = cplan.alloc "c" transient {source = "c", device = "d1", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "t0" (%w) -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "t1" (%a) -> (%e) after(%t0) cost direct by roofline {task = "t1", op = "send", impl = "vq.send", device = "d0", engine = "copy", lineage = #cplan.lineage<decode, stage 0, "edge:e1", edge "e1">, duration = 1.0e-06 : f64, link = "l0"}
  %t2 = cplan.command "t2" (%e) -> (%c) after(%t1) cost direct by roofline {task = "t2", op = "add", impl = "generic", device = "d1", engine = "compute", lineage = #cplan.lineage<decode, stage 1, block 1, "blk.1.add(h_mid)">, duration = 1.0e-06 : f64}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: [AB-S-3] every command needs a legal implementation and placement (no_implementation): command 't2' (model op blk.1.add(h_mid) -> stage 1 block 1 (decode) -> task @t2 -> candidate generic) has no legal implementation ('generic')
  // CHECK-NEXT: {{^}}  %t2 = cplan.command "t2" {{.*}}{task = "t2", op = "add", impl = "generic",
  cplan.sync %t0 -> %t1
  cplan.sync %t1 -> %t2
  cplan.queue_schedule {
    cplan.queue "d0" "compute" [%t0]
    cplan.queue "d0" "copy" [%t1]
    cplan.queue "d1" "compute" [%t2]
  }
}

// -----

// AB-S-3: placed on an undeclared device
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64, link = 1024 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
  cplan.device {id = "d1", capacity = {device = 4096 : i64}, engines = {compute = 1 : i64}}
  cplan.link {id = "l0", src = "d0", dst = "d1", capacity = 1024 : i64}
  %w = cplan.alloc "w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 100 : i64, alignment = 64 : i64}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %e = cplan.alloc "e" edge {source = "e", device = "d0", space = "link", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %c = cplan.alloc "c" transient {source = "c", device = "d1", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "t0" (%w) -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "t1" (%a) -> (%e) after(%t0) cost direct by roofline {task = "t1", op = "send", impl = "vq.send", device = "d0", engine = "copy", lineage = #cplan.lineage<decode, stage 0, "edge:e1", edge "e1">, duration = 1.0e-06 : f64, link = "l0"}
  %t2 = cplan.command "t2" (%e) -> (%c) after(%t1) cost direct by roofline {task = "t2", op = "add", impl = "vq.add", device = "d7", engine = "compute", lineage = #cplan.lineage<decode, stage 1, block 1, "blk.1.add(h_mid)">, duration = 1.0e-06 : f64}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: [AB-S-3] every command needs a legal implementation and placement (unknown_device): command 't2' (model op blk.1.add(h_mid) -> stage 1 block 1 (decode) -> task @t2 -> candidate vq.add) is placed on undeclared device 'd7'
  // CHECK-NEXT: {{^}}  %t2 = cplan.command "t2" {{.*}}{task = "t2", op = "add", impl = "vq.add",
  cplan.sync %t0 -> %t1
  cplan.sync %t1 -> %t2
  cplan.queue_schedule {
    cplan.queue "d0" "compute" [%t0]
    cplan.queue "d0" "copy" [%t1]
    cplan.queue "d7" "compute" [%t2]
  }
}

// -----

// AB-S-3: placed on an engine the device lacks
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64, link = 1024 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
  cplan.device {id = "d1", capacity = {device = 4096 : i64}, engines = {compute = 1 : i64}}
  cplan.link {id = "l0", src = "d0", dst = "d1", capacity = 1024 : i64}
  %w = cplan.alloc "w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 100 : i64, alignment = 64 : i64}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %e = cplan.alloc "e" edge {source = "e", device = "d0", space = "link", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %c = cplan.alloc "c" transient {source = "c", device = "d1", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "t0" (%w) -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "t1" (%a) -> (%e) after(%t0) cost direct by roofline {task = "t1", op = "send", impl = "vq.send", device = "d0", engine = "copy", lineage = #cplan.lineage<decode, stage 0, "edge:e1", edge "e1">, duration = 1.0e-06 : f64, link = "l0"}
  %t2 = cplan.command "t2" (%e) -> (%c) after(%t1) cost direct by roofline {task = "t2", op = "add", impl = "vq.add", device = "d1", engine = "copy", lineage = #cplan.lineage<decode, stage 1, block 1, "blk.1.add(h_mid)">, duration = 1.0e-06 : f64}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: [AB-S-3] every command needs a legal implementation and placement (unknown_engine): command 't2' (model op blk.1.add(h_mid) -> stage 1 block 1 (decode) -> task @t2 -> candidate vq.add) is placed on engine 'copy' that device 'd1' lacks
  // CHECK-NEXT: {{^}}  %t2 = cplan.command "t2" {{.*}}{task = "t2", op = "add", impl = "vq.add",
  cplan.sync %t0 -> %t1
  cplan.sync %t1 -> %t2
  cplan.queue_schedule {
    cplan.queue "d0" "compute" [%t0]
    cplan.queue "d0" "copy" [%t1]
    cplan.queue "d1" "copy" [%t2]
  }
}

// -----

// AB-S-3: an undeclared link
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64, link = 1024 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
  cplan.device {id = "d1", capacity = {device = 4096 : i64}, engines = {compute = 1 : i64}}
  cplan.link {id = "l0", src = "d0", dst = "d1", capacity = 1024 : i64}
  %w = cplan.alloc "w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 100 : i64, alignment = 64 : i64}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %e = cplan.alloc "e" edge {source = "e", device = "d0", space = "link", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %c = cplan.alloc "c" transient {source = "c", device = "d1", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "t0" (%w) -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "t1" (%a) -> (%e) after(%t0) cost direct by roofline {task = "t1", op = "send", impl = "vq.send", device = "d0", engine = "copy", lineage = #cplan.lineage<decode, stage 0, "edge:e1", edge "e1">, duration = 1.0e-06 : f64, link = "l9"}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: [AB-S-3] every command needs a legal implementation and placement (unknown_link): command 't1' (model op edge:e1 -> stage 0 (decode) -> task @t1 -> candidate vq.send) uses undeclared link 'l9'
  // CHECK-NEXT: {{^}}  %t1 = cplan.command "t1" {{.*}}{task = "t1", op = "send", impl = "vq.send",
  %t2 = cplan.command "t2" (%e) -> (%c) after(%t1) cost direct by roofline {task = "t2", op = "add", impl = "vq.add", device = "d1", engine = "compute", lineage = #cplan.lineage<decode, stage 1, block 1, "blk.1.add(h_mid)">, duration = 1.0e-06 : f64}
  cplan.sync %t0 -> %t1
  cplan.sync %t1 -> %t2
  cplan.queue_schedule {
    cplan.queue "d0" "compute" [%t0]
    cplan.queue "d0" "copy" [%t1]
    cplan.queue "d1" "compute" [%t2]
  }
}

// -----

// AB-S-3: a link leaving another device
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64, link = 1024 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
  cplan.device {id = "d1", capacity = {device = 4096 : i64}, engines = {compute = 1 : i64}}
  cplan.link {id = "l0", src = "d1", dst = "d0", capacity = 1024 : i64}
  %w = cplan.alloc "w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 100 : i64, alignment = 64 : i64}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %e = cplan.alloc "e" edge {source = "e", device = "d0", space = "link", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %c = cplan.alloc "c" transient {source = "c", device = "d1", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "t0" (%w) -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "t1" (%a) -> (%e) after(%t0) cost direct by roofline {task = "t1", op = "send", impl = "vq.send", device = "d0", engine = "copy", lineage = #cplan.lineage<decode, stage 0, "edge:e1", edge "e1">, duration = 1.0e-06 : f64, link = "l0"}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: [AB-S-3] every command needs a legal implementation and placement (link_placement): command 't1' (model op edge:e1 -> stage 0 (decode) -> task @t1 -> candidate vq.send) on 'd0' uses link 'l0' leaving 'd1'
  // CHECK-NEXT: {{^}}  %t1 = cplan.command "t1" {{.*}}{task = "t1", op = "send", impl = "vq.send",
  %t2 = cplan.command "t2" (%e) -> (%c) after(%t1) cost direct by roofline {task = "t2", op = "add", impl = "vq.add", device = "d1", engine = "compute", lineage = #cplan.lineage<decode, stage 1, block 1, "blk.1.add(h_mid)">, duration = 1.0e-06 : f64}
  cplan.sync %t0 -> %t1
  cplan.sync %t1 -> %t2
  cplan.queue_schedule {
    cplan.queue "d0" "compute" [%t0]
    cplan.queue "d0" "copy" [%t1]
    cplan.queue "d1" "compute" [%t2]
  }
}

// -----

// AB-S-4: an access of a buffer on another device
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64, link = 1024 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
  cplan.device {id = "d1", capacity = {device = 4096 : i64}, engines = {compute = 1 : i64}}
  cplan.link {id = "l0", src = "d0", dst = "d1", capacity = 1024 : i64}
  %w = cplan.alloc "w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 100 : i64, alignment = 64 : i64}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %e = cplan.alloc "e" edge {source = "e", device = "d0", space = "link", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %c = cplan.alloc "c" transient {source = "c", device = "d1", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "t0" (%w) -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "t1" (%a) -> (%e) after(%t0) cost direct by roofline {task = "t1", op = "send", impl = "vq.send", device = "d0", engine = "copy", lineage = #cplan.lineage<decode, stage 0, "edge:e1", edge "e1">, duration = 1.0e-06 : f64, link = "l0"}
  %t2 = cplan.command "t2" (%e, %a) -> (%c) after(%t1) cost direct by roofline {task = "t2", op = "add", impl = "vq.add", device = "d1", engine = "compute", lineage = #cplan.lineage<decode, stage 1, block 1, "blk.1.add(h_mid)">, duration = 1.0e-06 : f64}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: [AB-S-4] buffer lifetimes must cover all producers and consumers (buffer_placement): command 't2' (model op blk.1.add(h_mid) -> stage 1 block 1 (decode) -> task @t2 -> candidate vq.add) on 'd1' accesses buffer 'a' (source 'a') allocated on 'd0'
  // CHECK-NEXT: {{^}}  %t2 = cplan.command "t2" {{.*}}{task = "t2", op = "add", impl = "vq.add",
  cplan.sync %t0 -> %t1
  cplan.sync %t1 -> %t2
  cplan.queue_schedule {
    cplan.queue "d0" "compute" [%t0]
    cplan.queue "d0" "copy" [%t1]
    cplan.queue "d1" "compute" [%t2]
  }
}

// -----

// AB-S-4: a transient read before any producer
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64, link = 1024 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
  cplan.device {id = "d1", capacity = {device = 4096 : i64}, engines = {compute = 1 : i64}}
  cplan.link {id = "l0", src = "d0", dst = "d1", capacity = 1024 : i64}
  %w = cplan.alloc "w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 100 : i64, alignment = 64 : i64}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %e = cplan.alloc "e" edge {source = "e", device = "d0", space = "link", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %c = cplan.alloc "c" transient {source = "c", device = "d1", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "t0" (%w) -> () cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "t1" (%a) -> (%e) after(%t0) cost direct by roofline {task = "t1", op = "send", impl = "vq.send", device = "d0", engine = "copy", lineage = #cplan.lineage<decode, stage 0, "edge:e1", edge "e1">, duration = 1.0e-06 : f64, link = "l0"}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: [AB-S-4] buffer lifetimes must cover all producers and consumers (lifetime_gap): transient buffer 'a' (source 'a') is read by 't1' (model op edge:e1 -> stage 0 (decode) -> task @t1 -> candidate vq.send) before any producer is guaranteed to have written it (producers: none)
  // CHECK-NEXT: {{^}}  %t1 = cplan.command "t1" {{.*}}{task = "t1", op = "send", impl = "vq.send",
  %t2 = cplan.command "t2" (%e) -> (%c) after(%t1) cost direct by roofline {task = "t2", op = "add", impl = "vq.add", device = "d1", engine = "compute", lineage = #cplan.lineage<decode, stage 1, block 1, "blk.1.add(h_mid)">, duration = 1.0e-06 : f64}
  cplan.sync %t0 -> %t1
  cplan.sync %t1 -> %t2
  cplan.queue_schedule {
    cplan.queue "d0" "compute" [%t0]
    cplan.queue "d0" "copy" [%t1]
    cplan.queue "d1" "compute" [%t2]
  }
}

// -----

// AB-S-4: an allocation id declared twice
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64, link = 1024 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
  cplan.device {id = "d1", capacity = {device = 4096 : i64}, engines = {compute = 1 : i64}}
  cplan.link {id = "l0", src = "d0", dst = "d1", capacity = 1024 : i64}
  %w = cplan.alloc "w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 100 : i64, alignment = 64 : i64}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %e = cplan.alloc "e" edge {source = "e", device = "d0", space = "link", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %c = cplan.alloc "c" transient {source = "c", device = "d1", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %c2 = cplan.alloc "c" transient {source = "c2", device = "d1", space = "device", offset = 64 : i64, size = 64 : i64, alignment = 64 : i64}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: [AB-S-4] buffer lifetimes must cover all producers and consumers (duplicate_alloc): allocation id 'c' (source 'c2') is declared twice
  // CHECK-NEXT: {{^}}  %c2 = cplan.alloc "c" transient {source = "c2", device = "d1",
  %t0 = cplan.command "t0" (%w) -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "t1" (%a) -> (%e) after(%t0) cost direct by roofline {task = "t1", op = "send", impl = "vq.send", device = "d0", engine = "copy", lineage = #cplan.lineage<decode, stage 0, "edge:e1", edge "e1">, duration = 1.0e-06 : f64, link = "l0"}
  %t2 = cplan.command "t2" (%e) -> (%c) after(%t1) cost direct by roofline {task = "t2", op = "add", impl = "vq.add", device = "d1", engine = "compute", lineage = #cplan.lineage<decode, stage 1, block 1, "blk.1.add(h_mid)">, duration = 1.0e-06 : f64}
  cplan.sync %t0 -> %t1
  cplan.sync %t1 -> %t2
  cplan.queue_schedule {
    cplan.queue "d0" "compute" [%t0]
    cplan.queue "d0" "copy" [%t1]
    cplan.queue "d1" "compute" [%t2]
  }
}

// -----

// AB-S-5: overlapping allocations that may be live at once
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64, link = 1024 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
  cplan.device {id = "d1", capacity = {device = 4096 : i64}, engines = {compute = 1 : i64}}
  cplan.link {id = "l0", src = "d0", dst = "d1", capacity = 1024 : i64}
  %w = cplan.alloc "w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 100 : i64, alignment = 64 : i64}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 64 : i64, size = 64 : i64, alignment = 64 : i64}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: [AB-S-5] reused allocations must not overlap in any legal execution (unsafe_reuse): d0/device: allocations 'w' [0, 100) and 'a' [64, 128) overlap; a weight buffer is live for the whole plan
  // CHECK-NEXT: {{^}}  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device",
  %e = cplan.alloc "e" edge {source = "e", device = "d0", space = "link", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %c = cplan.alloc "c" transient {source = "c", device = "d1", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "t0" (%w) -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "t1" (%a) -> (%e) after(%t0) cost direct by roofline {task = "t1", op = "send", impl = "vq.send", device = "d0", engine = "copy", lineage = #cplan.lineage<decode, stage 0, "edge:e1", edge "e1">, duration = 1.0e-06 : f64, link = "l0"}
  %t2 = cplan.command "t2" (%e) -> (%c) after(%t1) cost direct by roofline {task = "t2", op = "add", impl = "vq.add", device = "d1", engine = "compute", lineage = #cplan.lineage<decode, stage 1, block 1, "blk.1.add(h_mid)">, duration = 1.0e-06 : f64}
  cplan.sync %t0 -> %t1
  cplan.sync %t1 -> %t2
  cplan.queue_schedule {
    cplan.queue "d0" "compute" [%t0]
    cplan.queue "d0" "copy" [%t1]
    cplan.queue "d1" "compute" [%t2]
  }
}

// -----

// AB-S-6: a device id declared twice
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64, link = 1024 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
  cplan.device {id = "d1", capacity = {device = 4096 : i64}, engines = {compute = 1 : i64}}
  cplan.device {id = "d1", capacity = {device = 8192 : i64}, engines = {compute = 1 : i64}}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: [AB-S-6] device, memory-space, engine and link capacities must be respected (duplicate_device): device id 'd1' is declared twice
  // CHECK-NEXT: {{^}}  cplan.device {id = "d1", capacity = {device = 8192 : i64},
  cplan.link {id = "l0", src = "d0", dst = "d1", capacity = 1024 : i64}
  %w = cplan.alloc "w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 100 : i64, alignment = 64 : i64}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %e = cplan.alloc "e" edge {source = "e", device = "d0", space = "link", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %c = cplan.alloc "c" transient {source = "c", device = "d1", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "t0" (%w) -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "t1" (%a) -> (%e) after(%t0) cost direct by roofline {task = "t1", op = "send", impl = "vq.send", device = "d0", engine = "copy", lineage = #cplan.lineage<decode, stage 0, "edge:e1", edge "e1">, duration = 1.0e-06 : f64, link = "l0"}
  %t2 = cplan.command "t2" (%e) -> (%c) after(%t1) cost direct by roofline {task = "t2", op = "add", impl = "vq.add", device = "d1", engine = "compute", lineage = #cplan.lineage<decode, stage 1, block 1, "blk.1.add(h_mid)">, duration = 1.0e-06 : f64}
  cplan.sync %t0 -> %t1
  cplan.sync %t1 -> %t2
  cplan.queue_schedule {
    cplan.queue "d0" "compute" [%t0]
    cplan.queue "d0" "copy" [%t1]
    cplan.queue "d1" "compute" [%t2]
  }
}

// -----

// AB-S-6: a link id declared twice
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64, link = 1024 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
  cplan.device {id = "d1", capacity = {device = 4096 : i64}, engines = {compute = 1 : i64}}
  cplan.link {id = "l0", src = "d0", dst = "d1", capacity = 1024 : i64}
  cplan.link {id = "l0", src = "d0", dst = "d1", capacity = 512 : i64}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: [AB-S-6] device, memory-space, engine and link capacities must be respected (duplicate_link): link id 'l0' is declared twice
  // CHECK-NEXT: {{^}}  cplan.link {id = "l0", src = "d0", dst = "d1", capacity = 512 : i64}
  %w = cplan.alloc "w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 100 : i64, alignment = 64 : i64}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %e = cplan.alloc "e" edge {source = "e", device = "d0", space = "link", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %c = cplan.alloc "c" transient {source = "c", device = "d1", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "t0" (%w) -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "t1" (%a) -> (%e) after(%t0) cost direct by roofline {task = "t1", op = "send", impl = "vq.send", device = "d0", engine = "copy", lineage = #cplan.lineage<decode, stage 0, "edge:e1", edge "e1">, duration = 1.0e-06 : f64, link = "l0"}
  %t2 = cplan.command "t2" (%e) -> (%c) after(%t1) cost direct by roofline {task = "t2", op = "add", impl = "vq.add", device = "d1", engine = "compute", lineage = #cplan.lineage<decode, stage 1, block 1, "blk.1.add(h_mid)">, duration = 1.0e-06 : f64}
  cplan.sync %t0 -> %t1
  cplan.sync %t1 -> %t2
  cplan.queue_schedule {
    cplan.queue "d0" "compute" [%t0]
    cplan.queue "d0" "copy" [%t1]
    cplan.queue "d1" "compute" [%t2]
  }
}

// -----

// AB-S-6: an allocation on an undeclared device
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64, link = 1024 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
  cplan.device {id = "d1", capacity = {device = 4096 : i64}, engines = {compute = 1 : i64}}
  cplan.link {id = "l0", src = "d0", dst = "d1", capacity = 1024 : i64}
  %w = cplan.alloc "w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 100 : i64, alignment = 64 : i64}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %e = cplan.alloc "e" edge {source = "e", device = "d0", space = "link", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %c = cplan.alloc "c" transient {source = "c", device = "d1", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %x = cplan.alloc "x" transient {source = "x", device = "d7", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: [AB-S-6] device, memory-space, engine and link capacities must be respected (unknown_device): allocation 'x' is on undeclared device 'd7'
  // CHECK-NEXT: {{^}}  %x = cplan.alloc "x" transient {source = "x", device = "d7", space = "device",
  %t0 = cplan.command "t0" (%w) -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "t1" (%a) -> (%e) after(%t0) cost direct by roofline {task = "t1", op = "send", impl = "vq.send", device = "d0", engine = "copy", lineage = #cplan.lineage<decode, stage 0, "edge:e1", edge "e1">, duration = 1.0e-06 : f64, link = "l0"}
  %t2 = cplan.command "t2" (%e) -> (%c) after(%t1) cost direct by roofline {task = "t2", op = "add", impl = "vq.add", device = "d1", engine = "compute", lineage = #cplan.lineage<decode, stage 1, block 1, "blk.1.add(h_mid)">, duration = 1.0e-06 : f64}
  cplan.sync %t0 -> %t1
  cplan.sync %t1 -> %t2
  cplan.queue_schedule {
    cplan.queue "d0" "compute" [%t0]
    cplan.queue "d0" "copy" [%t1]
    cplan.queue "d1" "compute" [%t2]
  }
}

// -----

// AB-S-6: an allocation in a memory space the device lacks
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64, link = 1024 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
  cplan.device {id = "d1", capacity = {device = 4096 : i64}, engines = {compute = 1 : i64}}
  cplan.link {id = "l0", src = "d0", dst = "d1", capacity = 1024 : i64}
  %w = cplan.alloc "w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 100 : i64, alignment = 64 : i64}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %e = cplan.alloc "e" edge {source = "e", device = "d0", space = "link", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %c = cplan.alloc "c" transient {source = "c", device = "d1", space = "host", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: [AB-S-6] device, memory-space, engine and link capacities must be respected (unknown_space): allocation 'c' is in memory space 'host' that device 'd1' lacks
  // CHECK-NEXT: {{^}}  %c = cplan.alloc "c" transient {source = "c", device = "d1", space = "host",
  %t0 = cplan.command "t0" (%w) -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "t1" (%a) -> (%e) after(%t0) cost direct by roofline {task = "t1", op = "send", impl = "vq.send", device = "d0", engine = "copy", lineage = #cplan.lineage<decode, stage 0, "edge:e1", edge "e1">, duration = 1.0e-06 : f64, link = "l0"}
  %t2 = cplan.command "t2" (%e) -> (%c) after(%t1) cost direct by roofline {task = "t2", op = "add", impl = "vq.add", device = "d1", engine = "compute", lineage = #cplan.lineage<decode, stage 1, block 1, "blk.1.add(h_mid)">, duration = 1.0e-06 : f64}
  cplan.sync %t0 -> %t1
  cplan.sync %t1 -> %t2
  cplan.queue_schedule {
    cplan.queue "d0" "compute" [%t0]
    cplan.queue "d0" "copy" [%t1]
    cplan.queue "d1" "compute" [%t2]
  }
}

// -----

// AB-S-6: a memory space over capacity
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64, link = 1024 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
  cplan.device {id = "d1", capacity = {device = 32 : i64}, engines = {compute = 1 : i64}}
  cplan.link {id = "l0", src = "d0", dst = "d1", capacity = 1024 : i64}
  %w = cplan.alloc "w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 100 : i64, alignment = 64 : i64}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %e = cplan.alloc "e" edge {source = "e", device = "d0", space = "link", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %c = cplan.alloc "c" transient {source = "c", device = "d1", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: [AB-S-6] device, memory-space, engine and link capacities must be respected (capacity_exceeded): device 'd1' memory space 'device': peak 64 bytes exceeds capacity 32; largest: c (64 B)
  // CHECK-NEXT: {{^}}  %c = cplan.alloc "c" transient {source = "c", device = "d1", space = "device",
  %t0 = cplan.command "t0" (%w) -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "t1" (%a) -> (%e) after(%t0) cost direct by roofline {task = "t1", op = "send", impl = "vq.send", device = "d0", engine = "copy", lineage = #cplan.lineage<decode, stage 0, "edge:e1", edge "e1">, duration = 1.0e-06 : f64, link = "l0"}
  %t2 = cplan.command "t2" (%e) -> (%c) after(%t1) cost direct by roofline {task = "t2", op = "add", impl = "vq.add", device = "d1", engine = "compute", lineage = #cplan.lineage<decode, stage 1, block 1, "blk.1.add(h_mid)">, duration = 1.0e-06 : f64}
  cplan.sync %t0 -> %t1
  cplan.sync %t1 -> %t2
  cplan.queue_schedule {
    cplan.queue "d0" "compute" [%t0]
    cplan.queue "d0" "copy" [%t1]
    cplan.queue "d1" "compute" [%t2]
  }
}

// -----

// AB-S-6: a queue on an undeclared engine
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64, link = 1024 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
  cplan.device {id = "d1", capacity = {device = 4096 : i64}, engines = {compute = 1 : i64}}
  cplan.link {id = "l0", src = "d0", dst = "d1", capacity = 1024 : i64}
  %w = cplan.alloc "w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 100 : i64, alignment = 64 : i64}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %e = cplan.alloc "e" edge {source = "e", device = "d0", space = "link", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %c = cplan.alloc "c" transient {source = "c", device = "d1", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "t0" (%w) -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "t1" (%a) -> (%e) after(%t0) cost direct by roofline {task = "t1", op = "send", impl = "vq.send", device = "d0", engine = "copy", lineage = #cplan.lineage<decode, stage 0, "edge:e1", edge "e1">, duration = 1.0e-06 : f64, link = "l0"}
  %t2 = cplan.command "t2" (%e) -> (%c) after(%t1) cost direct by roofline {task = "t2", op = "add", impl = "vq.add", device = "d1", engine = "compute", lineage = #cplan.lineage<decode, stage 1, block 1, "blk.1.add(h_mid)">, duration = 1.0e-06 : f64}
  cplan.sync %t0 -> %t1
  cplan.sync %t1 -> %t2
  cplan.queue_schedule {
    cplan.queue "d0" "compute" [%t0]
    cplan.queue "d0" "copy" [%t1]
    cplan.queue "d1" "compute" [%t2]
    cplan.queue "d1" "dma" []
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: [AB-S-6] device, memory-space, engine and link capacities must be respected (unknown_engine): d1/dma is used by the schedule but not declared
    // CHECK-NEXT: {{^}}  cplan.queue "d1" "dma" []
  }
}

// -----

// AB-S-6: more slots than the engine has
cplan.plan attributes {binder = "reference-slot", target = "t", deployment = "d", evidence = "e", risk = "accept-missing", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64}, engines = {df = 1 : i64}}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %b = cplan.alloc "b" transient {source = "b", device = "d0", space = "device", offset = 64 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "t0" () -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vs.rms_norm", device = "d0", engine = "df", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "t1" (%a) -> (%b) after(%t0) cost missing {task = "t1", op = "add", impl = "vs.add", device = "d0", engine = "df", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.add(h_mid)">}
  cplan.slot_dataflow {
    cplan.slot "s0" on "d0" "df" [%t0]
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: [AB-S-6] device, memory-space, engine and link capacities must be respected (engine_oversubscribed): engine d0/df has 1 slot(s) but the schedule uses 2
    // CHECK-NEXT: {{^}}  cplan.slot "s0" on "d0" "df"
    cplan.slot "s1" on "d0" "df" [%t1]
    cplan.fire %t0 on "s0" after []
    cplan.fire %t1 on "s1" after [%t0]
  }
}

// -----

// AB-S-6: a transfer larger than its link
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64, link = 1024 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
  cplan.device {id = "d1", capacity = {device = 4096 : i64}, engines = {compute = 1 : i64}}
  cplan.link {id = "l0", src = "d0", dst = "d1", capacity = 16 : i64}
  %w = cplan.alloc "w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 100 : i64, alignment = 64 : i64}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %e = cplan.alloc "e" edge {source = "e", device = "d0", space = "link", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %c = cplan.alloc "c" transient {source = "c", device = "d1", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "t0" (%w) -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "t1" (%a) -> (%e) after(%t0) cost direct by roofline {task = "t1", op = "send", impl = "vq.send", device = "d0", engine = "copy", lineage = #cplan.lineage<decode, stage 0, "edge:e1", edge "e1">, duration = 1.0e-06 : f64, link = "l0"}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: [AB-S-6] device, memory-space, engine and link capacities must be respected (link_capacity): command 't1' (model op edge:e1 -> stage 0 (decode) -> task @t1 -> candidate vq.send) moves 64 bytes over link 'l0' of capacity 16
  // CHECK-NEXT: {{^}}  %t1 = cplan.command "t1" {{.*}}{task = "t1", op = "send", impl = "vq.send",
  %t2 = cplan.command "t2" (%e) -> (%c) after(%t1) cost direct by roofline {task = "t2", op = "add", impl = "vq.add", device = "d1", engine = "compute", lineage = #cplan.lineage<decode, stage 1, block 1, "blk.1.add(h_mid)">, duration = 1.0e-06 : f64}
  cplan.sync %t0 -> %t1
  cplan.sync %t1 -> %t2
  cplan.queue_schedule {
    cplan.queue "d0" "compute" [%t0]
    cplan.queue "d0" "copy" [%t1]
    cplan.queue "d1" "compute" [%t2]
  }
}

// -----

// AB-S-7: a missing cost the risk policy does not cover
cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 4096 : i64, link = 1024 : i64}, engines = {compute = 1 : i64, copy = 1 : i64}}
  cplan.device {id = "d1", capacity = {device = 4096 : i64}, engines = {compute = 1 : i64}}
  cplan.link {id = "l0", src = "d0", dst = "d1", capacity = 1024 : i64}
  %w = cplan.alloc "w" weight {source = "w", device = "d0", space = "device", offset = 0 : i64, size = 100 : i64, alignment = 64 : i64}
  %a = cplan.alloc "a" transient {source = "a", device = "d0", space = "device", offset = 128 : i64, size = 64 : i64, alignment = 64 : i64}
  %e = cplan.alloc "e" edge {source = "e", device = "d0", space = "link", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %c = cplan.alloc "c" transient {source = "c", device = "d1", space = "device", offset = 0 : i64, size = 64 : i64, alignment = 64 : i64}
  %t0 = cplan.command "t0" (%w) -> (%a) cost direct by roofline {task = "t0", op = "rms_norm", impl = "vq.rms_norm", device = "d0", engine = "compute", lineage = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_norm">, duration = 1.0e-06 : f64}
  %t1 = cplan.command "t1" (%a) -> (%e) after(%t0) cost direct by roofline {task = "t1", op = "send", impl = "vq.send", device = "d0", engine = "copy", lineage = #cplan.lineage<decode, stage 0, "edge:e1", edge "e1">, duration = 1.0e-06 : f64, link = "l0"}
  %t2 = cplan.command "t2" (%e) -> (%c) after(%t1) cost missing {task = "t2", op = "add", impl = "vq.add", device = "d1", engine = "compute", lineage = #cplan.lineage<decode, stage 1, block 1, "blk.1.add(h_mid)">}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: [AB-S-7] every cost used must be present or covered by the risk policy (cost_not_covered): command 't2' (model op blk.1.add(h_mid) -> stage 1 block 1 (decode) -> task @t2 -> candidate vq.add) uses a missing cost that risk policy 'strict' does not cover
  // CHECK-NEXT: {{^}}  %t2 = cplan.command "t2" {{.*}}{task = "t2", op = "add", impl = "vq.add",
  cplan.sync %t0 -> %t1
  cplan.sync %t1 -> %t2
  cplan.queue_schedule {
    cplan.queue "d0" "compute" [%t0]
    cplan.queue "d0" "copy" [%t1]
    cplan.queue "d1" "compute" [%t2]
  }
}
