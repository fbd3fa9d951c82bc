// RUN: not pipeplan-opt %s 2>&1 | filecheck %s
// AB-M-1: a tmachine launch with a zero grid dimension is rejected on parse, at that launch.
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "r"} {
  %x = tmachine.buffer "x" transient {device = "n0", dtype = "f32", shape = array<i64: 1, 4>, origin = "decode:x"}
  tmachine.stream attributes {device = "n0", engine = "cuda.stream"} {
    tmachine.launch "i.c1" "m:f" (%x) {cmd = "c1", grid = array<i64: 0, 1, 1>, meta = {}, scalars = {}, autotune = false, task = "decode.s0.t", impl = "triton.rms_norm", lineage = #cplan.lineage<decode, stage 0, "m">}
  }
}
// CHECK:      tmachine-bad-grid.mlir:6:5: error: [AB-M-1] a machine program must respect its launch ABI and stream order: launch 'i.c1': grid must be 3 positive integers, got [0, 1, 1]
// CHECK-NEXT: {{^}}  tmachine.launch "i.c1" "m:f" (%x) {cmd = "c1", grid = array<i64: 0, 1, 1>, {{.*}}
