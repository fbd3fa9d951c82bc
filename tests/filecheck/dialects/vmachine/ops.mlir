// RUN: %roundtrip | filecheck %s
// RUN: %generic-roundtrip | filecheck %s
// AB-M-1: the vmachine dialect round-trips in custom and generic form (MLIR-parseable carriers only); the
// program is well-formed (every buffer and edge declared, nothing read before it is written), which
// vmachine.program's verifier checks on parse.

builtin.module {
  vmachine.program attributes {target = "virtual-queue@1", deployment = "deployment:n0", concrete = "sha256:00", portable = "sha256:11", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
    vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
    vmachine.buffer {id = "b.in", name = "input", stage = 0 : i64, step = "decode", device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64, lifetime = "transient"}
    vmachine.edge {id = "e0", buffer = "b.e0", producer = -1 : i64, consumer = 0 : i64, link = ""}
    vmachine.buffer {id = "b.x", name = "blk.0.q", stage = 0 : i64, step = "", device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64, lifetime = "kv"}
    vmachine.buffer {id = "b.t", name = "rope.table", stage = 0 : i64, step = "", device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64, lifetime = "weight"}
    vmachine.buffer {id = "b.y", name = "output", stage = 0 : i64, step = "decode", device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64, lifetime = "transient"}
    vmachine.buffer {id = "b.tok", name = "token", stage = 0 : i64, step = "decode", device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64, lifetime = "transient"}
    vmachine.edge {id = "e1", buffer = "b.e1", producer = 0 : i64, consumer = -1 : i64, link = ""}
    vmachine.stage attributes {index = 0 : i64, device = "n0", layer_start = 0 : i64, layer_end = 1 : i64} {
      vmachine.step attributes {name = "decode", rows = 1 : i64} {
        vmachine.queue attributes {engine = "queue.copy"} {
          vmachine.recv {id = "i0", cmd = "c0", edge = "e0", dst = "b.in"}
          vmachine.signal {id = "i1", token = "sync.0", signal = "c0", wait = "c1"}
        }
        vmachine.queue attributes {engine = "queue.compute"} {
          vmachine.wait {id = "i2", token = "sync.0", signal = "c0", wait = "c1"}
          vmachine.kernel {id = "i3", cmd = "c1", kernel = "rope", ins = ["b.x", "b.t", "start_pos"], outs = ["b.y"], attrs = {head_dim = 8 : i64, n_heads = 8 : i64, rope_dim = 8 : i64}, block = 0 : i64}
          vmachine.sample {id = "i4", cmd = "c2", src = "b.y", dst = "b.tok"}
          vmachine.send {id = "i5", cmd = "c3", edge = "e1", src = "b.tok"}
        }
      }
    }
  }
}

// CHECK:      vmachine.program attributes {target = "virtual-queue@1", deployment = "deployment:n0", concrete = "sha256:00", portable = "sha256:11", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
// CHECK-NEXT:   vmachine.abi {n_embd = 64 : i64, {{.*}} rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
// CHECK-NEXT:   vmachine.buffer {id = "b.in", name = "input", stage = 0 : i64, step = "decode", device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64, lifetime = "transient"}
// CHECK-NEXT:   vmachine.edge {id = "e0", buffer = "b.e0", producer = -1 : i64, consumer = 0 : i64, link = ""}
// CHECK-NEXT:   vmachine.buffer {id = "b.x", name = "blk.0.q", stage = 0 : i64, step = "", device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64, lifetime = "kv"}
// CHECK-NEXT:   vmachine.buffer {id = "b.t", name = "rope.table", stage = 0 : i64, step = "", device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64, lifetime = "weight"}
// CHECK-NEXT:   vmachine.buffer {id = "b.y", name = "output", stage = 0 : i64, step = "decode", device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64, lifetime = "transient"}
// CHECK-NEXT:   vmachine.buffer {id = "b.tok", name = "token", stage = 0 : i64, step = "decode", device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64, lifetime = "transient"}
// CHECK-NEXT:   vmachine.edge {id = "e1", buffer = "b.e1", producer = 0 : i64, consumer = -1 : i64, link = ""}
// CHECK-NEXT:   vmachine.stage attributes {index = 0 : i64, device = "n0", layer_start = 0 : i64, layer_end = 1 : i64} {
// CHECK-NEXT:     vmachine.step attributes {name = "decode", rows = 1 : i64} {
// CHECK-NEXT:       vmachine.queue attributes {engine = "queue.copy"} {
// CHECK-NEXT:         vmachine.recv {id = "i0", cmd = "c0", edge = "e0", dst = "b.in"}
// CHECK-NEXT:         vmachine.signal {id = "i1", token = "sync.0", signal = "c0", wait = "c1"}
// CHECK:              vmachine.wait {id = "i2", token = "sync.0", signal = "c0", wait = "c1"}
// CHECK-NEXT:         vmachine.kernel {id = "i3", cmd = "c1", kernel = "rope", ins = ["b.x", "b.t", "start_pos"], outs = ["b.y"], attrs = {head_dim = 8 : i64, n_heads = 8 : i64, rope_dim = 8 : i64}, block = 0 : i64}
// CHECK-NEXT:         vmachine.sample {id = "i4", cmd = "c2", src = "b.y", dst = "b.tok"}
// CHECK-NEXT:         vmachine.send {id = "i5", cmd = "c3", edge = "e1", src = "b.tok"}
