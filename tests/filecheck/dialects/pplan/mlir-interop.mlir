// REQUIRES: mlir-opt
// RUN: pipeplan-opt %S/ops.mlir > %t.custom
// RUN: pipeplan-opt %S/ops.mlir --print-op-generic | mlir-opt-19 --allow-unregistered-dialect --mlir-print-op-generic > %t.mlir
// RUN: pipeplan-opt %t.mlir > %t.back
// RUN: diff %t.custom %t.back
// RUN: pipeplan-opt %S/ops.mlir --print-op-generic > %t.generic
// RUN: pipeplan-opt %t.mlir --print-op-generic > %t.generic.back
// RUN: diff %t.generic %t.generic.back
// RUN: filecheck %s --input-file=%t.mlir --check-prefix=MLIR

// Interop with upstream mlir-opt (the generic text, too, is byte-identical after mlir-opt: second diff): every pplan op of ops.mlir, in generic form, goes through mlir-opt-19 as an
// unregistered op and parses back to the same custom text (diff): the SSA buffer values (renumbered by MLIR),
// the !pplan.buffer / !pplan.token types and the #pplan<op ..> / #pplan<step ..> enum attributes, which MLIR
// keeps verbatim. MLIR sorts property dictionaries; the pplan ops store properties in declaration order, so
// the custom text does not change.

// MLIR:      "pplan.plan"() <{decode_pos = 1 : i64, model = "m", prompt_len = 1 : i64, source = "runplan @run0", stage_count = 1 : i64, sym_name = "run0"}>
// MLIR:      %5:3 = "pplan.step"() <{step = #pplan<step prefill>}>
// MLIR:      "pplan.task"(%0) <{block = -1 : i64, bytes = array<i64: 4, 4>, {{.*}}op = #pplan<op recv>, operandSegmentSizes = array<i32: 1, 0, 0>{{.*}} : (!pplan.buffer<4xi32, edge>) -> !pplan.buffer<1xi32>
// MLIR:      "pplan.costed_view"() <{deployment_fingerprint = "d"
