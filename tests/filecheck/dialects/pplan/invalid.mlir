// RUN: %verify-diag --parsing-diagnostics | filecheck %s

// Verifier messages of the pplan dialect, one case each: buffer types (lifetime, alignment, dtype and
// block size), declarations, tasks (token, in-place versions, byte accounting, edge transfers, matmul
// work), stage/step regions, the plan's SSA dataflow (def-before-use is acyclicity, no read of a
// version updated in place, unique task ids), binding contents.

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.weight 0 "w" : !pplan.buffer<1x4xf32, scratch>
}
// CHECK: [AB-R-6] buffer type: lifetime 'scratch' is not one of ['weight', 'kv', 'transient', 'edge']

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.weight 0 "w" : !pplan.buffer<1x4xf32, weight, align 48>
}
// CHECK: [AB-R-6] buffer type: alignment 48 is not a power of two

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.weight 0 "w" : !pplan.buffer<1x128xq4_k, weight>
}
// CHECK: [AB-R-6] buffer type !pplan.buffer<1x128xq4_k, weight>: innermost dimension of shape [1, 128] is not a multiple of the q4_k block size 256

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.weight 0 "w" : !pplan.buffer<1x4xf7, weight>
}
// CHECK: [AB-R-6] buffer type !pplan.buffer<1x4xf7, weight>: unknown dtype 'f7'

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.weight 0 "w" : !pplan.buffer<1x4xf32, kv>
}
// CHECK: [AB-R-6] pplan.weight 'w': its buffer type must have lifetime weight

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.kv -1 "blk.0.cache_k" : !pplan.buffer<4x1x4xf32, kv>
}
// CHECK: [AB-R-6] pplan.kv 'blk.0.cache_k': stage -1 < 0

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32>
}
// CHECK: [AB-R-6] edge object e0: its buffer type must have lifetime edge

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task "recv.e0" recv(%0) -> "x" at "edge:e0" work [1, 4] bytes [16, 16] token : !pplan.buffer<1x4xf32>
      pplan.yield
    }
    pplan.yield
  }
}
// CHECK: [AB-S-1] task 'recv.e0': a task with 'token' yields exactly one !pplan.token (and only it)

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  %9 = pplan.weight 0 "w" : !pplan.buffer<1x4xf32, weight>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task "recv.e0" recv(%0) -> "x" at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32>
      %2 = pplan.task "send.e0" send(%1) updates(%0) at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x8xf32, edge>
      pplan.yield
    }
    pplan.yield
  }
}
// CHECK: [AB-S-4] task 'send.e0': results must be the new versions of its updates (same types, same order)

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task "recv.e0" recv(%0) -> "x" at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32>
      %2 = pplan.task "send.e0" send(%1) updates(%0) -> "y" at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32, edge>
      pplan.yield
    }
    pplan.yield
  }
}
// CHECK: [AB-S-4] task 'send.e0': an in-place task names no fresh result

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task "recv.e0" recv(%0) at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32>
      pplan.yield
    }
    pplan.yield
  }
}
// CHECK: [AB-S-4] task 'recv.e0': a task without updates yields one fresh buffer named by 'out'

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task "recv.e0" recv(%0) -> "x" at "edge:e0" work [1, 4] bytes [16] : !pplan.buffer<1x4xf32>
      pplan.yield
    }
    pplan.yield
  }
}
// CHECK: [AB-R-6] task 'recv.e0': one byte count per access (reads, then writes) expected, got 1 for 2

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task "recv.e0" recv(%0) -> "x" at "edge:e0" work [1, 4] bytes [16, -1] : !pplan.buffer<1x4xf32>
      pplan.yield
    }
    pplan.yield
  }
}
// CHECK: [AB-R-6] task 'recv.e0': negative byte or flop count

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task "recv.e0" recv(%0) -> "x" at "edge:e0" work [1, 4] bytes [32, 16] : !pplan.buffer<1x4xf32>
      pplan.yield
    }
    pplan.yield
  }
}
// CHECK: [AB-R-6] task 'recv.e0': access 0 moves 32 bytes of a buffer holding 16

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.weight 0 "w" : !pplan.buffer<1x4xf32, weight>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task "recv.e0" recv(%0) -> "x" at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32>
      pplan.yield
    }
    pplan.yield
  }
}
// CHECK: [AB-L-2] task 'recv.e0': a recv reads exactly one edge object

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task "recv.e0" recv(%0) -> "x" at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32>
      %2 = pplan.task "mm" matmul(%1, %1) -> "y" at "m" work [1, 4, 4] flops 7 bytes [16, 16, 16] : !pplan.buffer<1x4xf32>
      pplan.yield
    }
    pplan.yield
  }
}
// CHECK: [AB-L-2] task 'mm': matmul flops 7 inconsistent with work shape [M, N, K] = [1, 4, 4] (expected 2*M*N*K)

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task "recv.e0" scatter(%0) -> "x" at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32>
      pplan.yield
    }
    pplan.yield
  }
}
// CHECK: [AB-L-1] unknown portable op 'scatter'

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task "recv.e0" recv(%5) -> "x" at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32>
      pplan.yield
    }
    pplan.yield
  }
}
// CHECK: [AB-S-1] value %5 is used before its definition

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
      %1 = pplan.task "recv.e0" recv(%0) -> "x" at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32>
      pplan.yield
    }) : () -> !pplan.buffer<1x4xf32>
    pplan.yield
  }
}
// CHECK: [AB-S-1] stage 0: results must match the yielded values' types

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task "recv.e0" recv(%0) -> "x" at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32>
      %2 = pplan.weight 0 "w" : !pplan.buffer<1x4xf32, weight>
      pplan.yield
    }
    pplan.yield
  }
}
// CHECK: [AB-S-1] stage 0: unexpected op pplan.weight (only pplan.task)

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    %1 = pplan.weight 0 "w" : !pplan.buffer<1x4xf32, weight>
    pplan.yield
  }
}
// CHECK: [AB-S-1] step decode: unexpected op pplan.weight (only pplan.stage)

// -----

pplan.plan @p attributes {stage_count = 2 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 1 {
      pplan.yield
    }
    pplan.stage 0 {
      pplan.yield
    }
    pplan.yield
  }
}
// CHECK: [AB-S-1] step decode: stages must appear once each, in increasing order, got [1, 0]

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step warmup {
    pplan.stage 0 {
      %1 = pplan.task "recv.e0" recv(%0) -> "x" at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32>
      pplan.yield
    }
    pplan.yield
  }
}
// CHECK: [AB-S-1] step 'warmup' is not one of ['prefill', 'decode']

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 3 {
      %1 = pplan.task "recv.e0" recv(%0) -> "x" at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32>
      pplan.yield
    }
    pplan.yield
  }
}
// CHECK: [AB-S-3] plan @p: stage 3 outside [0, 1)

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.yield
}
// CHECK: [AB-S-1] plan @p: unexpected op pplan.yield (declarations and pplan.step only)

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  pplan.step decode {
    pplan.yield
  }
  pplan.step prefill {
    pplan.yield
  }
}
// CHECK: [AB-S-1] plan @p: steps must appear once each, prefill before decode, got ['decode', 'prefill']

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      "pplan.task"(%2) <{task = "a", op = #pplan<op last_row>, out = "y", model_op = "m", block = -1 : i64, flops = 0 : i64, work = array<i64: 1, 4>, bytes = array<i64: 16, 16>, operandSegmentSizes = array<i32: 1, 0, 0>}> : (!pplan.buffer<1x4xf32>) -> !pplan.buffer<1x4xf32>
      %2 = pplan.task "recv.e0" recv(%0) -> "x" at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32>
      pplan.yield
    }
    pplan.yield
  }
}
// CHECK: [AB-S-1] plan @p: task 'a' uses a value before its definition (SSA def-before-use: dependencies closed and acyclic)

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task "recv.e0" recv(%0) -> "x" at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32>
      %2 = pplan.task "send.e0" send(%1) updates(%0) at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32, edge>
      %3 = pplan.task "recv.again" recv(%0) -> "z" at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32>
      pplan.yield
    }
    pplan.yield
  }
}
// CHECK: [AB-S-4] plan @p: task 'recv.again' reads a buffer version that task 'decode.s0.send.e0' already updated in place (use its result)

// -----

pplan.plan @p attributes {stage_count = 1 : i64, prompt_len = 1 : i64, decode_pos = 1 : i64, model = "m", source = "s"} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task "recv.e0" recv(%0) -> "x" at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32>
      %2 = pplan.task "recv.e0" recv(%0) -> "x" at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32>
      pplan.yield
    }
    pplan.yield
  }
}
// CHECK: [AB-R-1] plan @p: task id 'decode.s0.recv.e0' declared twice

// -----

pplan.deployment_binding @deployment {devices = [{bandwidth_bytes_per_s = 1.0e+11 : f64, flops_per_s = 1.0e+12 : f64, id = "n0", link_bandwidth_bytes_per_s = 1.0e+09 : f64, memory_bytes = 100 : i64, reserved_bytes = 160 : i64}], stage_devices = ["n0"], topology = "chain"}
// CHECK: deployment binding: device n0 reserves 160 bytes but has capacity 100

// -----

pplan.deployment_binding @deployment {devices = [{bandwidth_bytes_per_s = 1.0e+11 : f64, flops_per_s = 1.0e+12 : f64, id = "n0", link_bandwidth_bytes_per_s = 1.0e+09 : f64, memory_bytes = 100 : i64, reserved_bytes = 0 : i64}], stage_devices = ["n1"], topology = "chain"}
// CHECK: deployment binding: stage 0 device 'n1' is not a declared device

// -----

pplan.evidence_policy @policy {fallback = "sometimes", max_age_s = 0 : i64, providers = ["roofline"], revision = "r1", uncertainty_budget = 1.0 : f64}
// CHECK: evidence policy: fallback 'sometimes' is not one of ['allow', 'forbid']

// -----

pplan.evidence_policy @policy {fallback = "allow", max_age_s = 0 : i64, providers = ["oracle"], revision = "r1", uncertainty_budget = 1.0 : f64}
// CHECK: evidence policy: unknown provider 'oracle' (roofline | measured:<file>)
