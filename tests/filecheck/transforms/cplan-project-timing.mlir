// RUN: pipeplan-opt %s -p cplan-project-timing | filecheck %s
// RUN: pipeplan-opt %s -p cplan-project-timing | pipeplan-opt -p cplan-verify | filecheck %s --check-prefix=REPARSE
// AB-T-1: predicted intervals on every command, critical path and makespan bounds on the plan (roofline confidence 0.5 -> [d/2, 3d/2]).
// AB-T-3: the annotations are discardable attributes: the annotated plan re-parses and still passes cplan-verify.

builtin.module {
  cplan.plan attributes {binder = "list-schedule", target = "virtual-queue@1", deployment = "deployment:n0", evidence = "roofline@r1", risk = "strict", source = "sha256:00"} {
    cplan.device {id = "n0", capacity = {device = 1073741824 : i64, link = 1073741824 : i64}, engines = {queue.copy = 1 : i64, queue.compute = 1 : i64}}
    %edge.e0 = cplan.alloc "alloc.edge.e0" edge {source = "edge.e0", device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
    %edge.e1 = cplan.alloc "alloc.edge.e1" edge {source = "edge.e1", device = "n0", space = "link", offset = 64 : i64, size = 4 : i64, alignment = 64 : i64}
    %s0.w.token_embd.weight = cplan.alloc "alloc.s0.w.token_embd.weight" weight {source = "s0.w.token_embd.weight", device = "n0", space = "device", offset = 0 : i64, size = 131072 : i64, alignment = 64 : i64}
    %s0.w.output_norm.weight = cplan.alloc "alloc.s0.w.output_norm.weight" weight {source = "s0.w.output_norm.weight", device = "n0", space = "device", offset = 131072 : i64, size = 256 : i64, alignment = 64 : i64}
    %s0.w.output.weight = cplan.alloc "alloc.s0.w.output.weight" weight {source = "s0.w.output.weight", device = "n0", space = "device", offset = 131328 : i64, size = 131072 : i64, alignment = 64 : i64}
    %decode.s0.input = cplan.alloc "alloc.decode.s0.input" transient {source = "decode.s0.input", device = "n0", space = "device", offset = 262400 : i64, size = 4 : i64, alignment = 64 : i64}
    %decode.s0.h0 = cplan.alloc "alloc.decode.s0.h0" transient {source = "decode.s0.h0", device = "n0", space = "device", offset = 262464 : i64, size = 256 : i64, alignment = 64 : i64}
    %decode.s0.h_last = cplan.alloc "alloc.decode.s0.h_last" transient {source = "decode.s0.h_last", device = "n0", space = "device", offset = 262720 : i64, size = 256 : i64, alignment = 64 : i64}
    %decode.s0.h_norm = cplan.alloc "alloc.decode.s0.h_norm" transient {source = "decode.s0.h_norm", device = "n0", space = "device", offset = 262976 : i64, size = 256 : i64, alignment = 64 : i64}
    %decode.s0.output = cplan.alloc "alloc.decode.s0.output" transient {source = "decode.s0.output", device = "n0", space = "device", offset = 263232 : i64, size = 2048 : i64, alignment = 64 : i64}
    %decode.s0.token = cplan.alloc "alloc.decode.s0.token" transient {source = "decode.s0.token", device = "n0", space = "device", offset = 265280 : i64, size = 4 : i64, alignment = 64 : i64}
    %decode.s0.recv.e0 = cplan.command "cmd.decode.s0.recv.e0" (%edge.e0) -> (%decode.s0.input) cost direct by roofline {task = "decode.s0.recv.e0", op = "recv", impl = "vq.recv", device = "n0", engine = "queue.copy", lineage = #cplan.lineage<decode, stage 0, "edge:e0", edge "e0">, duration = 1.000000e-06 : f64}
    %decode.s0.embedding_gather.token_embd = cplan.command "cmd.decode.s0.embedding_gather.token_embd" (%decode.s0.input, %s0.w.token_embd.weight) -> (%decode.s0.h0) after(%decode.s0.recv.e0) cost direct by roofline {task = "decode.s0.embedding_gather.token_embd", op = "embedding_gather", impl = "vq.embedding_gather", device = "n0", engine = "queue.compute", lineage = #cplan.lineage<decode, stage 0, "token_embd">, duration = 2.000000e-06 : f64}
    %decode.s0.last_row.h_last = cplan.command "cmd.decode.s0.last_row.h_last" (%decode.s0.h0) -> (%decode.s0.h_last) after(%decode.s0.embedding_gather.token_embd) cost direct by roofline {task = "decode.s0.last_row.h_last", op = "last_row", impl = "vq.last_row", device = "n0", engine = "queue.compute", lineage = #cplan.lineage<decode, stage 0, "last_row(h_last)">, duration = 1.000000e-06 : f64}
    %decode.s0.rms_norm.output_norm = cplan.command "cmd.decode.s0.rms_norm.output_norm" (%decode.s0.h_last, %s0.w.output_norm.weight) -> (%decode.s0.h_norm) after(%decode.s0.last_row.h_last) cost direct by roofline {task = "decode.s0.rms_norm.output_norm", op = "rms_norm", impl = "vq.rms_norm", device = "n0", engine = "queue.compute", lineage = #cplan.lineage<decode, stage 0, "output_norm">, duration = 1.000000e-06 : f64}
    %decode.s0.matmul.output = cplan.command "cmd.decode.s0.matmul.output" (%decode.s0.h_norm, %s0.w.output.weight) -> (%decode.s0.output) after(%decode.s0.rms_norm.output_norm) cost direct by roofline {task = "decode.s0.matmul.output", op = "matmul", impl = "vq.matmul", device = "n0", engine = "queue.compute", lineage = #cplan.lineage<decode, stage 0, "output">, duration = 4.000000e-06 : f64}
    %decode.s0.argmax.token = cplan.command "cmd.decode.s0.argmax.token" (%decode.s0.output) -> (%decode.s0.token) after(%decode.s0.matmul.output) cost direct by roofline {task = "decode.s0.argmax.token", op = "argmax", impl = "vq.argmax", device = "n0", engine = "queue.compute", lineage = #cplan.lineage<decode, stage 0, "sampling">, duration = 1.000000e-06 : f64}
    %decode.s0.send.e1 = cplan.command "cmd.decode.s0.send.e1" (%decode.s0.token) -> (%edge.e1) after(%decode.s0.argmax.token) cost direct by roofline {task = "decode.s0.send.e1", op = "send", impl = "vq.send", device = "n0", engine = "queue.copy", lineage = #cplan.lineage<decode, stage 0, "edge:e1", edge "e1">, duration = 1.000000e-06 : f64}
    cplan.sync %decode.s0.recv.e0 -> %decode.s0.embedding_gather.token_embd
    cplan.sync %decode.s0.argmax.token -> %decode.s0.send.e1
    cplan.queue_schedule {
      cplan.queue "n0" "queue.copy" [%decode.s0.recv.e0, %decode.s0.send.e1]
      cplan.queue "n0" "queue.compute" [%decode.s0.embedding_gather.token_embd, %decode.s0.last_row.h_last, %decode.s0.rms_norm.output_norm, %decode.s0.matmul.output, %decode.s0.argmax.token]
    }
  }
}


// CHECK:      cplan.plan attributes {timing = {makespan = 1.100000e-05 : f64, lo_makespan = 5.500000e-06 : f64, hi_makespan = 1.6499999999999998e-05 : f64, contended = 0 : i64, critical_path = ["decode#0:cmd.decode.s0.recv.e0", "decode#0:cmd.decode.s0.embedding_gather.token_embd", "decode#0:cmd.decode.s0.last_row.h_last", "decode#0:cmd.decode.s0.rms_norm.output_norm", "decode#0:cmd.decode.s0.matmul.output", "decode#0:cmd.decode.s0.argmax.token", "decode#0:cmd.decode.s0.send.e1"], steps = ["decode"]}
// CHECK:      cplan.command "cmd.decode.s0.recv.e0" (%edge.e0) -> (%decode.s0.input) cost direct by roofline {timing = {start = 0.000000e+00 : f64, end = 1.000000e-06 : f64, lo_start = 0.000000e+00 : f64, lo_end = 5.000000e-07 : f64, hi_start = 0.000000e+00 : f64, hi_end = 1.500000e-06 : f64, contention = 0.000000e+00 : f64, critical = true}, task =
// CHECK:      cplan.command "cmd.decode.s0.rms_norm.output_norm" {{.*}}{timing = {start = 4.000000e-06 : f64, end = 4.9999999999999996e-06 : f64, lo_start = 2.000000e-06 : f64
// REPARSE:    cplan.plan attributes {timing = {makespan = 1.100000e-05 : f64
