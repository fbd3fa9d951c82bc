// REQUIRES: mlir-opt
// RUN: pipeplan-opt %S/ops.mlir > %t.custom
// RUN: pipeplan-opt %S/ops.mlir --print-op-generic | mlir-opt-19 --allow-unregistered-dialect --mlir-print-op-generic > %t.mlir
// RUN: pipeplan-opt %t.mlir > %t.back
// RUN: diff %t.custom %t.back
// RUN: pipeplan-opt %S/ops.mlir --print-op-generic > %t.generic
// RUN: pipeplan-opt %t.mlir --print-op-generic > %t.generic.back
// RUN: diff %t.generic %t.generic.back
// RUN: filecheck %s --input-file=%t.mlir --check-prefix=MLIR

// Interop with upstream mlir-opt (the generic text, too, is byte-identical after mlir-opt: second diff): every cplan op of ops.mlir, in generic form, goes through mlir-opt-19 as an
// unregistered op and parses back to the same custom text (diff): the !cplan.alloc / !cplan.timepoint values
// (ops.mlir numbers them as MLIR does) and their types, the #cplan<lifetime ...>, #cplan<cost_status ...> and
// #cplan<provider ...> enums (printed bare in the custom form). MLIR sorts property dictionaries; the
// cplan ops store properties in declaration order, so the custom text does not change.

// MLIR:      "cplan.plan"() <{binder = "reference-queue", deployment = "dep", evidence = "roofline@r1", risk = "strict", source = "sha256:00", target = "virtual-queue@1"}>
// MLIR:      %[[T0:[0-9]+]] = "cplan.command"(%{{[0-9]+}}, %{{[0-9]+}}) <{device = "d0", duration = 2.500000e-06 : f64, engine = "queue.compute", id = "cmd.t0"
// MLIR-SAME:  operandSegmentSizes = array<i32: 1, 1, 0>, provider = #cplan<provider roofline>, status = #cplan<cost_status direct>
// MLIR-SAME:  : (!cplan.alloc, !cplan.alloc) -> !cplan.timepoint
// MLIR:      %[[T1:[0-9]+]] = "cplan.command"(%{{[0-9]+}}, %{{[0-9]+}}, %[[T0]])
// MLIR:      "cplan.sync"(%[[T0]], %[[T1]]) : (!cplan.timepoint, !cplan.timepoint) -> ()
// MLIR:      "cplan.command"({{.*}}, status = #cplan<cost_status missing>, task = "t1"}>
// MLIR:      "cplan.slot_dataflow"()
