// REQUIRES: mlir-opt
// RUN: pipeplan-opt %S/ops.mlir > %t.custom
// RUN: pipeplan-opt %S/ops.mlir --print-op-generic | mlir-opt-19 --allow-unregistered-dialect --mlir-print-op-generic > %t.mlir
// RUN: pipeplan-opt %t.mlir > %t.back
// RUN: diff %t.custom %t.back
// RUN: pipeplan-opt %S/ops.mlir --print-op-generic > %t.generic
// RUN: pipeplan-opt %t.mlir --print-op-generic > %t.generic.back
// RUN: diff %t.generic %t.generic.back
// RUN: filecheck %s --input-file=%t.mlir --check-prefix=MLIR

// Interop with upstream mlir-opt (the generic text, too, is byte-identical after mlir-opt: second diff): every tmachine op of ops.mlir, in generic form, goes through mlir-opt-19 as an
// unregistered op and parses back to the same custom text (diff). MLIR sorts property dictionaries; the
// tmachine ops store properties in declaration order, so the custom text does not change. An instruction's step
// (#tmachine<step prefill>) and lineage (#cplan.lineage<...>) pass through as dialect attributes.

// MLIR:      "tmachine.program"() <{concrete = "sha256:00", revision = "pipeplan-tmachine/3", target = "cuda-triton@1"}>
// MLIR:      "tmachine.copy"(%0, %1, %6) <{bytes = 16 : i64, cmd = "c0", id = "i.c0", impl = "triton.recv", lineage = #cplan.lineage<prefill, stage 0, "edge:e0", edge "e0">, operandSegmentSizes = array<i32: 1, 1, 0, 1>, step = #tmachine<step prefill>, task = "prefill.s0.recv.e0"}> : (!tmachine.buffer, !tmachine.buffer, !tmachine.token) -> ()
// MLIR:      "tmachine.launch"(%1, %2, %3, %6) <{autotune = true, cmd = "c1", grid = array<i64: 4, 1, 1>, id = "i.c1", impl = "triton.matmul", kernel = "gemv:_gemv_kernel", lineage = #cplan.lineage<prefill, stage 0, block 0, "blk.0.attn_q">
