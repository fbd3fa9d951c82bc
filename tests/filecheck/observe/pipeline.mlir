// RUN: env PIPEPLAN_CACHE=%t.cache pipeplan plan %models/stories260K.gguf --stages 2 --nodes %S/../../../examples/pool-2.toml -o %t.runplan.mlir
// RUN: pipeplan-opt %t.runplan.mlir --observe -p 'convert-runplan-to-pplan,pplan-legalize{target=virtual-queue},pplan-select-implementations,pplan-resolve-costs{evidence=roofline},convert-pplan-to-cplan{binder=list-schedule},cplan-verify' 2> %t.readme.err > %t.readme.out
// RUN: filecheck %s --input-file=%t.readme.err --check-prefix=README
// RUN: pipeplan-opt %t.runplan.mlir -p 'convert-runplan-to-pplan,pplan-legalize{target=virtual-queue},pplan-select-implementations,pplan-resolve-costs{evidence=roofline},convert-pplan-to-cplan{binder=list-schedule},cplan-verify' > %t.plain.out
// RUN: diff %t.plain.out %t.readme.out
// RUN: pipeplan-opt %t.runplan.mlir --observe -p 'convert-runplan-to-pplan,pplan-legalize{target=virtual-queue},pplan-select-implementations,pplan-resolve-costs{evidence=roofline},convert-pplan-to-cplan{binder=list-schedule keep_source=true},cplan-project-timing,convert-cplan-to-vmachine{model="%models/stories260K.gguf"}' 2> %t.full.err > %t.full.out
// RUN: filecheck %s --input-file=%t.full.err --check-prefix=FULL
// RUN: filecheck %s --input-file=%t.full.out --check-prefix=VM

// Issue 13 item 7 (seeds/003 "Checkpoints and diagnostics", AB-D-1, AB-D-2): the README's concrete-plan
// pipeline on stories260K (2 stages, examples/pool-2.toml) with --observe prints one line per observation
// on stderr after each pass that ends a boundary; stdout is byte-identical to the run without --observe.
// Without keep_source the commands are correlated by lineage only. The second pipeline keeps the portable
// source and continues through the timing projection and the vmachine lowering.

// README:      observe[legalization] capability-coverage: ok, 178/178 tasks legal on virtual-queue@1 (178 candidates)
// README-NEXT: observe[legalization] capability-coverage: ok, 178/178 tasks legal on virtual-queue@1 (178 candidates)
// README-NEXT: observe[legalization] cost-coverage: ok, 178/178 tasks and 178/178 candidates costed (evidence: roofline/direct 178)
// README-NEXT: observe[construction] command-correlation: ok, 178/178 commands trace to a portable task, portable source not kept (lineage only)
// README-NEXT: observe[construction] resource-conflicts: ok, 227 allocations in 4 arenas, 0 overlapping while live; 4 queues, 0 queue conflicts
// README-NEXT: observe[construction] command-correlation: ok
// README-NEXT: observe[construction] resource-conflicts: ok
// README-NOT:  FAIL

// FULL:      observe[legalization] capability-coverage: ok, 178/178 tasks legal on virtual-queue@1
// FULL:      observe[legalization] cost-coverage: ok, 178/178 tasks and 178/178 candidates costed
// FULL-NEXT: observe[construction] command-correlation: ok, 178/178 commands trace to a portable task, 178/178 tasks have a command
// FULL-NEXT: observe[construction] resource-conflicts: ok, 227 allocations in 4 arenas, 0 overlapping while live
// FULL-NEXT: observe[timing] trace-conservation: ok, 178/178 commands with one interval, makespan {{[0-9.e-]+}} s, busiest queue {{[0-9.e-]+}} s
// FULL-NEXT: observe[machine verification] abi-legality: ok, {{[0-9]+}} instructions, 0 ABI or dataflow violations
// FULL-NOT:  FAIL

// VM: vmachine.program
