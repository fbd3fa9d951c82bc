// REQUIRES: mlir-opt
// RUN: pipeplan-opt %s > %t.custom
// RUN: pipeplan-opt %s --print-op-generic | mlir-opt-19 --allow-unregistered-dialect --mlir-print-op-generic > %t.mlir
// RUN: pipeplan-opt %t.mlir > %t.back
// RUN: diff %t.custom %t.back
// RUN: pipeplan-opt %s --print-op-generic > %t.generic
// RUN: pipeplan-opt %t.mlir --print-op-generic > %t.generic.back
// RUN: diff %t.generic %t.generic.back
// RUN: filecheck %s --input-file=%t.mlir --check-prefix=MLIR
// RUN: filecheck %s --input-file=%t.back

// Interop with upstream mlir-opt (the generic text, too, is byte-identical after mlir-opt: second diff). Every runplan op (plan, tensor, stage, edge, provision_stage) in
// generic form goes through mlir-opt-19 as an unregistered op -- the plan's block has no
// terminator, stage values are !runplan.stage SSA values (MLIR renumbers them; the custom printer
// names them %s<index> / %orch again), records are #runplan.<name><...> attributes whose body MLIR
// keeps verbatim -- and parses back to the same custom text (diff). The pool's nodes are node specs (id, memory_bytes, optional f64 peaks) -- what
// convert-runplan-to-pplan builds the DeploymentBinding from -- mixed with a bare node id (the
// form of plans written before node specs). MLIR sorts property keys; the record bodies (and their f64 text) it keeps as they are, so the text is unchanged. rms_norm_eps is a GGUF f32 widened to f64 (not a short
// decimal) to check that floats survive exactly.

builtin.module {
  runplan.plan @tiny nodes [#runplan.node<id = "node-a", memory_bytes = 1000000, bandwidth_bytes_per_s = 2.000000e+10, flops_per_s = 1.000000e+11, link_bandwidth_bytes_per_s = 1.000000e+09>, "node-b", #runplan.node<id = "node-c", memory_bytes = 8000000000, flops_per_s = 33333333333.333332>]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516e-06, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
      config <max_seq_len = 4, activation_dtype = f32, token_dtype = i32, kv_dtype = f32, ring_slots = 2, alignment = 16>
      weights <uris = ["tiny.gguf"], sha256 = [], sizes = []> {
    %orch = runplan.orchestrator : !runplan.stage
    runplan.tensor "token_embd.weight" F32 [8, 16] shard 0 offset 0 bytes 512
    runplan.tensor "blk.0.attn_norm.weight" F32 [8] shard 0 offset 512 bytes 32 block 0
    runplan.tensor "blk.1.attn_norm.weight" F32 [8] shard 0 offset 544 bytes 32 block 1
    runplan.tensor "output_norm.weight" F32 [8] shard 0 offset 576 bytes 32
    runplan.tensor "output.weight" F32 [8, 16] shard 0 offset 608 bytes 512
    %s0 = runplan.stage 0 on "node-a" layers [0, 1) : !runplan.stage
    %s1 = runplan.stage 1 on "node-c" layers [1, 2) : !runplan.stage
    runplan.edge "tok.in" token_in %orch -> %s0 object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
    runplan.provision_stage %s0 of 2 on "node-a" layers [0, 1) blocks 2 max_seq_len 4 embedding
        weights <uris = ["tiny.gguf"], sha256 = [], sizes = []>
        in <edge_id = "tok.in", kind = token_in, peer_node_id = "orchestrator", object_spec = <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16>, ring_spec = <slots = 2, slot_bytes = 16>>
        out <edge_id = "act.0", kind = activation, peer_node_id = "node-c", object_spec = <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128>, ring_spec = <slots = 2, slot_bytes = 128>>
        tensors [
          "token_embd.weight" F32 [8, 16] shard 0 offset 0 bytes 512,
          "blk.0.attn_norm.weight" F32 [8] shard 0 offset 512 bytes 32]
    runplan.provision_stage %s1 of 2 on "node-c" layers [1, 2) blocks 2 max_seq_len 4 head
        weights <uris = ["tiny.gguf"], sha256 = [], sizes = []>
        in <edge_id = "act.0", kind = activation, peer_node_id = "node-a", object_spec = <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128>, ring_spec = <slots = 2, slot_bytes = 128>>
        out <edge_id = "tok.out", kind = token_out, peer_node_id = "orchestrator", object_spec = <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16>, ring_spec = <slots = 2, slot_bytes = 16>>
        tensors [
          "blk.1.attn_norm.weight" F32 [8] shard 0 offset 544 bytes 32,
          "output_norm.weight" F32 [8] shard 0 offset 576 bytes 32,
          "output.weight" F32 [8, 16] shard 0 offset 608 bytes 512]
  }
}

// MLIR:      "runplan.plan"() <{config = #runplan.config<max_seq_len = 4, activation_dtype = f32, token_dtype = i32, kv_dtype = f32, ring_slots = 2, alignment = 16>, model = #runplan.model<
// MLIR-SAME: rms_norm_eps = 9.9999997473787516e-06
// MLIR-SAME: nodes = [#runplan.node<id = "node-a", memory_bytes = 1000000, bandwidth_bytes_per_s = 2.000000e+10, flops_per_s = 1.000000e+11, link_bandwidth_bytes_per_s = 1.000000e+09>, "node-b", #runplan.node<id = "node-c", memory_bytes = 8000000000, flops_per_s = 33333333333.333332>]
// MLIR:      %[[ORCH:.*]] = "runplan.orchestrator"() : () -> !runplan.stage
// MLIR:      %[[S1:.*]] = "runplan.stage"() <{index = 1 : i64, layer_end = 2 : i64, layer_start = 1 : i64, node_id = "node-c"}> : () -> !runplan.stage
// MLIR:      "runplan.edge"(%[[S1]], %[[ORCH]]) <{edge_id = "tok.out", kind = #runplan<edge_kind token_out>, object_spec = #runplan.object<kind = token,
// MLIR:      "runplan.provision_stage"(%{{.*}}) <{block_count = 2 : i64, has_embedding,

// CHECK:      runplan.plan @tiny nodes [#runplan.node<id = "node-a", memory_bytes = 1000000, bandwidth_bytes_per_s = 2.000000e+10, flops_per_s = 1.000000e+11, link_bandwidth_bytes_per_s = 1.000000e+09>, "node-b", #runplan.node<id = "node-c", memory_bytes = 8000000000, flops_per_s = 33333333333.333332>]
// CHECK:      rms_norm_eps = 9.9999997473787516e-06
// CHECK:      %s1 = runplan.stage 1 on "node-c" layers [1, 2) : !runplan.stage
// CHECK:      runplan.edge "tok.out" token_out %s1 -> %orch
// CHECK:      runplan.provision_stage %s0 of 2 on "node-a" layers [0, 1) blocks 2 max_seq_len 4 embedding
// CHECK:      runplan.provision_stage %s1 of 2 on "node-c" layers [1, 2) blocks 2 max_seq_len 4 head
