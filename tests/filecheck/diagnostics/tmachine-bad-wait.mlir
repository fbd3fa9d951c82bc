// RUN: not pipeplan-opt %s 2>&1 | filecheck %s
// AB-M-1: a tmachine launch waiting for a token that no instruction signals is rejected on parse.
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "r"} {
  %x = tmachine.buffer "x" transient {device = "n0", dtype = "f32", shape = array<i64: 1, 4>, origin = "decode:x"}
  %t = tmachine.token "done.c9"
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch "i.c1" "m:f" (%x) waits(%t) {cmd = "c1", grid = array<i64: 1, 1, 1>, meta = {}, scalars = {}, autotune = false, task = "decode.s0.t", impl = "triton.rms_norm", lineage = #cplan.lineage<decode, stage 0, "m">}
  }
}
// CHECK:      tmachine-bad-wait.mlir:7:5: error: [AB-M-1] a machine program must respect its launch ABI and stream order: instruction 'i.c1' waits for token 'done.c9' that no instruction of the program signals
