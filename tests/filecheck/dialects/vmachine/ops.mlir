// RUN: %roundtrip | filecheck %s
// RUN: %generic-roundtrip | filecheck %s
// AB-M-1: the vmachine dialect round-trips in custom and generic form (MLIR-parseable carriers only); the
// program is well-formed (every buffer and edge declared, nothing read before it is written), which
// vmachine.program's verifier checks on parse.

builtin.module {
  vmachine.program attributes {target = "virtual-queue@1", deployment = "deployment:n0", concrete = "sha256:00", portable = "sha256:11", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
    vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
    %b.in = vmachine.buffer "b.in" transient step decode {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
    %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
    %e0 = vmachine.edge "e0" %b.e0 {producer = -1 : i64, consumer = 0 : i64, link = ""}
    %b.x = vmachine.buffer "b.x" kv {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
    %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
    %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
    %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
    %b.e1 = vmachine.buffer "b.e1" edge {name = "e1", stage = -1 : i64, device = "n0", space = "link", offset = 64 : i64, size = 4 : i64, alignment = 64 : i64}
    %e1 = vmachine.edge "e1" %b.e1 {producer = 0 : i64, consumer = -1 : i64, link = ""}
    vmachine.stage attributes {index = 0 : i64, device = "n0", layer_start = 0 : i64, layer_end = 1 : i64} {
      vmachine.step decode attributes {rows = 1 : i64} {
        %sync.0 = vmachine.token "sync.0" {signal = "c0", wait = "c1"}
        vmachine.queue attributes {engine = "queue.copy"} {
          vmachine.recv "i0" %e0 -> %b.in {cmd = "c0"}
          vmachine.signal "i1" %sync.0
        }
        vmachine.queue attributes {engine = "queue.compute"} {
          vmachine.wait "i2" %sync.0
          vmachine.kernel "i3" "rope" (%b.x, %b.t) -> (%b.y) start_pos {cmd = "c1", attrs = {head_dim = 8 : i64, n_heads = 8 : i64, rope_dim = 8 : i64}, block = 0 : i64}
          vmachine.sample "i4" %b.y -> %b.tok {cmd = "c2"}
          vmachine.send "i5" %b.tok -> %e1 {cmd = "c3"}
        }
      }
    }
  }
}

// CHECK:      vmachine.program attributes {target = "virtual-queue@1", deployment = "deployment:n0", concrete = "sha256:00", portable = "sha256:11", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
// CHECK-NEXT:   vmachine.abi {n_embd = 64 : i64, {{.*}} rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
// CHECK-NEXT:   %b.in = vmachine.buffer "b.in" transient step decode {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
// CHECK-NEXT:   %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
// CHECK-NEXT:   %e0 = vmachine.edge "e0" %b.e0 {producer = -1 : i64, consumer = 0 : i64, link = ""}
// CHECK-NEXT:   %b.x = vmachine.buffer "b.x" kv {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
// CHECK-NEXT:   %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
// CHECK-NEXT:   %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
// CHECK-NEXT:   %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
// CHECK-NEXT:   %b.e1 = vmachine.buffer "b.e1" edge {name = "e1", stage = -1 : i64, device = "n0", space = "link", offset = 64 : i64, size = 4 : i64, alignment = 64 : i64}
// CHECK-NEXT:   %e1 = vmachine.edge "e1" %b.e1 {producer = 0 : i64, consumer = -1 : i64, link = ""}
// CHECK-NEXT:   vmachine.stage attributes {index = 0 : i64, device = "n0", layer_start = 0 : i64, layer_end = 1 : i64} {
// CHECK-NEXT:     vmachine.step decode attributes {rows = 1 : i64} {
// CHECK-NEXT:       %sync.0 = vmachine.token "sync.0" {signal = "c0", wait = "c1"}
// CHECK-NEXT:       vmachine.queue attributes {engine = "queue.copy"} {
// CHECK-NEXT:         vmachine.recv "i0" %e0 -> %b.in {cmd = "c0"}
// CHECK-NEXT:         vmachine.signal "i1" %sync.0
// CHECK:            vmachine.queue attributes {engine = "queue.compute"} {
// CHECK-NEXT:         vmachine.wait "i2" %sync.0
// CHECK-NEXT:         vmachine.kernel "i3" "rope" (%b.x, %b.t) -> (%b.y) start_pos {cmd = "c1", attrs = {head_dim = 8 : i64, n_heads = 8 : i64, rope_dim = 8 : i64}, block = 0 : i64}
// CHECK-NEXT:         vmachine.sample "i4" %b.y -> %b.tok {cmd = "c2"}
// CHECK-NEXT:         vmachine.send "i5" %b.tok -> %e1 {cmd = "c3"}
