// RUN: %verify-located --parsing-diagnostics | filecheck %s

// #cplan.lineage verifier messages, one case each: an unknown step, a negative stage, a block below -1
// (-1: no block), an empty model op, an edge on a model op that is not an edge transfer.

builtin.module attributes {c = #cplan.lineage<warmup, stage 0, "token_embd">} {
}
// CHECK:      lineage-invalid.mlir:[[# @LINE - 2]]:1
// CHECK:      lineage: unknown step 'warmup', expected one of prefill, decode

// -----

builtin.module attributes {c = #cplan.lineage<decode, stage -1, "token_embd">} {
}
// CHECK:      lineage-invalid.mlir:[[# @LINE - 2]]:1
// CHECK:      lineage: stage -1 is negative

// -----

builtin.module attributes {c = #cplan.lineage<decode, stage 0, block -2, "blk.0.attn_q">} {
}
// CHECK:      lineage-invalid.mlir:[[# @LINE - 2]]:1
// CHECK:      lineage: block -2 < -1 (-1: no block)

// -----

builtin.module attributes {c = #cplan.lineage<decode, stage 0, "">} {
}
// CHECK:      lineage-invalid.mlir:[[# @LINE - 2]]:1
// CHECK:      lineage: the model op is empty

// -----

builtin.module attributes {c = #cplan.lineage<decode, stage 0, block 0, "blk.0.attn_q", edge "e1">} {
}
// CHECK:      lineage-invalid.mlir:[[# @LINE - 2]]:1
// CHECK:      lineage: edge 'e1' on model op 'blk.0.attn_q' (only an 'edge:' model op moves an edge)
