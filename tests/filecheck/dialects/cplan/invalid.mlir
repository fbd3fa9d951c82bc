// RUN: %verify-diag | filecheck %s
// Op verifiers of the cplan dialect (what one op or one extension can check alone).

cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 64 : i64}, engines = {c = 1 : i64}}
}
// CHECK: a plan needs exactly one target extension (queue_schedule or slot_dataflow), found 0

// -----

cplan.plan attributes {binder = "reference-queue", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.queue_schedule {
  }
  cplan.slot_dataflow {
  }
}
// CHECK: a plan needs exactly one target extension (queue_schedule or slot_dataflow), found 2

// -----

cplan.plan attributes {binder = "magic", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.queue_schedule {
  }
}
// CHECK: unknown binder 'magic', expected one of reference-queue, reference-slot, list-schedule

// -----

cplan.plan attributes {binder = "list-schedule", target = "t", deployment = "d", evidence = "e", risk = "yolo", source = "s"} {
  cplan.queue_schedule {
  }
}
// CHECK: unknown risk policy 'yolo'

// -----

cplan.plan attributes {binder = "list-schedule", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.alloc {id = "b", source = "b", device = "d0", space = "device", offset = 32 : i64, size = 8 : i64, alignment = 64 : i64, lifetime = "transient"}
  cplan.queue_schedule {
  }
}
// CHECK: alloc 'b': offset 32 is not a multiple of alignment 64

// -----

cplan.plan attributes {binder = "list-schedule", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.alloc {id = "b", source = "b", device = "d0", space = "device", offset = 0 : i64, size = 8 : i64, alignment = 48 : i64, lifetime = "forever"}
  cplan.queue_schedule {
  }
}
// CHECK: alloc 'b': alignment 48 is not a positive power of two

// -----

cplan.plan attributes {binder = "list-schedule", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.command {id = "c", task = "t", op = "add", impl = "x", device = "d0", engine = "e", deps = [], reads = [], writes = [], lineage = "l", provider = "p", status = "direct"}
  cplan.queue_schedule {
  }
}
// CHECK: command 'c': duration must be present exactly when the cost is not missing

// -----

cplan.plan attributes {binder = "list-schedule", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.queue_schedule {
    cplan.queue {device = "d0", engine = "e", order = ["c0"]}
    cplan.queue {device = "d0", engine = "e", order = ["c1"]}
  }
}
// CHECK: queue_schedule: two queues for device 'd0' engine 'e'

// -----

cplan.plan attributes {binder = "reference-slot", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.slot_dataflow {
    cplan.slot {id = "s0", device = "d0", engine = "e", commands = ["c0"]}
  }
}
// CHECK: slot_dataflow: command 'c0' has no firing rule

// -----

cplan.plan attributes {binder = "reference-slot", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.slot_dataflow {
    cplan.queue {device = "d0", engine = "e", order = []}
  }
}
// CHECK: 'cplan.queue' expects parent op 'cplan.queue_schedule'

// -----

cplan.plan attributes {binder = "reference-slot", target = "t", deployment = "d", evidence = "e", risk = "strict", source = "s"} {
  cplan.device {id = "d0", capacity = {device = 64 : i64}, engines = {e = 0 : i64}}
  cplan.slot_dataflow {
  }
}
// CHECK: device 'd0': engine 'e' needs at least one slot, has 0
