// REQUIRES: mlir-opt
// RUN: pipeplan-opt %S/ops.mlir > %t.custom
// RUN: pipeplan-opt %S/ops.mlir --print-op-generic | mlir-opt-19 --allow-unregistered-dialect --mlir-print-op-generic > %t.mlir
// RUN: pipeplan-opt %t.mlir > %t.back
// RUN: diff %t.custom %t.back
// RUN: pipeplan-opt %S/ops.mlir --print-op-generic > %t.generic
// RUN: pipeplan-opt %t.mlir --print-op-generic > %t.generic.back
// RUN: diff %t.generic %t.generic.back
// RUN: filecheck %s --input-file=%t.mlir --check-prefix=MLIR

// Interop with upstream mlir-opt (the generic text, too, is byte-identical after mlir-opt: second diff): every vmachine op of ops.mlir, in generic form, goes through mlir-opt-19 as an
// unregistered op and parses back to the same custom text (diff). MLIR sorts property dictionaries; the
// vmachine ops store properties in declaration order, so the custom text does not change.

// MLIR:      "vmachine.program"() <{binder = "list-schedule", concrete = "sha256:00", deployment = "deployment:n0"
// MLIR:      "vmachine.edge"(%1) <{consumer = 0 : i64, id = "e0", link = "", producer = -1 : i64}> : (!vmachine.buffer) -> !vmachine.edge
// MLIR:      "vmachine.kernel"(%3, %4, %5) <{attrs = {head_dim = 8 : i64, n_heads = 8 : i64, rope_dim = 8 : i64}, block = 0 : i64, cmd = "c1"
