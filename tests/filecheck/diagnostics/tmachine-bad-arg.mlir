// RUN: not pipeplan-opt %s 2>&1 | filecheck %s
// AB-M-1: a tmachine launch whose buffer argument is a tmachine.buffer with an empty id is rejected on parse, at the launch.
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "r"} {
  %x = tmachine.buffer "x" transient {device = "n0", dtype = "f32", shape = array<i64: 1, 4>, origin = "decode:x"}
  %y = tmachine.buffer "" transient {device = "n0", dtype = "f32", shape = array<i64: 1, 4>, origin = "decode:x"}
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch "i.c1" "m:f" (%x, %y) {cmd = "c1", grid = array<i64: 1, 1, 1>, meta = {}, scalars = {}, autotune = false, task = "decode.s0.t", impl = "triton.rms_norm", lineage = #cplan.lineage<decode, stage 0, "m">}
  }
}
// CHECK:      tmachine-bad-arg.mlir:7:5: error: [AB-M-1] a machine program must respect its launch ABI and stream order: instruction 'i.c1' has an empty buffer argument
