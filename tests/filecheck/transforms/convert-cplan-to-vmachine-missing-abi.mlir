// RUN: pipeplan-opt %s -p convert-cplan-to-vmachine --verify-diagnostics | filecheck %s
// AB-G-4: without a module-level vmachine.abi (or the model option) the lowering fails naming the missing binding.

builtin.module {
  cplan.plan attributes {binder = "list-schedule", target = "virtual-queue@1", deployment = "deployment:n0", evidence = "roofline@r1", risk = "strict", source = "sha256:00"} {
    cplan.device {id = "n0", capacity = {device = 1073741824 : i64, link = 1073741824 : i64}, engines = {queue.copy = 1 : i64, queue.compute = 1 : i64}}
    cplan.alloc {id = "alloc.edge.e0", source = "edge.e0", device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64, lifetime = "edge"}
    cplan.alloc {id = "alloc.edge.e1", source = "edge.e1", device = "n0", space = "link", offset = 64 : i64, size = 4 : i64, alignment = 64 : i64, lifetime = "edge"}
    cplan.alloc {id = "alloc.s0.w.token_embd.weight", source = "s0.w.token_embd.weight", device = "n0", space = "device", offset = 0 : i64, size = 131072 : i64, alignment = 64 : i64, lifetime = "weight"}
    cplan.alloc {id = "alloc.s0.w.output_norm.weight", source = "s0.w.output_norm.weight", device = "n0", space = "device", offset = 131072 : i64, size = 256 : i64, alignment = 64 : i64, lifetime = "weight"}
    cplan.alloc {id = "alloc.s0.w.output.weight", source = "s0.w.output.weight", device = "n0", space = "device", offset = 131328 : i64, size = 131072 : i64, alignment = 64 : i64, lifetime = "weight"}
    cplan.alloc {id = "alloc.decode.s0.input", source = "decode.s0.input", device = "n0", space = "device", offset = 262400 : i64, size = 4 : i64, alignment = 64 : i64, lifetime = "transient"}
    cplan.alloc {id = "alloc.decode.s0.h0", source = "decode.s0.h0", device = "n0", space = "device", offset = 262464 : i64, size = 256 : i64, alignment = 64 : i64, lifetime = "transient"}
    cplan.alloc {id = "alloc.decode.s0.h_last", source = "decode.s0.h_last", device = "n0", space = "device", offset = 262720 : i64, size = 256 : i64, alignment = 64 : i64, lifetime = "transient"}
    cplan.alloc {id = "alloc.decode.s0.h_norm", source = "decode.s0.h_norm", device = "n0", space = "device", offset = 262976 : i64, size = 256 : i64, alignment = 64 : i64, lifetime = "transient"}
    cplan.alloc {id = "alloc.decode.s0.output", source = "decode.s0.output", device = "n0", space = "device", offset = 263232 : i64, size = 2048 : i64, alignment = 64 : i64, lifetime = "transient"}
    cplan.alloc {id = "alloc.decode.s0.token", source = "decode.s0.token", device = "n0", space = "device", offset = 265280 : i64, size = 4 : i64, alignment = 64 : i64, lifetime = "transient"}
    cplan.command {id = "cmd.decode.s0.recv.e0", task = "decode.s0.recv.e0", op = "recv", impl = "vq.recv", device = "n0", engine = "queue.copy", deps = [], reads = ["alloc.edge.e0"], writes = ["alloc.decode.s0.input"], lineage = "model op recv.e0 -> stage 0 (decode) -> task @decode.s0.recv.e0 -> candidate vq.recv", provider = "roofline", status = "direct", duration = 1.000000e-06 : f64}
    cplan.command {id = "cmd.decode.s0.embedding_gather.token_embd", task = "decode.s0.embedding_gather.token_embd", op = "embedding_gather", impl = "vq.embedding_gather", device = "n0", engine = "queue.compute", deps = ["cmd.decode.s0.recv.e0"], reads = ["alloc.decode.s0.input", "alloc.s0.w.token_embd.weight"], writes = ["alloc.decode.s0.h0"], lineage = "model op embedding_gather.token_embd -> stage 0 (decode) -> task @decode.s0.embedding_gather.token_embd -> candidate vq.embedding_gather", provider = "roofline", status = "direct", duration = 2.000000e-06 : f64}
    cplan.command {id = "cmd.decode.s0.last_row.h_last", task = "decode.s0.last_row.h_last", op = "last_row", impl = "vq.last_row", device = "n0", engine = "queue.compute", deps = ["cmd.decode.s0.embedding_gather.token_embd"], reads = ["alloc.decode.s0.h0"], writes = ["alloc.decode.s0.h_last"], lineage = "model op last_row.h_last -> stage 0 (decode) -> task @decode.s0.last_row.h_last -> candidate vq.last_row", provider = "roofline", status = "direct", duration = 1.000000e-06 : f64}
    cplan.command {id = "cmd.decode.s0.rms_norm.output_norm", task = "decode.s0.rms_norm.output_norm", op = "rms_norm", impl = "vq.rms_norm", device = "n0", engine = "queue.compute", deps = ["cmd.decode.s0.last_row.h_last"], reads = ["alloc.decode.s0.h_last", "alloc.s0.w.output_norm.weight"], writes = ["alloc.decode.s0.h_norm"], lineage = "model op rms_norm.output_norm -> stage 0 (decode) -> task @decode.s0.rms_norm.output_norm -> candidate vq.rms_norm", provider = "roofline", status = "direct", duration = 1.000000e-06 : f64}
    cplan.command {id = "cmd.decode.s0.matmul.output", task = "decode.s0.matmul.output", op = "matmul", impl = "vq.matmul", device = "n0", engine = "queue.compute", deps = ["cmd.decode.s0.rms_norm.output_norm"], reads = ["alloc.decode.s0.h_norm", "alloc.s0.w.output.weight"], writes = ["alloc.decode.s0.output"], lineage = "model op matmul.output -> stage 0 (decode) -> task @decode.s0.matmul.output -> candidate vq.matmul", provider = "roofline", status = "direct", duration = 4.000000e-06 : f64}
    cplan.command {id = "cmd.decode.s0.argmax.token", task = "decode.s0.argmax.token", op = "argmax", impl = "vq.argmax", device = "n0", engine = "queue.compute", deps = ["cmd.decode.s0.matmul.output"], reads = ["alloc.decode.s0.output"], writes = ["alloc.decode.s0.token"], lineage = "model op argmax.token -> stage 0 (decode) -> task @decode.s0.argmax.token -> candidate vq.argmax", provider = "roofline", status = "direct", duration = 1.000000e-06 : f64}
    cplan.command {id = "cmd.decode.s0.send.e1", task = "decode.s0.send.e1", op = "send", impl = "vq.send", device = "n0", engine = "queue.copy", deps = ["cmd.decode.s0.argmax.token"], reads = ["alloc.decode.s0.token"], writes = ["alloc.edge.e1"], lineage = "model op send.e1 -> stage 0 (decode) -> task @decode.s0.send.e1 -> candidate vq.send", provider = "roofline", status = "direct", duration = 1.000000e-06 : f64}
    cplan.sync {signal = "cmd.decode.s0.recv.e0", wait = "cmd.decode.s0.embedding_gather.token_embd"}
    cplan.sync {signal = "cmd.decode.s0.argmax.token", wait = "cmd.decode.s0.send.e1"}
    cplan.queue_schedule {
      cplan.queue {device = "n0", engine = "queue.copy", order = ["cmd.decode.s0.recv.e0", "cmd.decode.s0.send.e1"]}
      cplan.queue {device = "n0", engine = "queue.compute", order = ["cmd.decode.s0.embedding_gather.token_embd", "cmd.decode.s0.last_row.h_last", "cmd.decode.s0.rms_norm.output_norm", "cmd.decode.s0.matmul.output", "cmd.decode.s0.argmax.token"]}
    }
  }
}

// CHECK: missing binding: model ABI
