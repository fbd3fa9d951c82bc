// RUN: not pipeplan-opt %s 2>&1 | filecheck %s
// AB-M-1: a tmachine launch waiting for a command that no instruction lowers is rejected on parse.
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "r"} {
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch {id = "i.c1", cmd = "c1", kernel = "m:f", grid = array<i64: 1, 1, 1>, meta = {}, args = ["x", "y"], scalars = {}, autotune = false, waits = ["c9"], lineage = "l"}
  }
}
// CHECK:      tmachine-bad-wait.mlir:5:5: error: [AB-M-1] a machine program must respect its launch ABI and stream order: instruction 'i.c1' waits for command 'c9' that no instruction of the program lowers
