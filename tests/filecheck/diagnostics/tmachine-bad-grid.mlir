// RUN: not pipeplan-opt %s 2>&1 | filecheck %s
// AB-M-1: a tmachine launch with a zero grid dimension is rejected on parse, at that launch.
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "r"} {
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch {id = "i.c1", cmd = "c1", kernel = "m:f", grid = array<i64: 0, 1, 1>, meta = {}, args = ["x", "y"], scalars = {}, autotune = false, waits = [], lineage = "l"}
  }
}
// CHECK:      tmachine-bad-grid.mlir:5:5: error: [AB-M-1] a machine program must respect its launch ABI and stream order: launch 'i.c1': grid must be 3 positive integers, got [0, 1, 1]
// CHECK-NEXT: {{^}}  tmachine.launch {id = "i.c1", cmd = "c1", kernel = "m:f", grid = array<i64: 0, 1, 1>, {{.*}}
