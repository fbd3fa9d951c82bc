// RUN: %verify-located --parsing-diagnostics | filecheck %s

// Verifier messages of the pplan dialect, one case each: buffer types (lifetime, alignment, dtype and
// block size), declarations, tasks (token, in-place versions, byte accounting, edge transfers, matmul
// work), stage/step regions, the plan's SSA dataflow (def-before-use is acyclicity, no read of a
// version updated in place, unique task ids), binding contents.
// The CHECK lines of a case sit below the offending op: its location (that op's line), the message and
// the op's text (a parse error: the source line), never the whole module.

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.weight 0 "w" : !pplan.buffer<1x4xf32, scratch>
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3
  // CHECK-NEXT: %0 = pplan.weight 0 "w" : !pplan.buffer<1x4xf32, scratch>
  // CHECK:      [AB-R-6] buffer type: lifetime 'scratch' is not one of ['weight', 'kv', 'transient', 'edge']
}

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.weight 0 "w" : !pplan.buffer<1x4xf32, weight, align 48>
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3
  // CHECK-NEXT: %0 = pplan.weight 0 "w" : !pplan.buffer<1x4xf32, weight, align 48>
  // CHECK:      [AB-R-6] buffer type: alignment 48 is not a power of two
}

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.weight 0 "w" : !pplan.buffer<1x128xq4_k, weight>
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: [AB-R-6] buffer type !pplan.buffer<1x128xq4_k, weight>: innermost dimension of shape [1, 128] is not a multiple of the q4_k block size 256
  // CHECK-NEXT: {{^}}  %0 = pplan.weight 0 "w" : !pplan.buffer<1x128xq4_k, weight>
}

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.weight 0 "w" : !pplan.buffer<1x4xf7, weight>
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: [AB-R-6] buffer type !pplan.buffer<1x4xf7, weight>: unknown dtype 'f7'
  // CHECK-NEXT: {{^}}  %0 = pplan.weight 0 "w" : !pplan.buffer<1x4xf7, weight>
}

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.weight 0 "w" : !pplan.buffer<1x4xf32, kv>
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: [AB-R-6] pplan.weight 'w': its buffer type must have lifetime weight, got !pplan.buffer<1x4xf32, kv>
  // CHECK-NEXT: {{^}}  %0 = pplan.weight 0 "w" : !pplan.buffer<1x4xf32, kv>
}

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.kv -1 "blk.0.cache_k" : !pplan.buffer<4x1x4xf32, kv>
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: [AB-R-6] pplan.kv 'blk.0.cache_k': stage -1 < 0
  // CHECK-NEXT: {{^}}  %0 = pplan.kv -1 "blk.0.cache_k" : !pplan.buffer<4x1x4xf32, kv>
}

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32>
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: [AB-R-6] edge object e0: its buffer type must have lifetime edge
  // CHECK-NEXT: {{^}}  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32>
}

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task "recv.e0" recv(%0) -> "x" at "edge:e0" work [1, 4] bytes [16, 16] token : !pplan.buffer<1x4xf32>
      // CHECK:      invalid.mlir:[[# @LINE - 1]]:7: error: [AB-S-1] task 'recv.e0': a task with 'token' yields exactly one !pplan.token (and only it)
      // CHECK-NEXT: {{^}}  %0 = pplan.task recv(%1) -> "x" at "edge:e0" token : !pplan.buffer<1x4
      pplan.yield
    }
    pplan.yield
  }
}

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  %9 = pplan.weight 0 "w" : !pplan.buffer<1x4xf32, weight>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task "recv.e0" recv(%0) -> "x" at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32>
      %2 = pplan.task "send.e0" send(%1) updates(%0) at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x8xf32, edge>
      // CHECK:      invalid.mlir:[[# @LINE - 1]]:7: error: [AB-S-4] task 'send.e0': results must be the new versions of its updates (same types, same order)
      // CHECK-NEXT: {{^}}  %0 = pplan.task send(%1) updates(%2) at "edge:e0" work [1, 4] bytes [1
      pplan.yield
    }
    pplan.yield
  }
}

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task "recv.e0" recv(%0) -> "x" at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32>
      %2 = pplan.task "send.e0" send(%1) updates(%0) -> "y" at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32, edge>
      // CHECK:      invalid.mlir:[[# @LINE - 1]]:7: error: [AB-S-4] task 'send.e0': an in-place task names no fresh result
      // CHECK-NEXT: {{^}}  %0 = pplan.task send(%1) updates(%2) -> "y" at "edge:e0" : !pplan.buff
      pplan.yield
    }
    pplan.yield
  }
}

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task "recv.e0" recv(%0) at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32>
      // CHECK:      invalid.mlir:[[# @LINE - 1]]:7: error: [AB-S-4] task 'recv.e0': a task without updates yields one fresh buffer named by 'out'
      // CHECK-NEXT: {{^}}  %0 = pplan.task recv(%1) at "edge:e0" work [1, 4] : !pplan.buffer<1x4x
      pplan.yield
    }
    pplan.yield
  }
}

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task "recv.e0" recv(%0) -> "x" at "edge:e0" work [1, 4] bytes [16] : !pplan.buffer<1x4xf32>
      // CHECK:      invalid.mlir:[[# @LINE - 1]]:7: error: [AB-R-6] task 'recv.e0': one byte count per access (reads, then writes) expected, got 1 for 2
      // CHECK-NEXT: {{^}}  %0 = pplan.task recv(%1) -> "x" at "edge:e0" bytes [16] : !pplan.buffe
      pplan.yield
    }
    pplan.yield
  }
}

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task "recv.e0" recv(%0) -> "x" at "edge:e0" work [1, 4] bytes [16, -1] : !pplan.buffer<1x4xf32>
      // CHECK:      invalid.mlir:[[# @LINE - 1]]:7: error: [AB-R-6] task 'recv.e0': negative byte or flop count
      // CHECK-NEXT: {{^}}  %0 = pplan.task recv(%1) -> "x" at "edge:e0" bytes [16, -1] : !pplan.b
      pplan.yield
    }
    pplan.yield
  }
}

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task "recv.e0" recv(%0) -> "x" at "edge:e0" work [1, 4] bytes [32, 16] : !pplan.buffer<1x4xf32>
      // CHECK:      invalid.mlir:[[# @LINE - 1]]:7: error: [AB-R-6] task 'recv.e0': access 0 moves 32 bytes of a buffer holding 16
      // CHECK-NEXT: {{^}}  %0 = pplan.task recv(%1) -> "x" at "edge:e0" bytes [32, 16] : !pplan.b
      pplan.yield
    }
    pplan.yield
  }
}

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.weight 0 "w" : !pplan.buffer<1x4xf32, weight>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task "recv.e0" recv(%0) -> "x" at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32>
      // CHECK:      invalid.mlir:[[# @LINE - 1]]:7: error: [AB-L-2] task 'recv.e0': a recv reads exactly one edge object
      // CHECK-NEXT: {{^}}  %0 = pplan.task recv(%1) -> "x" at "edge:e0" : !pplan.buffer<1x4xf32>
      pplan.yield
    }
    pplan.yield
  }
}

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task "recv.e0" recv(%0) -> "x" at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32>
      %2 = pplan.task "mm" matmul(%1, %1) -> "y" at "m" work [1, 4, 4] flops 7 bytes [16, 16, 16] : !pplan.buffer<1x4xf32>
      // CHECK:      invalid.mlir:[[# @LINE - 1]]:7: error: [AB-L-2] task 'mm': matmul flops 7 inconsistent with work shape [M, N, K] = [1, 4, 4] (expected 2*M*N*K)
      // CHECK-NEXT: {{^}}  %0 = pplan.task "mm" matmul(%1, %1) -> "y" at "m" work [1, 4, 4] flops
      pplan.yield
    }
    pplan.yield
  }
}

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task "recv.e0" scatter(%0) -> "x" at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32>
      // CHECK:      invalid.mlir:[[# @LINE - 1]]:40
      // CHECK-NEXT: %1 = pplan.task "recv.e0" scatter(%0) -> "x" at "edge:e0" work [1, 4] 
      // CHECK:      [AB-L-1] unknown portable op 'scatter'
      pplan.yield
    }
    pplan.yield
  }
}

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task "recv.e0" recv(%5) -> "x" at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32>
      // CHECK:      invalid.mlir:[[# @LINE - 1]]:38
      // CHECK-NEXT: %1 = pplan.task "recv.e0" recv(%5) -> "x" at "edge:e0" work [1, 4] byt
      // CHECK:      [AB-S-1] value %5 is used before its definition
      pplan.yield
    }
    pplan.yield
  }
}

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    "pplan.stage"() <{index = 0 : i64}> ({
      %1 = pplan.task "recv.e0" recv(%0) -> "x" at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32>
    }) : () -> ()
    pplan.yield
  }
}
// CHECK: Operation pplan.task terminates block in single-block region but is not a terminator

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    %5 = "pplan.stage"() <{index = 0 : i64}> ({
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: [AB-S-1] stage 0: results must match the yielded values' types
    // CHECK-NEXT: {{^}}  %0 = pplan.stage 0 {
      %1 = pplan.task "recv.e0" recv(%0) -> "x" at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32>
      pplan.yield
    }) : () -> !pplan.buffer<1x4xf32>
    pplan.yield
  }
}

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
    // CHECK:      invalid.mlir:[[# @LINE - 1]]:5: error: [AB-S-1] stage 0: unexpected op pplan.weight (only pplan.task)
    // CHECK-NEXT: {{^}}  pplan.stage 0 {
      %1 = pplan.task "recv.e0" recv(%0) -> "x" at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32>
      %2 = pplan.weight 0 "w" : !pplan.buffer<1x4xf32, weight>
      pplan.yield
    }
    pplan.yield
  }
}

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: [AB-S-1] step decode: unexpected op pplan.weight (only pplan.stage)
  // CHECK-NEXT: {{^}}  pplan.step decode {
    %1 = pplan.weight 0 "w" : !pplan.buffer<1x4xf32, weight>
    pplan.yield
  }
}

// -----

pplan.plan @p attributes {stage_count = 2 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: [AB-S-1] step decode: stages must appear once each, in increasing order, got [1, 0]
  // CHECK-NEXT: {{^}}  pplan.step decode {
    pplan.stage 1 {
      pplan.yield
    }
    pplan.stage 0 {
      pplan.yield
    }
    pplan.yield
  }
}

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step warmup {
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:21
  // CHECK-NEXT: pplan.step warmup {
  // CHECK:      [AB-S-1] step 'warmup' is not one of ['prefill', 'decode']
    pplan.stage 0 {
      %1 = pplan.task "recv.e0" recv(%0) -> "x" at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32>
      pplan.yield
    }
    pplan.yield
  }
}

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
// CHECK:      invalid.mlir:[[# @LINE - 1]]:1: error: [AB-S-3] plan @p: stage 3 outside [0, 1)
// CHECK-NEXT: {{^}}  pplan.plan @p attributes {stage_count = 1 : i64,
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 3 {
      %1 = pplan.task "recv.e0" recv(%0) -> "x" at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32>
      pplan.yield
    }
    pplan.yield
  }
}

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
// CHECK:      invalid.mlir:[[# @LINE - 1]]:1: error: [AB-S-1] plan @p: unexpected op pplan.yield (declarations and pplan.step only)
// CHECK-NEXT: {{^}}  pplan.plan @p attributes {stage_count = 1 : i64,
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.yield
}

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
// CHECK:      invalid.mlir:[[# @LINE - 1]]:1: error: [AB-S-1] plan @p: steps must appear once each, prefill before decode, got ['decode', 'prefill']
// CHECK-NEXT: {{^}}  pplan.plan @p attributes {stage_count = 1 : i64,
  pplan.step decode {
    pplan.yield
  }
  pplan.step prefill {
    pplan.yield
  }
}

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      "pplan.task"(%2) <{task = "a", op = #pplan<op last_row>, out = "y", model_op = "m", block = -1 : i64, flops = 0 : i64, work = array<i64: 1, 4>, bytes = array<i64: 16, 16>, operandSegmentSizes = array<i32: 1, 0, 0>}> : (!pplan.buffer<1x4xf32>) -> !pplan.buffer<1x4xf32>
      // CHECK:      invalid.mlir:[[# @LINE - 1]]:7: error: [AB-S-1] plan @p: task 'a' uses a value before its definition (SSA def-before-use: dependencies closed and acyclic)
      // CHECK-NEXT: {{^}}  %0 = pplan.task "a" last_row(%1) -> "y" at "m" : !pplan.buffer<1x4xf32
      %2 = pplan.task "recv.e0" recv(%0) -> "x" at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32>
      pplan.yield
    }
    pplan.yield
  }
}

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task "recv.e0" recv(%0) -> "x" at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32>
      %2 = pplan.task "send.e0" send(%1) updates(%0) at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32, edge>
      %3 = pplan.task "recv.again" recv(%0) -> "z" at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32>
      // CHECK:      invalid.mlir:[[# @LINE - 1]]:7: error: [AB-S-4] plan @p: task 'recv.again' reads a buffer version that task 'decode.s0.send.e0' already updated in place (use its result)
      // CHECK-NEXT: {{^}}  %0 = pplan.task "recv.again" recv(%1) -> "z" at "edge:e0" : !pplan.buf
      pplan.yield
    }
    pplan.yield
  }
}

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task "recv.e0" recv(%0) -> "x" at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32>
      %2 = pplan.task "recv.e0" recv(%0) -> "x" at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32>
      // CHECK:      invalid.mlir:[[# @LINE - 1]]:7: error: [AB-R-1] plan @p: task id 'decode.s0.recv.e0' declared twice
      // CHECK-NEXT: {{^}}  %0 = pplan.task recv(%1) -> "x" at "edge:e0" : !pplan.buffer<1x4xf32>
      pplan.yield
    }
    pplan.yield
  }
}

// -----

pplan.deployment_binding @deployment {devices = [{bandwidth_bytes_per_s = 1.0e+11 : f64, flops_per_s = 1.0e+12 : f64, id = "n0", link_bandwidth_bytes_per_s = 1.0e+09 : f64, memory_bytes = 100 : i64, reserved_bytes = 160 : i64}], stage_devices = ["n0"], topology = "chain"}
// CHECK:      invalid.mlir:[[# @LINE - 1]]:1: error: deployment binding: device n0 reserves 160 bytes but has capacity 100
// CHECK-NEXT: {{^}}  pplan.deployment_binding @deployment {devices = [{bandwidth_bytes_per_

// -----

pplan.deployment_binding @deployment {devices = [{bandwidth_bytes_per_s = 1.0e+11 : f64, flops_per_s = 1.0e+12 : f64, id = "n0", link_bandwidth_bytes_per_s = 1.0e+09 : f64, memory_bytes = 100 : i64, reserved_bytes = 0 : i64}], stage_devices = ["n1"], topology = "chain"}
// CHECK:      invalid.mlir:[[# @LINE - 1]]:1: error: deployment binding: stage 0 device 'n1' is not a declared device
// CHECK-NEXT: {{^}}  pplan.deployment_binding @deployment {devices = [{bandwidth_bytes_per_

// -----

pplan.evidence_policy @policy {fallback = "sometimes", max_age_s = 0 : i64, providers = ["roofline"], revision = "r1", uncertainty_budget = 1.0 : f64}
// CHECK:      invalid.mlir:[[# @LINE - 1]]:1: error: evidence policy: fallback 'sometimes' is not one of ['allow', 'forbid']
// CHECK-NEXT: {{^}}  pplan.evidence_policy @policy {providers = ["roofline"],

// -----

pplan.evidence_policy @policy {fallback = "allow", max_age_s = 0 : i64, providers = ["oracle"], revision = "r1", uncertainty_budget = 1.0 : f64}
// CHECK:      invalid.mlir:[[# @LINE - 1]]:1: error: evidence policy: unknown provider 'oracle' (roofline | measured:<file>)
// CHECK-NEXT: {{^}}  pplan.evidence_policy @policy {providers = ["oracle"],

// -----

// table: a buffer type of another lifetime
pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.table 0 "rope_table" : !pplan.buffer<4x2xf32, kv>
  // CHECK:      invalid.mlir:[[# @LINE - 1]]:3: error: [AB-R-6] pplan.table 'rope_table': its buffer type must have lifetime weight, got !pplan.buffer<4x2xf32, kv>
  // CHECK-NEXT: {{^}}  %0 = pplan.table 0 "rope_table" : !pplan.buffer<4x2xf32, kv>
}

// -----

// candidate: an empty impl
pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task recv(%0) -> "x" at "edge:e0" {pplan.candidates = [#pplan.candidate<"", "queue.copy", 0>]} : !pplan.buffer<1x4xf32>
      // CHECK:      invalid.mlir:[[# @LINE - 1]]:7
      // CHECK-NEXT: %1 = pplan.task recv(%0) -> "x" at "edge:e0" {pplan.candidat
      // CHECK:      [AB-I-1] candidate: impl, engine and rule must be non-empty
      pplan.yield
    }
    pplan.yield
  }
}

// -----

// candidate: a rank below -1
pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task recv(%0) -> "x" at "edge:e0" {pplan.candidates = [#pplan.candidate<"vq.recv", "queue.copy", -2>]} : !pplan.buffer<1x4xf32>
      // CHECK:      invalid.mlir:[[# @LINE - 1]]:7
      // CHECK-NEXT: %1 = pplan.task recv(%0) -> "x" at "edge:e0" {pplan.candidat
      // CHECK:      [AB-I-1] candidate 'vq.recv': rank -2 < -1 (-1: not ranked yet)
      pplan.yield
    }
    pplan.yield
  }
}

// -----

// candidate: a negative workspace
pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task recv(%0) -> "x" at "edge:e0" {pplan.candidates = [#pplan.candidate<"vq.recv", "queue.copy", 0, workspace -8>]} : !pplan.buffer<1x4xf32>
      // CHECK:      invalid.mlir:[[# @LINE - 1]]:7
      // CHECK-NEXT: %1 = pplan.task recv(%0) -> "x" at "edge:e0" {pplan.candidat
      // CHECK:      [AB-I-1] candidate 'vq.recv': negative workspace -8
      pplan.yield
    }
    pplan.yield
  }
}

// -----

// candidate: rejections that are not strings
pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task recv(%0) -> "x" at "edge:e0" {pplan.candidates = [#pplan.candidate<"vq.recv", "queue.copy", 0, rejected ["slow", 3]>]} : !pplan.buffer<1x4xf32>
      // CHECK:      invalid.mlir:[[# @LINE - 1]]:138
      // CHECK-NEXT: %1 = pplan.task recv(%0) -> "x" at "edge:e0" {pplan.candidat
      // CHECK:      candidate rejections must be an array of strings
      pplan.yield
    }
    pplan.yield
  }
}

// -----

// task: candidates that are not #pplan.candidate
pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task recv(%0) -> "x" at "edge:e0" {pplan.candidates = ["vq.recv"]} : !pplan.buffer<1x4xf32>
      // CHECK:      invalid.mlir:[[# @LINE - 1]]:7: error: [AB-I-1] task 'recv.e0': pplan.candidates must be an array of #pplan.candidate
      // CHECK-NEXT: {{^}}  %0 = pplan.task recv(%1) -> "x" at "edge:e0" {pplan.candidates = ["vq.
      pplan.yield
    }
    pplan.yield
  }
}

// -----

// task: two candidates under one rule
pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task recv(%0) -> "x" at "edge:e0" {pplan.candidates = [#pplan.candidate<"vq.recv", "queue.copy", 0>, #pplan.candidate<"vq.recv", "queue.compute", 1>]} : !pplan.buffer<1x4xf32>
      // CHECK:      invalid.mlir:[[# @LINE - 1]]:7: error: [AB-I-1] task 'recv.e0': two candidates share rule 'vq.recv'
      // CHECK-NEXT: {{^}}  %0 = pplan.task recv(%1) -> "x" at "edge:e0" {pplan.candidates = [#ppl
      pplan.yield
    }
    pplan.yield
  }
}

// -----

// task: costs that are not #pplan.cost
pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task recv(%0) -> "x" at "edge:e0" {pplan.candidates = [#pplan.candidate<"vq.recv", "queue.copy", 0>], pplan.costs = [1.0e-06]} : !pplan.buffer<1x4xf32>
      // CHECK:      invalid.mlir:[[# @LINE - 1]]:7: error: [AB-C-1] task 'recv.e0': pplan.costs must be an array of #pplan.cost
      // CHECK-NEXT: {{^}}  %0 = pplan.task recv(%1) -> "x" at "edge:e0" {pplan.candidates = [#ppl
      pplan.yield
    }
    pplan.yield
  }
}

// -----

// task: a cost of a rule that no candidate of the task has
pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task recv(%0) -> "x" at "edge:e0" {pplan.candidates = [#pplan.candidate<"vq.recv", "queue.copy", 0>], pplan.costs = [#pplan.cost<"vs.recv", 1.0e-06 s, roofline, direct, conf 0.5>]} : !pplan.buffer<1x4xf32>
      // CHECK:      invalid.mlir:[[# @LINE - 1]]:7: error: [AB-C-1] task 'recv.e0': cost of 'vs.recv' prices no candidate of the task, or one already priced
      // CHECK-NEXT: {{^}}  %0 = pplan.task recv(%1) -> "x" at "edge:e0" {pplan.candidates = [#ppl
      pplan.yield
    }
    pplan.yield
  }
}

// -----

// cost: confidence outside [0, 1]
pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task recv(%0) -> "x" at "edge:e0" {pplan.candidates = [#pplan.candidate<"vq.recv", "queue.copy", 0>], pplan.costs = [#pplan.cost<"vq.recv", 1.0e-06 s, roofline, direct, conf 1.5>]} : !pplan.buffer<1x4xf32>
      // CHECK:      invalid.mlir:[[# @LINE - 1]]:7
      // CHECK-NEXT: %1 = pplan.task recv(%0) -> "x" at "edge:e0" {pplan.candidat
      // CHECK:      cost of 'vq.recv': confidence must be in [0, 1] and duration >= 0
      pplan.yield
    }
    pplan.yield
  }
}

// -----

// cost: a measured fallback estimate
pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task recv(%0) -> "x" at "edge:e0" {pplan.candidates = [#pplan.candidate<"vq.recv", "queue.copy", 0>], pplan.costs = [#pplan.cost<"vq.recv", 1.0e-06 s, measured, fallback, conf 0.5>]} : !pplan.buffer<1x4xf32>
      // CHECK:      invalid.mlir:[[# @LINE - 1]]:7
      // CHECK-NEXT: %1 = pplan.task recv(%0) -> "x" at "edge:e0" {pplan.candidat
      // CHECK:      cost of 'vq.recv': a measured estimate is either direct or out_of_domain
      pplan.yield
    }
    pplan.yield
  }
}

// -----

// cost: an unknown status
pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task recv(%0) -> "x" at "edge:e0" {pplan.candidates = [#pplan.candidate<"vq.recv", "queue.copy", 0>], pplan.costs = [#pplan.cost<"vq.recv", 1.0e-06 s, roofline, guessed, conf 0.5>]} : !pplan.buffer<1x4xf32>
      // CHECK:      invalid.mlir:[[# @LINE - 1]]:179
      // CHECK-NEXT: %1 = pplan.task recv(%0) -> "x" at "edge:e0" {pplan.candidat
      // CHECK:      Expected `direct`, `fallback`, `out_of_domain`, or `missing`.
      pplan.yield
    }
    pplan.yield
  }
}

// -----

// cost: a missing estimate (the shared cost status vocabulary; only a cplan.command's cost can be missing)
pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task recv(%0) -> "x" at "edge:e0" {pplan.candidates = [#pplan.candidate<"vq.recv", "queue.copy", 0>], pplan.costs = [#pplan.cost<"vq.recv", 1.0e-06 s, roofline, missing, conf 0.5>]} : !pplan.buffer<1x4xf32>
      // CHECK:      invalid.mlir:[[# @LINE - 1]]:7
      // CHECK-NEXT: %1 = pplan.task recv(%0) -> "x" at "edge:e0" {pplan.candidat
      // CHECK:      cost of 'vq.recv': a resolved estimate is never missing (direct, fallback or out_of_domain)
      pplan.yield
    }
    pplan.yield
  }
}

// -----

// task: no work shape and no fresh result to take it from
pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task recv(%0) updates(%0) at "edge:e0" : !pplan.buffer<1x4xf32, edge>
      // CHECK:      invalid.mlir:[[# @LINE - 1]]:57
      // CHECK-NEXT: %1 = pplan.task recv(%0) updates(%0) at "edge:e0" : !pplan.b
      // CHECK:      [AB-R-6] a task states its work shape unless it yields one fresh buffer of that shape
      pplan.yield
    }
    pplan.yield
  }
}

// -----

// deployment binding: a device entry that is not a dictionary
pplan.deployment_binding @deployment {devices = ["n0", {bandwidth_bytes_per_s = 1.0e+11 : f64, flops_per_s = 1.0e+12 : f64, id = "n0", link_bandwidth_bytes_per_s = 1.0e+09 : f64, memory_bytes = 100 : i64, reserved_bytes = 0 : i64}], stage_devices = ["n0"], topology = "chain"}
// CHECK:      invalid.mlir:[[# @LINE - 1]]:1: error: deployment binding: devices[0] is not a dictionary
// CHECK-NEXT: {{^}}  pplan.deployment_binding @deployment {devices = ["n0",

// -----

// deployment binding: a device without an id
pplan.deployment_binding @deployment {devices = [{bandwidth_bytes_per_s = 1.0e+11 : f64, flops_per_s = 1.0e+12 : f64, link_bandwidth_bytes_per_s = 1.0e+09 : f64, memory_bytes = 100 : i64, reserved_bytes = 0 : i64}], stage_devices = ["n0"], topology = "chain"}
// CHECK:      invalid.mlir:[[# @LINE - 1]]:1: error: deployment binding: devices[0] lacks a string 'id'
// CHECK-NEXT: {{^}}  pplan.deployment_binding @deployment {devices = [{bandwidth_bytes_per_

// -----

// deployment binding: a negative integer field
pplan.deployment_binding @deployment {devices = [{bandwidth_bytes_per_s = 1.0e+11 : f64, flops_per_s = 1.0e+12 : f64, id = "n0", link_bandwidth_bytes_per_s = 1.0e+09 : f64, memory_bytes = -100 : i64, reserved_bytes = 0 : i64}], stage_devices = ["n0"], topology = "chain"}
// CHECK:      invalid.mlir:[[# @LINE - 1]]:1: error: deployment binding: devices[0] (n0) needs a non-negative integer 'memory_bytes'
// CHECK-NEXT: {{^}}  pplan.deployment_binding @deployment {devices = [{bandwidth_bytes_per_

// -----

// deployment binding: a float field that is missing
pplan.deployment_binding @deployment {devices = [{bandwidth_bytes_per_s = 1.0e+11 : f64, id = "n0", link_bandwidth_bytes_per_s = 1.0e+09 : f64, memory_bytes = 100 : i64, reserved_bytes = 0 : i64}], stage_devices = ["n0"], topology = "chain"}
// CHECK:      invalid.mlir:[[# @LINE - 1]]:1: error: deployment binding: devices[0] (n0) needs a non-negative float 'flops_per_s'
// CHECK-NEXT: {{^}}  pplan.deployment_binding @deployment {devices = [{bandwidth_bytes_per_

// -----

// deployment binding: duplicate device ids
pplan.deployment_binding @deployment {devices = [{bandwidth_bytes_per_s = 1.0e+11 : f64, flops_per_s = 1.0e+12 : f64, id = "n0", link_bandwidth_bytes_per_s = 1.0e+09 : f64, memory_bytes = 100 : i64, reserved_bytes = 0 : i64}, {bandwidth_bytes_per_s = 1.0e+11 : f64, flops_per_s = 1.0e+12 : f64, id = "n0", link_bandwidth_bytes_per_s = 1.0e+09 : f64, memory_bytes = 100 : i64, reserved_bytes = 0 : i64}], stage_devices = ["n0"], topology = "chain"}
// CHECK:      invalid.mlir:[[# @LINE - 1]]:1: error: deployment binding: duplicate device ids in ['n0', 'n0']
// CHECK-NEXT: {{^}}  pplan.deployment_binding @deployment {devices = [{bandwidth_bytes_per_

// -----

// deployment binding: an unsupported topology
pplan.deployment_binding @deployment {devices = [{bandwidth_bytes_per_s = 1.0e+11 : f64, flops_per_s = 1.0e+12 : f64, id = "n0", link_bandwidth_bytes_per_s = 1.0e+09 : f64, memory_bytes = 100 : i64, reserved_bytes = 0 : i64}], stage_devices = ["n0"], topology = "ring"}
// CHECK:      invalid.mlir:[[# @LINE - 1]]:1: error: deployment binding: topology 'ring' is not supported (chain)
// CHECK-NEXT: {{^}}  pplan.deployment_binding @deployment {devices = [{bandwidth_bytes_per_

// -----

// evidence policy: no provider
pplan.evidence_policy @policy {fallback = "allow", max_age_s = 0 : i64, providers = [], revision = "r1", uncertainty_budget = 1.0 : f64}
// CHECK:      invalid.mlir:[[# @LINE - 1]]:1: error: evidence policy: at least one provider is required
// CHECK-NEXT: {{^}}  pplan.evidence_policy @policy {providers = [],

// -----

// evidence policy: an uncertainty budget outside [0, 1]
pplan.evidence_policy @policy {fallback = "allow", max_age_s = 0 : i64, providers = ["roofline"], revision = "r1", uncertainty_budget = 1.5 : f64}
// CHECK:      invalid.mlir:[[# @LINE - 1]]:1: error: evidence policy: uncertainty_budget must be in [0, 1]
// CHECK-NEXT: {{^}}  pplan.evidence_policy @policy {providers = ["roofline"],

// -----

// evidence policy: a negative max age
pplan.evidence_policy @policy {fallback = "allow", max_age_s = -1 : i64, providers = ["roofline"], revision = "r1", uncertainty_budget = 1.0 : f64}
// CHECK:      invalid.mlir:[[# @LINE - 1]]:1: error: evidence policy: max_age_s must be >= 0
// CHECK-NEXT: {{^}}  pplan.evidence_policy @policy {providers = ["roofline"],
