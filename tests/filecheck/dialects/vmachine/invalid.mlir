// RUN: %verify-located --parsing-diagnostics | filecheck %s
// Every vmachine verifier message, one case each: the op verifiers (ABI, buffer, stage/step/queue structure,
// the kernel ABI of one instruction) and the whole-program checks AB-M-1 that vmachine.program's verifier runs
// on parse (unique ids, edges between existing stages, buffers declared on the stage's device and bound by it,
// nothing read before it is written, signal/wait pairing, no deadlock). Each case is the sound one-stage
// program of ops.mlir with one change; the CHECK lines below the offending op show the message, its location
// and that op's text, never the whole module.

// program: no vmachine.abi
vmachine.program attributes {target = "virtual-queue@1", deployment = "d", concrete = "c", portable = "p", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
// CHECK:      invalid.mlir:[[# @LINE - 1]]:1: error: a vmachine.program needs exactly one vmachine.abi, found 0
// CHECK-NEXT: {{^}}  vmachine.program attributes {target = "virtual-queue@1",
  %b.in = vmachine.buffer "b.in" transient step decode {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.x = vmachine.buffer "b.x" kv {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
  %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e0 = vmachine.edge "e0" %b.e0 {producer = -1 : i64, consumer = 0 : i64, link = ""}
  %b.e1 = vmachine.buffer "b.e1" edge {name = "e1", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
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

// -----

// program: an op of another kind in the body
vmachine.program attributes {target = "virtual-queue@1", deployment = "d", concrete = "c", portable = "p", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
  builtin.module {
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: unexpected op 'builtin.module' in a vmachine.program body
  // CHECK-NEXT: {{^}}  builtin.module {
  }
  %b.in = vmachine.buffer "b.in" transient step decode {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.x = vmachine.buffer "b.x" kv {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
  %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e0 = vmachine.edge "e0" %b.e0 {producer = -1 : i64, consumer = 0 : i64, link = ""}
  %b.e1 = vmachine.buffer "b.e1" edge {name = "e1", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
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

// -----

// program: two instructions with one id
vmachine.program attributes {target = "virtual-queue@1", deployment = "d", concrete = "c", portable = "p", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
  %b.in = vmachine.buffer "b.in" transient step decode {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.x = vmachine.buffer "b.x" kv {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
  %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e0 = vmachine.edge "e0" %b.e0 {producer = -1 : i64, consumer = 0 : i64, link = ""}
  %b.e1 = vmachine.buffer "b.e1" edge {name = "e1", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
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
        vmachine.send "i4" %b.tok -> %e1 {cmd = "c3"}
        // CHECK:      invalid.mlir:[[# @LINE - 1]]:9: error: duplicate instruction id 'i4'
        // CHECK-NEXT: {{^}}  vmachine.send "i4" %b.tok -> %e1 {cmd = "c3"}
      }
    }
  }
}

// -----

// abi: a size that is not positive
vmachine.program attributes {target = "virtual-queue@1", deployment = "d", concrete = "c", portable = "p", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 0 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: vmachine.abi: max_seq_len must be positive, got 0
  // CHECK-NEXT: {{^}}  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64,
  %b.in = vmachine.buffer "b.in" transient step decode {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.x = vmachine.buffer "b.x" kv {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
  %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e0 = vmachine.edge "e0" %b.e0 {producer = -1 : i64, consumer = 0 : i64, link = ""}
  %b.e1 = vmachine.buffer "b.e1" edge {name = "e1", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
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

// -----

// abi: a negative optional field
vmachine.program attributes {target = "virtual-queue@1", deployment = "d", concrete = "c", portable = "p", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64, n_swa = -1 : i64}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: vmachine.abi: n_swa must be >= 0, got -1
  // CHECK-NEXT: {{^}}  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64,
  %b.in = vmachine.buffer "b.in" transient step decode {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.x = vmachine.buffer "b.x" kv {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
  %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e0 = vmachine.edge "e0" %b.e0 {producer = -1 : i64, consumer = 0 : i64, link = ""}
  %b.e1 = vmachine.buffer "b.e1" edge {name = "e1", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
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

// -----

// buffer: a misaligned offset
vmachine.program attributes {target = "virtual-queue@1", deployment = "d", concrete = "c", portable = "p", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
  %b.in = vmachine.buffer "b.in" transient step decode {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 3 : i64, size = 4 : i64, alignment = 64 : i64}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: buffer 'b.in': offset 3 / size 4 / alignment 64 invalid
  // CHECK-NEXT: {{^}}  %b.in = vmachine.buffer "b.in" transient step decode {name = "input", stage = 0 : i64,
  %b.x = vmachine.buffer "b.x" kv {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
  %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e0 = vmachine.edge "e0" %b.e0 {producer = -1 : i64, consumer = 0 : i64, link = ""}
  %b.e1 = vmachine.buffer "b.e1" edge {name = "e1", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
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

// -----

// buffer: an unknown lifetime (a parse error: the lifetime is a #vmachine<lifetime ...> enum)
vmachine.program attributes {target = "virtual-queue@1", deployment = "d", concrete = "c", portable = "p", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
  %b.in = vmachine.buffer "b.in" scratch step decode {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:34
  // CHECK-NEXT: {{^}}  %b.in = vmachine.buffer "b.in" scratch step decode {name = "input",
  // CHECK:      Expected `weight`, `kv`, `transient`, or `edge`.
  %b.x = vmachine.buffer "b.x" kv {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
  %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e0 = vmachine.edge "e0" %b.e0 {producer = -1 : i64, consumer = 0 : i64, link = ""}
  %b.e1 = vmachine.buffer "b.e1" edge {name = "e1", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
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

// -----

// buffer: an unknown step (a parse error: the step is a #vmachine<step ...> enum)
vmachine.program attributes {target = "virtual-queue@1", deployment = "d", concrete = "c", portable = "p", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
  %b.in = vmachine.buffer "b.in" transient step warmup {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:49
  // CHECK-NEXT: {{^}}  %b.in = vmachine.buffer "b.in" transient step warmup {name = "input",
  // CHECK:      Expected `prefill`, or `decode`.
  %b.x = vmachine.buffer "b.x" kv {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
  %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e0 = vmachine.edge "e0" %b.e0 {producer = -1 : i64, consumer = 0 : i64, link = ""}
  %b.e1 = vmachine.buffer "b.e1" edge {name = "e1", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
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

// -----

// stage: a reversed layer range
vmachine.program attributes {target = "virtual-queue@1", deployment = "d", concrete = "c", portable = "p", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
  %b.in = vmachine.buffer "b.in" transient step decode {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.x = vmachine.buffer "b.x" kv {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
  %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e0 = vmachine.edge "e0" %b.e0 {producer = -1 : i64, consumer = 0 : i64, link = ""}
  %b.e1 = vmachine.buffer "b.e1" edge {name = "e1", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e1 = vmachine.edge "e1" %b.e1 {producer = 0 : i64, consumer = -1 : i64, link = ""}
  vmachine.stage attributes {index = 0 : i64, device = "n0", layer_start = 2 : i64, layer_end = 1 : i64} {
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: stage 0: layer range is reversed
  // CHECK-NEXT: {{^}}  vmachine.stage attributes {index = 0 : i64, device = "n0",
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

// -----

// stage: an op that is not a step
vmachine.program attributes {target = "virtual-queue@1", deployment = "d", concrete = "c", portable = "p", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
  %b.in = vmachine.buffer "b.in" transient step decode {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.x = vmachine.buffer "b.x" kv {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
  %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e0 = vmachine.edge "e0" %b.e0 {producer = -1 : i64, consumer = 0 : i64, link = ""}
  %b.e1 = vmachine.buffer "b.e1" edge {name = "e1", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e1 = vmachine.edge "e1" %b.e1 {producer = 0 : i64, consumer = -1 : i64, link = ""}
  vmachine.stage attributes {index = 0 : i64, device = "n0", layer_start = 0 : i64, layer_end = 1 : i64} {
    builtin.module {
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: vmachine.stage may hold only vmachine.step ops, found 'builtin.module'
    // CHECK-NEXT: {{^}}  builtin.module {
    }
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

// -----

// stage: two steps of one name
vmachine.program attributes {target = "virtual-queue@1", deployment = "d", concrete = "c", portable = "p", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
  %b.in = vmachine.buffer "b.in" transient step decode {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.x = vmachine.buffer "b.x" kv {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
  %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e0 = vmachine.edge "e0" %b.e0 {producer = -1 : i64, consumer = 0 : i64, link = ""}
  %b.e1 = vmachine.buffer "b.e1" edge {name = "e1", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
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
    vmachine.step decode attributes {rows = 2 : i64} {
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: stage 0: duplicate step name 'decode'
    // CHECK-NEXT: {{^}}  vmachine.step decode attributes {rows = 2 : i64} {
      vmachine.queue attributes {engine = "queue.copy"} {
        vmachine.recv "i6" %e0 -> %b.in {cmd = "c6"}
      }
    }
  }
}

// -----

// step: no rows
vmachine.program attributes {target = "virtual-queue@1", deployment = "d", concrete = "c", portable = "p", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
  %b.in = vmachine.buffer "b.in" transient step decode {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.x = vmachine.buffer "b.x" kv {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
  %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e0 = vmachine.edge "e0" %b.e0 {producer = -1 : i64, consumer = 0 : i64, link = ""}
  %b.e1 = vmachine.buffer "b.e1" edge {name = "e1", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e1 = vmachine.edge "e1" %b.e1 {producer = 0 : i64, consumer = -1 : i64, link = ""}
  vmachine.stage attributes {index = 0 : i64, device = "n0", layer_start = 0 : i64, layer_end = 1 : i64} {
    vmachine.step decode attributes {rows = 0 : i64} {
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: step 'decode': rows must be >= 1
    // CHECK-NEXT: {{^}}  vmachine.step decode attributes {rows = 0 : i64} {
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

// -----

// step: an unknown step (a parse error: the step is a #vmachine<step ...> enum)
vmachine.program attributes {target = "virtual-queue@1", deployment = "d", concrete = "c", portable = "p", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
  %b.in = vmachine.buffer "b.in" transient step decode {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.x = vmachine.buffer "b.x" kv {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
  %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e0 = vmachine.edge "e0" %b.e0 {producer = -1 : i64, consumer = 0 : i64, link = ""}
  %b.e1 = vmachine.buffer "b.e1" edge {name = "e1", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e1 = vmachine.edge "e1" %b.e1 {producer = 0 : i64, consumer = -1 : i64, link = ""}
  vmachine.stage attributes {index = 0 : i64, device = "n0", layer_start = 0 : i64, layer_end = 1 : i64} {
    vmachine.step warmup attributes {rows = 1 : i64} {
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:19
    // CHECK-NEXT: {{^}}  vmachine.step warmup attributes {rows = 1 : i64} {
    // CHECK:      Expected `prefill`, or `decode`.
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

// -----

// step: an op that is not a queue
vmachine.program attributes {target = "virtual-queue@1", deployment = "d", concrete = "c", portable = "p", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
  %b.in = vmachine.buffer "b.in" transient step decode {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.x = vmachine.buffer "b.x" kv {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
  %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e0 = vmachine.edge "e0" %b.e0 {producer = -1 : i64, consumer = 0 : i64, link = ""}
  %b.e1 = vmachine.buffer "b.e1" edge {name = "e1", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e1 = vmachine.edge "e1" %b.e1 {producer = 0 : i64, consumer = -1 : i64, link = ""}
  vmachine.stage attributes {index = 0 : i64, device = "n0", layer_start = 0 : i64, layer_end = 1 : i64} {
    vmachine.step decode attributes {rows = 1 : i64} {
      %sync.0 = vmachine.token "sync.0" {signal = "c0", wait = "c1"}
      builtin.module {
      // CHECK:      invalid.mlir:[[# @LINE - 1]]:7: error: vmachine.step may hold only vmachine.token ops then vmachine.queue ops, found 'builtin.module'
      // CHECK-NEXT: {{^}}  builtin.module {
      }
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

// -----

// queue: an op that is not an instruction
vmachine.program attributes {target = "virtual-queue@1", deployment = "d", concrete = "c", portable = "p", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
  %b.in = vmachine.buffer "b.in" transient step decode {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.x = vmachine.buffer "b.x" kv {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
  %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e0 = vmachine.edge "e0" %b.e0 {producer = -1 : i64, consumer = 0 : i64, link = ""}
  %b.e1 = vmachine.buffer "b.e1" edge {name = "e1", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e1 = vmachine.edge "e1" %b.e1 {producer = 0 : i64, consumer = -1 : i64, link = ""}
  vmachine.stage attributes {index = 0 : i64, device = "n0", layer_start = 0 : i64, layer_end = 1 : i64} {
    vmachine.step decode attributes {rows = 1 : i64} {
      %sync.0 = vmachine.token "sync.0" {signal = "c0", wait = "c1"}
      vmachine.queue attributes {engine = "queue.copy"} {
        builtin.module {
        // CHECK:      invalid.mlir:[[# @LINE - 1]]:9: error: vmachine.queue may hold only instructions, found 'builtin.module'
        // CHECK-NEXT: {{^}}  builtin.module {
        }
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

// -----

// kernel: outside the kernel ABI
vmachine.program attributes {target = "virtual-queue@1", deployment = "d", concrete = "c", portable = "p", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
  %b.in = vmachine.buffer "b.in" transient step decode {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.x = vmachine.buffer "b.x" kv {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
  %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e0 = vmachine.edge "e0" %b.e0 {producer = -1 : i64, consumer = 0 : i64, link = ""}
  %b.e1 = vmachine.buffer "b.e1" edge {name = "e1", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
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
        vmachine.kernel "i3" "frobnicate" (%b.x, %b.t) -> (%b.y) start_pos {cmd = "c1", attrs = {head_dim = 8 : i64, n_heads = 8 : i64, rope_dim = 8 : i64}, block = 0 : i64}
        // CHECK:      invalid.mlir:[[# @LINE - 1]]:9: error: instruction 'i3' (command 'c1'): kernel 'frobnicate' is not in the virtual target's kernel ABI
        // CHECK-NEXT: {{^}}  vmachine.kernel "i3" "frobnicate" (
        vmachine.sample "i4" %b.y -> %b.tok {cmd = "c2"}
        vmachine.send "i5" %b.tok -> %e1 {cmd = "c3"}
      }
    }
  }
}

// -----

// kernel: wrong arity
vmachine.program attributes {target = "virtual-queue@1", deployment = "d", concrete = "c", portable = "p", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
  %b.in = vmachine.buffer "b.in" transient step decode {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.x = vmachine.buffer "b.x" kv {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
  %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e0 = vmachine.edge "e0" %b.e0 {producer = -1 : i64, consumer = 0 : i64, link = ""}
  %b.e1 = vmachine.buffer "b.e1" edge {name = "e1", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
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
        vmachine.kernel "i3" "rope" (%b.x) -> (%b.y) start_pos {cmd = "c1", attrs = {head_dim = 8 : i64, n_heads = 8 : i64, rope_dim = 8 : i64}, block = 0 : i64}
        // CHECK:      invalid.mlir:[[# @LINE - 1]]:9: error: instruction 'i3' (command 'c1'): kernel 'rope' takes 3 inputs and 1 outputs, got 2 and 1
        // CHECK-NEXT: {{^}}  vmachine.kernel "i3" "rope" (
        vmachine.sample "i4" %b.y -> %b.tok {cmd = "c2"}
        vmachine.send "i5" %b.tok -> %e1 {cmd = "c3"}
      }
    }
  }
}

// -----

// kernel: start_pos not last
vmachine.program attributes {target = "virtual-queue@1", deployment = "d", concrete = "c", portable = "p", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
  %b.in = vmachine.buffer "b.in" transient step decode {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.x = vmachine.buffer "b.x" kv {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
  %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e0 = vmachine.edge "e0" %b.e0 {producer = -1 : i64, consumer = 0 : i64, link = ""}
  %b.e1 = vmachine.buffer "b.e1" edge {name = "e1", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
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
        vmachine.kernel "i3" "rope" (%b.x, %b.t) -> (%b.y) {cmd = "c1", attrs = {head_dim = 8 : i64, n_heads = 8 : i64, rope_dim = 8 : i64}, block = 0 : i64}
        // CHECK:      invalid.mlir:[[# @LINE - 1]]:9: error: instruction 'i3' (command 'c1'): kernel 'rope' takes 'start_pos' as its last input
        // CHECK-NEXT: {{^}}  vmachine.kernel "i3" "rope" (
        vmachine.sample "i4" %b.y -> %b.tok {cmd = "c2"}
        vmachine.send "i5" %b.tok -> %e1 {cmd = "c3"}
      }
    }
  }
}

// -----

// kernel: a missing static attribute
vmachine.program attributes {target = "virtual-queue@1", deployment = "d", concrete = "c", portable = "p", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
  %b.in = vmachine.buffer "b.in" transient step decode {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.x = vmachine.buffer "b.x" kv {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
  %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e0 = vmachine.edge "e0" %b.e0 {producer = -1 : i64, consumer = 0 : i64, link = ""}
  %b.e1 = vmachine.buffer "b.e1" edge {name = "e1", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
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
        vmachine.kernel "i3" "rope" (%b.x, %b.t) -> (%b.y) start_pos {cmd = "c1", attrs = {head_dim = 8 : i64, n_heads = 8 : i64}, block = 0 : i64}
        // CHECK:      invalid.mlir:[[# @LINE - 1]]:9: error: instruction 'i3' (command 'c1'): kernel 'rope' needs attributes ['rope_dim']
        // CHECK-NEXT: {{^}}  vmachine.kernel "i3" "rope" (
        vmachine.sample "i4" %b.y -> %b.tok {cmd = "c2"}
        vmachine.send "i5" %b.tok -> %e1 {cmd = "c3"}
      }
    }
  }
}

// -----

// AB-M-1: queues that deadlock (each waits for a token the other signals later)
vmachine.program attributes {target = "virtual-queue@1", deployment = "d", concrete = "c", portable = "p", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
  %b.in = vmachine.buffer "b.in" transient step decode {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.x = vmachine.buffer "b.x" kv {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
  %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e0 = vmachine.edge "e0" %b.e0 {producer = -1 : i64, consumer = 0 : i64, link = ""}
  %b.e1 = vmachine.buffer "b.e1" edge {name = "e1", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e1 = vmachine.edge "e1" %b.e1 {producer = 0 : i64, consumer = -1 : i64, link = ""}
  vmachine.stage attributes {index = 0 : i64, device = "n0", layer_start = 0 : i64, layer_end = 1 : i64} {
    vmachine.step decode attributes {rows = 1 : i64} {
      %sync.1 = vmachine.token "sync.1" {signal = "c2", wait = "c0"}
      %sync.0 = vmachine.token "sync.0" {signal = "c0", wait = "c1"}
      vmachine.queue attributes {engine = "queue.copy"} {
        vmachine.recv "i0" %e0 -> %b.in {cmd = "c0"}
        vmachine.wait "i7" %sync.1
        // CHECK:      invalid.mlir:[[# @LINE - 1]]:9: error: [AB-M-1] a machine program must respect its dataflow and kernel ABI: step 'decode': queues deadlock: instruction 'i7' waits for token 'sync.1' that no runnable instruction signals
        // CHECK-NEXT: {{^}}  vmachine.wait "i7" %sync.1
        vmachine.signal "i1" %sync.0
      }
      vmachine.queue attributes {engine = "queue.compute"} {
        vmachine.wait "i2" %sync.0
        vmachine.kernel "i3" "rope" (%b.x, %b.t) -> (%b.y) start_pos {cmd = "c1", attrs = {head_dim = 8 : i64, n_heads = 8 : i64, rope_dim = 8 : i64}, block = 0 : i64}
        vmachine.sample "i4" %b.y -> %b.tok {cmd = "c2"}
        vmachine.signal "i8" %sync.1
        vmachine.send "i5" %b.tok -> %e1 {cmd = "c3"}
      }
    }
  }
}

// -----

// AB-M-1: a token signalled twice
vmachine.program attributes {target = "virtual-queue@1", deployment = "d", concrete = "c", portable = "p", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
  %b.in = vmachine.buffer "b.in" transient step decode {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.x = vmachine.buffer "b.x" kv {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
  %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e0 = vmachine.edge "e0" %b.e0 {producer = -1 : i64, consumer = 0 : i64, link = ""}
  %b.e1 = vmachine.buffer "b.e1" edge {name = "e1", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
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
        vmachine.signal "i6" %sync.0
        // CHECK:      invalid.mlir:[[# @LINE - 1]]:9: error: [AB-M-1] a machine program must respect its dataflow and kernel ABI: token 'sync.0' is signalled 2 times
        // CHECK-NEXT: {{^}}  vmachine.signal "i6" %sync.0
      }
    }
  }
}

// -----

// AB-M-1: a buffer id declared twice
vmachine.program attributes {target = "virtual-queue@1", deployment = "d", concrete = "c", portable = "p", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
  %b.in = vmachine.buffer "b.in" transient step decode {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.x = vmachine.buffer "b.x" kv {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
  %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.t2 = vmachine.buffer "b.t" weight {name = "rope.table2", stage = 0 : i64, device = "n0", space = "device", offset = 704 : i64, size = 64 : i64, alignment = 64 : i64}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: [AB-M-1] a machine program must respect its dataflow and kernel ABI: buffer id 'b.t' is declared twice
  // CHECK-NEXT: {{^}}  %b.t2 = vmachine.buffer "b.t" weight {name = "rope.table2", stage = 0 : i64,
  %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e0 = vmachine.edge "e0" %b.e0 {producer = -1 : i64, consumer = 0 : i64, link = ""}
  %b.e1 = vmachine.buffer "b.e1" edge {name = "e1", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
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

// -----

// AB-M-1: an edge id declared twice
vmachine.program attributes {target = "virtual-queue@1", deployment = "d", concrete = "c", portable = "p", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
  %b.in = vmachine.buffer "b.in" transient step decode {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.x = vmachine.buffer "b.x" kv {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
  %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e0 = vmachine.edge "e0" %b.e0 {producer = -1 : i64, consumer = 0 : i64, link = ""}
  %b.e1 = vmachine.buffer "b.e1" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e0b = vmachine.edge "e0" %b.e1 {producer = 0 : i64, consumer = -1 : i64, link = ""}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: [AB-M-1] a machine program must respect its dataflow and kernel ABI: edge id 'e0' is declared twice
  // CHECK-NEXT: {{^}}  %e0b = vmachine.edge "e0" %b.e1 {
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
        vmachine.send "i5" %b.tok -> %e0b {cmd = "c3"}
      }
    }
  }
}

// -----

// AB-M-1: a stage declared twice
vmachine.program attributes {target = "virtual-queue@1", deployment = "d", concrete = "c", portable = "p", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
  %b.in = vmachine.buffer "b.in" transient step decode {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.x = vmachine.buffer "b.x" kv {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
  %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e0 = vmachine.edge "e0" %b.e0 {producer = -1 : i64, consumer = 0 : i64, link = ""}
  %b.e1 = vmachine.buffer "b.e1" edge {name = "e1", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
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
  vmachine.stage attributes {index = 0 : i64, device = "n0", layer_start = 1 : i64, layer_end = 2 : i64} {
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: [AB-M-1] a machine program must respect its dataflow and kernel ABI: stage 0 is declared twice
  // CHECK-NEXT: {{^}}  vmachine.stage attributes {index = 0 : i64, device = "n0",
    vmachine.step decode attributes {rows = 1 : i64} {
      vmachine.queue attributes {engine = "queue.copy"} {
        vmachine.recv "i6" %e0 -> %b.in {cmd = "c6"}
      }
    }
  }
}

// -----

// AB-M-1: an edge to a stage the program lacks
vmachine.program attributes {target = "virtual-queue@1", deployment = "d", concrete = "c", portable = "p", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
  %b.in = vmachine.buffer "b.in" transient step decode {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.x = vmachine.buffer "b.x" kv {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
  %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e0 = vmachine.edge "e0" %b.e0 {producer = -1 : i64, consumer = 0 : i64, link = ""}
  %b.e1 = vmachine.buffer "b.e1" edge {name = "e1", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e1 = vmachine.edge "e1" %b.e1 {producer = 0 : i64, consumer = 3 : i64, link = ""}
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: [AB-M-1] a machine program must respect its dataflow and kernel ABI: edge 'e1': consumer 3 is neither a stage of the program nor -1 (the orchestrator)
  // CHECK-NEXT: {{^}}  %e1 = vmachine.edge "e1" %b.e1 {
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

// -----

// AB-M-1: a buffer on another device than the stage
vmachine.program attributes {target = "virtual-queue@1", deployment = "d", concrete = "c", portable = "p", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
  %b.in = vmachine.buffer "b.in" transient step decode {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.x = vmachine.buffer "b.x" kv {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n1", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
  %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e0 = vmachine.edge "e0" %b.e0 {producer = -1 : i64, consumer = 0 : i64, link = ""}
  %b.e1 = vmachine.buffer "b.e1" edge {name = "e1", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
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
        // CHECK:      invalid.mlir:[[# @LINE - 1]]:9: error: [AB-M-1] a machine program must respect its dataflow and kernel ABI: instruction 'i3' (command 'c1'): buffer 'b.t' is on device 'n1', not the stage's 'n0'
        // CHECK-NEXT: {{^}}  vmachine.kernel "i3" "rope" (
        vmachine.sample "i4" %b.y -> %b.tok {cmd = "c2"}
        vmachine.send "i5" %b.tok -> %e1 {cmd = "c3"}
      }
    }
  }
}

// -----

// AB-M-1: a buffer of another stage
vmachine.program attributes {target = "virtual-queue@1", deployment = "d", concrete = "c", portable = "p", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
  %b.in = vmachine.buffer "b.in" transient step decode {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.x = vmachine.buffer "b.x" kv {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
  %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 1 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e0 = vmachine.edge "e0" %b.e0 {producer = -1 : i64, consumer = 0 : i64, link = ""}
  %b.e1 = vmachine.buffer "b.e1" edge {name = "e1", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
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
        // CHECK:      invalid.mlir:[[# @LINE - 1]]:9: error: [AB-M-1] a machine program must respect its dataflow and kernel ABI: instruction 'i3' (command 'c1'): buffer 'b.y' belongs to stage 1 step 'decode'
        // CHECK-NEXT: {{^}}  vmachine.kernel "i3" "rope" (
        vmachine.sample "i4" %b.y -> %b.tok {cmd = "c2"}
        vmachine.send "i5" %b.tok -> %e1 {cmd = "c3"}
      }
    }
  }
}

// -----

// AB-M-1: a kernel reading a step buffer nothing wrote
vmachine.program attributes {target = "virtual-queue@1", deployment = "d", concrete = "c", portable = "p", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
  %b.in = vmachine.buffer "b.in" transient step decode {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.x = vmachine.buffer "b.x" kv step decode {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
  %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e0 = vmachine.edge "e0" %b.e0 {producer = -1 : i64, consumer = 0 : i64, link = ""}
  %b.e1 = vmachine.buffer "b.e1" edge {name = "e1", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
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
        // CHECK:      invalid.mlir:[[# @LINE - 1]]:9: error: [AB-M-1] a machine program must respect its dataflow and kernel ABI: instruction 'i3' (command 'c1'): kernel 'rope' reads buffer 'b.x' before it is written in step 'decode'
        // CHECK-NEXT: {{^}}  vmachine.kernel "i3" "rope" (
        vmachine.sample "i4" %b.y -> %b.tok {cmd = "c2"}
        vmachine.send "i5" %b.tok -> %e1 {cmd = "c3"}
      }
    }
  }
}

// -----

// AB-M-1: a receive on an edge another stage consumes
vmachine.program attributes {target = "virtual-queue@1", deployment = "d", concrete = "c", portable = "p", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
  %b.in = vmachine.buffer "b.in" transient step decode {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.x = vmachine.buffer "b.x" kv {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
  %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e0 = vmachine.edge "e0" %b.e0 {producer = 0 : i64, consumer = -1 : i64, link = ""}
  %b.e1 = vmachine.buffer "b.e1" edge {name = "e1", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e1 = vmachine.edge "e1" %b.e1 {producer = 0 : i64, consumer = -1 : i64, link = ""}
  vmachine.stage attributes {index = 0 : i64, device = "n0", layer_start = 0 : i64, layer_end = 1 : i64} {
    vmachine.step decode attributes {rows = 1 : i64} {
      %sync.0 = vmachine.token "sync.0" {signal = "c0", wait = "c1"}
      vmachine.queue attributes {engine = "queue.copy"} {
        vmachine.recv "i0" %e0 -> %b.in {cmd = "c0"}
        // CHECK:      invalid.mlir:[[# @LINE - 1]]:9: error: [AB-M-1] a machine program must respect its dataflow and kernel ABI: instruction 'i0' (command 'c0'): receives on edge 'e0' whose consumer is stage -1
        // CHECK-NEXT: {{^}}  vmachine.recv "i0" %e0 -> %b.in {cmd = "c0"}
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

// -----

// AB-M-1: a send on an edge another stage produces
vmachine.program attributes {target = "virtual-queue@1", deployment = "d", concrete = "c", portable = "p", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
  %b.in = vmachine.buffer "b.in" transient step decode {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.x = vmachine.buffer "b.x" kv {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
  %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e0 = vmachine.edge "e0" %b.e0 {producer = -1 : i64, consumer = 0 : i64, link = ""}
  %b.e1 = vmachine.buffer "b.e1" edge {name = "e1", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e1 = vmachine.edge "e1" %b.e1 {producer = -1 : i64, consumer = 0 : i64, link = ""}
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
        // CHECK:      invalid.mlir:[[# @LINE - 1]]:9: error: [AB-M-1] a machine program must respect its dataflow and kernel ABI: instruction 'i5' (command 'c3'): sends on edge 'e1' whose producer is stage -1
        // CHECK-NEXT: {{^}}  vmachine.send "i5" %b.tok -> %e1 {cmd = "c3"}
      }
    }
  }
}

// -----

// AB-M-1: a send of a buffer before it is written
vmachine.program attributes {target = "virtual-queue@1", deployment = "d", concrete = "c", portable = "p", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
  %b.in = vmachine.buffer "b.in" transient step decode {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.x = vmachine.buffer "b.x" kv {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
  %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e0 = vmachine.edge "e0" %b.e0 {producer = -1 : i64, consumer = 0 : i64, link = ""}
  %b.e1 = vmachine.buffer "b.e1" edge {name = "e1", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
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
        vmachine.send "i5" %b.tok -> %e1 {cmd = "c3"}
        // CHECK:      invalid.mlir:[[# @LINE - 1]]:9: error: [AB-M-1] a machine program must respect its dataflow and kernel ABI: instruction 'i5' (command 'c3'): sends buffer 'b.tok' before it is written in step 'decode'
        // CHECK-NEXT: {{^}}  vmachine.send "i5" %b.tok -> %e1 {cmd = "c3"}
        vmachine.sample "i4" %b.y -> %b.tok {cmd = "c2"}
      }
    }
  }
}

// -----

// AB-M-1: a sample of a buffer before it is written
vmachine.program attributes {target = "virtual-queue@1", deployment = "d", concrete = "c", portable = "p", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
  %b.in = vmachine.buffer "b.in" transient step decode {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.x = vmachine.buffer "b.x" kv {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
  %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e0 = vmachine.edge "e0" %b.e0 {producer = -1 : i64, consumer = 0 : i64, link = ""}
  %b.e1 = vmachine.buffer "b.e1" edge {name = "e1", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
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
        vmachine.sample "i4" %b.tok -> %b.tok {cmd = "c2"}
        // CHECK:      invalid.mlir:[[# @LINE - 1]]:9: error: [AB-M-1] a machine program must respect its dataflow and kernel ABI: instruction 'i4' (command 'c2'): samples buffer 'b.tok' before it is written in step 'decode'
        // CHECK-NEXT: {{^}}  vmachine.sample "i4" %b.tok -> %b.tok {cmd = "c2"}
        vmachine.send "i5" %b.tok -> %e1 {cmd = "c3"}
      }
    }
  }
}

// -----

// AB-M-1: a wait for a token nothing signals
vmachine.program attributes {target = "virtual-queue@1", deployment = "d", concrete = "c", portable = "p", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
  %b.in = vmachine.buffer "b.in" transient step decode {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.x = vmachine.buffer "b.x" kv {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
  %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e0 = vmachine.edge "e0" %b.e0 {producer = -1 : i64, consumer = 0 : i64, link = ""}
  %b.e1 = vmachine.buffer "b.e1" edge {name = "e1", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e1 = vmachine.edge "e1" %b.e1 {producer = 0 : i64, consumer = -1 : i64, link = ""}
  vmachine.stage attributes {index = 0 : i64, device = "n0", layer_start = 0 : i64, layer_end = 1 : i64} {
    vmachine.step decode attributes {rows = 1 : i64} {
      %sync.0 = vmachine.token "sync.0" {signal = "c0", wait = "c1"}
      %sync.7 = vmachine.token "sync.7" {signal = "c0", wait = "c1"}
      vmachine.queue attributes {engine = "queue.copy"} {
        vmachine.recv "i0" %e0 -> %b.in {cmd = "c0"}
        vmachine.signal "i1" %sync.0
      }
      vmachine.queue attributes {engine = "queue.compute"} {
        vmachine.wait "i2" %sync.7
        // CHECK:      invalid.mlir:[[# @LINE - 1]]:9: error: [AB-M-1] a machine program must respect its dataflow and kernel ABI: instruction 'i2' (command 'c1'): waits for token 'sync.7' that nothing signals
        // CHECK-NEXT: {{^}}  vmachine.wait "i2" %sync.7
        vmachine.kernel "i3" "rope" (%b.x, %b.t) -> (%b.y) start_pos {cmd = "c1", attrs = {head_dim = 8 : i64, n_heads = 8 : i64, rope_dim = 8 : i64}, block = 0 : i64}
        vmachine.sample "i4" %b.y -> %b.tok {cmd = "c2"}
        vmachine.send "i5" %b.tok -> %e1 {cmd = "c3"}
      }
    }
  }
}

// -----

// AB-M-1: a wait for a token of a later stage
vmachine.program attributes {target = "virtual-queue@1", deployment = "d", concrete = "c", portable = "p", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
  %b.in = vmachine.buffer "b.in" transient step decode {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.x = vmachine.buffer "b.x" kv {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
  %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e0 = vmachine.edge "e0" %b.e0 {producer = -1 : i64, consumer = 0 : i64, link = ""}
  %b.e1 = vmachine.buffer "b.e1" edge {name = "e1", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e1 = vmachine.edge "e1" %b.e1 {producer = 0 : i64, consumer = -1 : i64, link = ""}
  vmachine.stage attributes {index = 0 : i64, device = "n0", layer_start = 0 : i64, layer_end = 1 : i64} {
    vmachine.step decode attributes {rows = 1 : i64} {
      %sync.0 = vmachine.token "sync.0" {signal = "c0", wait = "c1"}
      %sync.9 = vmachine.token "sync.9" {signal = "c0", wait = "c1"}
      vmachine.queue attributes {engine = "queue.copy"} {
        vmachine.recv "i0" %e0 -> %b.in {cmd = "c0"}
        vmachine.signal "i1" %sync.0
      }
      vmachine.queue attributes {engine = "queue.compute"} {
        vmachine.wait "i2" %sync.9
        // CHECK:      invalid.mlir:[[# @LINE - 1]]:9: error: [AB-M-1] a machine program must respect its dataflow and kernel ABI: instruction 'i2' (command 'c1'): waits for token 'sync.9' signalled by later stage 1
        // CHECK-NEXT: {{^}}  vmachine.wait "i2" %sync.9
        vmachine.kernel "i3" "rope" (%b.x, %b.t) -> (%b.y) start_pos {cmd = "c1", attrs = {head_dim = 8 : i64, n_heads = 8 : i64, rope_dim = 8 : i64}, block = 0 : i64}
        vmachine.sample "i4" %b.y -> %b.tok {cmd = "c2"}
        vmachine.send "i5" %b.tok -> %e1 {cmd = "c3"}
      }
    }
  }
  vmachine.stage attributes {index = 1 : i64, device = "n0", layer_start = 1 : i64, layer_end = 2 : i64} {
    vmachine.step decode attributes {rows = 1 : i64} {
      %sync.9 = vmachine.token "sync.9" {signal = "c0", wait = "c1"}
      vmachine.queue attributes {engine = "queue.compute"} {
        vmachine.signal "i9" %sync.9
      }
    }
  }
}

// -----

// program: an instruction reads a value no vmachine.buffer of the program defines (one from outside it)
%ghost = builtin.unrealized_conversion_cast to !vmachine.buffer
vmachine.program attributes {target = "virtual-queue@1", deployment = "d", concrete = "c", portable = "p", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
  %b.in = vmachine.buffer "b.in" transient step decode {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.x = vmachine.buffer "b.x" kv {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
  %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e0 = vmachine.edge "e0" %b.e0 {producer = -1 : i64, consumer = 0 : i64, link = ""}
  %b.e1 = vmachine.buffer "b.e1" edge {name = "e1", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
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
        vmachine.kernel "i3" "rope" (%ghost, %b.t) -> (%b.y) start_pos {cmd = "c1", attrs = {head_dim = 8 : i64, n_heads = 8 : i64, rope_dim = 8 : i64}, block = 0 : i64}
        // CHECK:      invalid.mlir:[[# @LINE - 1]]:9: error: [AB-M-1] a machine program must respect its dataflow and kernel ABI: instruction 'i3' (command 'c1'): names buffer '%ghost' that the program does not declare
        // CHECK-NEXT: {{^}}  vmachine.kernel "i3" "rope" (%ghost, %b.t)
        vmachine.sample "i4" %b.y -> %b.tok {cmd = "c2"}
        vmachine.send "i5" %b.tok -> %e1 {cmd = "c3"}
      }
    }
  }
}


// -----

// program: an instruction uses a value no vmachine.edge of the program defines (one from outside it)
%nowhere = builtin.unrealized_conversion_cast to !vmachine.edge
vmachine.program attributes {target = "virtual-queue@1", deployment = "d", concrete = "c", portable = "p", binder = "list-schedule", engine = "pipeplan-vmachine/1"} {
  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
  %b.in = vmachine.buffer "b.in" transient step decode {name = "input", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.x = vmachine.buffer "b.x" kv {name = "blk.0.q", stage = 0 : i64, device = "n0", space = "device", offset = 64 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.t = vmachine.buffer "b.t" weight {name = "rope.table", stage = 0 : i64, device = "n0", space = "device", offset = 320 : i64, size = 64 : i64, alignment = 64 : i64}
  %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 384 : i64, size = 256 : i64, alignment = 64 : i64}
  %b.tok = vmachine.buffer "b.tok" transient step decode {name = "token", stage = 0 : i64, device = "n0", space = "device", offset = 640 : i64, size = 4 : i64, alignment = 64 : i64}
  %b.e0 = vmachine.buffer "b.e0" edge {name = "e0", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e0 = vmachine.edge "e0" %b.e0 {producer = -1 : i64, consumer = 0 : i64, link = ""}
  %b.e1 = vmachine.buffer "b.e1" edge {name = "e1", stage = -1 : i64, device = "n0", space = "link", offset = 0 : i64, size = 4 : i64, alignment = 64 : i64}
  %e1 = vmachine.edge "e1" %b.e1 {producer = 0 : i64, consumer = -1 : i64, link = ""}
  vmachine.stage attributes {index = 0 : i64, device = "n0", layer_start = 0 : i64, layer_end = 1 : i64} {
    vmachine.step decode attributes {rows = 1 : i64} {
      %sync.0 = vmachine.token "sync.0" {signal = "c0", wait = "c1"}
      vmachine.queue attributes {engine = "queue.copy"} {
        vmachine.recv "i0" %nowhere -> %b.in {cmd = "c0"}
        // CHECK:      invalid.mlir:[[# @LINE - 1]]:9: error: [AB-M-1] a machine program must respect its dataflow and kernel ABI: instruction 'i0' (command 'c0'): uses edge '%nowhere' that the program does not declare
        // CHECK-NEXT: {{^}}  vmachine.recv "i0" %nowhere -> %b.in {cmd = "c0"}
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

