// REQUIRES: mlir-opt
// RUN: pipeplan plan %models/stories260K.gguf --nodes %S/Inputs/pool2.toml --stages 2 -o %t.plan.mlir
// RUN: pipeplan-opt %t.plan.mlir -o %t.runplan.mlir
// RUN: pipeplan-opt %t.runplan.mlir -p 'convert-runplan-to-pplan,pplan-legalize{target=virtual-queue},pplan-select-implementations,pplan-resolve-costs{evidence=roofline}' -o %t.pplan.mlir
// RUN: pipeplan-opt %t.pplan.mlir -p 'convert-pplan-to-cplan{binder=list-schedule},cplan-verify' -o %t.cplan.mlir
// RUN: pipeplan-opt %t.cplan.mlir -p 'convert-cplan-to-vmachine{model="%models/stories260K.gguf"}' -o %t.vmachine.mlir
// RUN: pipeplan-opt %t.runplan.mlir -p 'convert-runplan-to-pplan,pplan-legalize{target=cuda-triton},pplan-select-implementations,pplan-resolve-costs{evidence=roofline},convert-pplan-to-cplan{binder=list-schedule keep_source=true},convert-cplan-to-triton{model="%models/stories260K.gguf"}' -o %t.tmachine.mlir

// Each IR of the pipeline: generic form -> mlir-opt-19 -> pipeplan-opt gives the same generic and custom text.
// RUN: pipeplan-opt %t.runplan.mlir --print-op-generic -o %t.runplan.g.mlir
// RUN: mlir-opt-19 --allow-unregistered-dialect --mlir-print-op-generic %t.runplan.g.mlir -o %t.runplan.m.mlir
// RUN: pipeplan-opt %t.runplan.m.mlir --print-op-generic | diff %t.runplan.g.mlir -
// RUN: pipeplan-opt %t.runplan.m.mlir | diff %t.runplan.mlir -
// RUN: pipeplan-opt %t.pplan.mlir --print-op-generic -o %t.pplan.g.mlir
// RUN: mlir-opt-19 --allow-unregistered-dialect --mlir-print-op-generic %t.pplan.g.mlir -o %t.pplan.m.mlir
// RUN: pipeplan-opt %t.pplan.m.mlir --print-op-generic | diff %t.pplan.g.mlir -
// RUN: pipeplan-opt %t.pplan.m.mlir | diff %t.pplan.mlir -
// RUN: pipeplan-opt %t.cplan.mlir --print-op-generic -o %t.cplan.g.mlir
// RUN: mlir-opt-19 --allow-unregistered-dialect --mlir-print-op-generic %t.cplan.g.mlir -o %t.cplan.m.mlir
// RUN: pipeplan-opt %t.cplan.m.mlir --print-op-generic | diff %t.cplan.g.mlir -
// RUN: pipeplan-opt %t.cplan.m.mlir | diff %t.cplan.mlir -
// RUN: pipeplan-opt %t.vmachine.mlir --print-op-generic -o %t.vmachine.g.mlir
// RUN: mlir-opt-19 --allow-unregistered-dialect --mlir-print-op-generic %t.vmachine.g.mlir -o %t.vmachine.m.mlir
// RUN: pipeplan-opt %t.vmachine.m.mlir --print-op-generic | diff %t.vmachine.g.mlir -
// RUN: pipeplan-opt %t.vmachine.m.mlir | diff %t.vmachine.mlir -
// RUN: pipeplan-opt %t.tmachine.mlir --print-op-generic -o %t.tmachine.g.mlir
// RUN: mlir-opt-19 --allow-unregistered-dialect --mlir-print-op-generic %t.tmachine.g.mlir -o %t.tmachine.m.mlir
// RUN: pipeplan-opt %t.tmachine.m.mlir --print-op-generic | diff %t.tmachine.g.mlir -
// RUN: pipeplan-opt %t.tmachine.m.mlir | diff %t.tmachine.mlir -
// RUN: filecheck %s --input-file=%t.vmachine.m.mlir --check-prefix=MLIR
// RUN: filecheck %s --input-file=%t.vmachine.mlir --check-prefix=NAMED

// Issue 13 item 2: the generic form of every dialect, as the stories260K pipeline (2 stages) writes it, goes
// through upstream mlir-opt-19 and back byte-identically, generic and custom: runplan, pplan after cost
// resolution (with its bindings), cplan, vmachine and tmachine (the pplan source kept beside it). MLIR
// renumbers SSA values and sorts dictionaries: the ops name their values from their ids again
// (PipeplanOp.result_name) and pipeplan writes nested dictionaries in sorted order.

// MLIR:  %{{[0-9]+}} = "vmachine.buffer"() <{alignment = 64 : i64, device = "n0", id = "alloc.edge.e0"
// NAMED: %edge.e0 = vmachine.buffer "alloc.edge.e0" edge
// NAMED: %e0 = vmachine.edge "e0" %edge.e0
