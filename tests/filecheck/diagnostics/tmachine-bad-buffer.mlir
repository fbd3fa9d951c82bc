// RUN: not pipeplan-opt %s 2>&1 | filecheck %s
// AB-M-1: a program that declares its buffers must declare every buffer its instructions name (rejected on parse,
// at the instruction).
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "r"} {
  tmachine.buffer {id = "x", device = "n0", dtype = "f32", shape = array<i64: 1, 4>, lifetime = "transient", origin = "decode:x"}
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch {id = "i.c1", cmd = "c1", kernel = "m:f", grid = array<i64: 1, 1, 1>, meta = {}, args = ["x", "y"], scalars = {}, autotune = false, waits = [], lineage = "l"}
  }
}
// CHECK:      tmachine-bad-buffer.mlir:7:5: error: [AB-M-1] a machine program must respect its launch ABI and stream order: instruction 'i.c1' names buffer 'y', which the program does not declare
