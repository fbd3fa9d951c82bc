// RUN: env PIPEPLAN_CACHE=%t.cache pipeplan plan %models/stories260K.gguf --stages 2 --nodes %S/../../../examples/pool-2.toml | pipeplan-opt -p 'convert-runplan-to-pplan,pplan-legalize{target=virtual-queue},pplan-select-implementations,pplan-resolve-costs{evidence=roofline}' -o %t.costed.mlir
// RUN: sed -e '/at "blk.3.attn_q" work \[1, /s/, pplan.costs = \[[^]]*\]//' %t.costed.mlir > %t.broken.mlir
// RUN: pipeplan-opt %t.broken.mlir --observe=json -p pplan-legalize 2> %t.err > %t.out
// RUN: filecheck %s --input-file=%t.err
// RUN: not pipeplan-opt %t.broken.mlir --observe-strict -p pplan-legalize -o %t.strict.mlir 2>&1 | filecheck %s --check-prefix=STRICT
// RUN: diff %t.out %t.strict.mlir

// Issue 13 item 7: a failing observation is a finding, not a crash (exit 0, stdout still the module); with
// --observe-strict it is error[observation_failed] and exit 1, once the output is written (AB-C-1: the
// decode attn_q matmul of block 3 lost its pplan.costs; the finding names its task and candidate).

// CHECK:      {"after": "pplan-legalize", "boundary": "legalization", "figures": {{{.*}}}, "findings": [], "name": "capability-coverage", "ok": true,
// CHECK-NEXT: {"after": "pplan-legalize", "boundary": "legalization", "figures": {"candidates": 178, "costed_candidates": 177, "costed_tasks": 177, "evidence": {"roofline/direct": 177}, "tasks": 178}, "findings": ["task @decode.s1.b3.matmul.attn_q has no resolved cost (model op blk.3.attn_q -> stage 1 block 3 (decode) -> task @decode.s1.b3.matmul.attn_q)", "candidate @c.decode.s1.b3.matmul.attn_q.vq.matmul (task @decode.s1.b3.matmul.attn_q) has no resolved cost"], "name": "cost-coverage", "ok": false,

// STRICT:      observe[legalization] capability-coverage: ok
// STRICT-NEXT: observe[legalization] cost-coverage: FAIL, 177/178 tasks and 177/178 candidates costed (evidence: roofline/direct 177); 2 findings: task @decode.s1.b3.matmul.attn_q has no resolved cost
// STRICT-NEXT: error[observation_failed]: --observe-strict: 1 observation failed (first: cost-coverage after pplan-legalize)
