// RUN: not pipeplan-opt %s 2>&1 | filecheck %s
// AB-M-1: a tmachine.buffer's lifetime is one of the concrete plan's allocation lifetimes (rejected on parse).
tmachine.program attributes {target = "cuda-triton@1", concrete = "sha256:00", revision = "r"} {
  %x = tmachine.buffer "x" scratch {device = "n0", dtype = "f32", shape = array<i64: 1, 4>, origin = "decode:x"}
}
// CHECK:      error: {{.*}}tmachine-bad-lifetime.mlir:4:28
// CHECK-NEXT: {{^}}  %x = tmachine.buffer "x" scratch {device
// CHECK-NEXT: {{^ +\^+$}}
// CHECK-NEXT: Expected `weight`, `kv`, `transient`, or `edge`.
