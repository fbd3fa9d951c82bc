// RUN: pipeplan-opt %s | filecheck %s
// RUN: %roundtrip | filecheck %s
// RUN: %generic-roundtrip | filecheck %s
// RUN: pipeplan-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

// #cplan.lineage: where a cplan.command comes from in the model (step, stage, block, model op, edge); the
// custom syntax elides block -1 and edge "", and prints the same after a custom or generic round trip.
// (mlir-interop.mlir takes ops.mlir's lineage attributes through mlir-opt-19.)

builtin.module attributes {c.block = #cplan.lineage<prefill, stage 0, block 0, "blk.0.attn_q">,
                           c.stage = #cplan.lineage<decode, stage 1, "output_norm">,
                           c.edge = #cplan.lineage<decode, stage 1, "edge:e1", edge "e1">,
                           c.spaced = #cplan.lineage< prefill ,stage 2,block 5,"blk.5.rope(q)" >} {
}

// CHECK:      builtin.module attributes {c.block = #cplan.lineage<prefill, stage 0, block 0, "blk.0.attn_q">,
// CHECK-SAME: c.stage = #cplan.lineage<decode, stage 1, "output_norm">,
// CHECK-SAME: c.edge = #cplan.lineage<decode, stage 1, "edge:e1", edge "e1">,
// CHECK-SAME: c.spaced = #cplan.lineage<prefill, stage 2, block 5, "blk.5.rope(q)">} {
// CHECK-NEXT: }

// GENERIC:      "builtin.module"() ({
// GENERIC:      }) {c.block = #cplan.lineage<prefill, stage 0, block 0, "blk.0.attn_q">, c.stage = #cplan.lineage<decode, stage 1, "output_norm">
