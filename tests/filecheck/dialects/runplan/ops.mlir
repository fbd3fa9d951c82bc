// RUN: pipeplan-opt %s | filecheck %s
// RUN: %roundtrip | filecheck %s
// RUN: %generic-roundtrip | filecheck %s
// RUN: pipeplan-opt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

// Every runplan op in its custom form: a 2-block fake model (5 tensors) on 2 stages of a 3-node
// pool, with the provision_stage ops the projection pass derives. The custom form must print back
// identically, directly and through the generic form; the generic form must carry every value as
// a property (<{...}>) in carriers upstream MLIR parses.

builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
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

// CHECK:      builtin.module {
// CHECK-NEXT: runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
// CHECK-NEXT: model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516e-06, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
// CHECK-NEXT: config <max_seq_len = 4, activation_dtype = f32, token_dtype = i32, kv_dtype = f32, ring_slots = 2, alignment = 16>
// CHECK-NEXT: weights <uris = ["tiny.gguf"], sha256 = [], sizes = []> {
// CHECK-NEXT: %orch = runplan.orchestrator : !runplan.stage
// CHECK-NEXT: runplan.tensor "token_embd.weight" F32 [8, 16] shard 0 offset 0 bytes 512
// CHECK-NEXT: runplan.tensor "blk.0.attn_norm.weight" F32 [8] shard 0 offset 512 bytes 32 block 0
// CHECK-NEXT: runplan.tensor "blk.1.attn_norm.weight" F32 [8] shard 0 offset 544 bytes 32 block 1
// CHECK-NEXT: runplan.tensor "output_norm.weight" F32 [8] shard 0 offset 576 bytes 32
// CHECK-NEXT: runplan.tensor "output.weight" F32 [8, 16] shard 0 offset 608 bytes 512
// CHECK-NEXT: %s0 = runplan.stage 0 on "node-a" layers [0, 1) : !runplan.stage
// CHECK-NEXT: %s1 = runplan.stage 1 on "node-c" layers [1, 2) : !runplan.stage
// CHECK-NEXT: runplan.edge "tok.in" token_in %orch -> %s0 object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
// CHECK-NEXT: runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
// CHECK-NEXT: runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
// CHECK-NEXT: runplan.provision_stage %s0 of 2 on "node-a" layers [0, 1) blocks 2 max_seq_len 4 embedding
// CHECK-NEXT: weights <uris = ["tiny.gguf"], sha256 = [], sizes = []>
// CHECK-NEXT: in <edge_id = "tok.in", kind = token_in, peer_node_id = "orchestrator", object_spec = <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16>, ring_spec = <slots = 2, slot_bytes = 16>>
// CHECK-NEXT: out <edge_id = "act.0", kind = activation, peer_node_id = "node-c", object_spec = <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128>, ring_spec = <slots = 2, slot_bytes = 128>>
// CHECK-NEXT: tensors [
// CHECK-NEXT: "token_embd.weight" F32 [8, 16] shard 0 offset 0 bytes 512,
// CHECK-NEXT: "blk.0.attn_norm.weight" F32 [8] shard 0 offset 512 bytes 32]
// CHECK-NEXT: runplan.provision_stage %s1 of 2 on "node-c" layers [1, 2) blocks 2 max_seq_len 4 head
// CHECK-NEXT: weights <uris = ["tiny.gguf"], sha256 = [], sizes = []>
// CHECK-NEXT: in <edge_id = "act.0", kind = activation, peer_node_id = "node-a", object_spec = <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128>, ring_spec = <slots = 2, slot_bytes = 128>>
// CHECK-NEXT: out <edge_id = "tok.out", kind = token_out, peer_node_id = "orchestrator", object_spec = <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16>, ring_spec = <slots = 2, slot_bytes = 16>>
// CHECK-NEXT: tensors [
// CHECK-NEXT: "blk.1.attn_norm.weight" F32 [8] shard 0 offset 544 bytes 32,
// CHECK-NEXT: "output_norm.weight" F32 [8] shard 0 offset 576 bytes 32,
// CHECK-NEXT: "output.weight" F32 [8, 16] shard 0 offset 608 bytes 512]
// CHECK-NEXT: }
// CHECK-NEXT: }

// GENERIC:      "runplan.plan"() <{sym_name = "tiny", nodes = ["node-a", "node-b", "node-c"], model = #runplan.model<architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516e-06, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">, config = #runplan.config<max_seq_len = 4, activation_dtype = f32, token_dtype = i32, kv_dtype = f32, ring_slots = 2, alignment = 16>, weights = #runplan.weights<uris = ["tiny.gguf"], sha256 = [], sizes = []>}> ({
// GENERIC-NEXT: %orch = "runplan.orchestrator"() : () -> !runplan.stage
// GENERIC-NEXT: "runplan.tensor"() <{tensor_name = "token_embd.weight", ggml_type = "F32", shape = array<i64: 8, 16>, shard = 0 : i64, offset = 0 : i64, n_bytes = 512 : i64, block = -1 : i64}> : () -> ()
// GENERIC-NEXT: "runplan.tensor"() <{tensor_name = "blk.0.attn_norm.weight", ggml_type = "F32", shape = array<i64: 8>, shard = 0 : i64, offset = 512 : i64, n_bytes = 32 : i64, block = 0 : i64}> : () -> ()
// GENERIC-NEXT: "runplan.tensor"() <{tensor_name = "blk.1.attn_norm.weight", ggml_type = "F32", shape = array<i64: 8>, shard = 0 : i64, offset = 544 : i64, n_bytes = 32 : i64, block = 1 : i64}> : () -> ()
// GENERIC:      %s0 = "runplan.stage"() <{index = 0 : i64, node_id = "node-a", layer_start = 0 : i64, layer_end = 1 : i64}> : () -> !runplan.stage
// GENERIC:      "runplan.edge"(%orch, %s0) <{edge_id = "tok.in", kind = #runplan<edge_kind token_in>, object_spec = #runplan.object<kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16>, ring_spec = #runplan.ring<slots = 2, slot_bytes = 16>}> : (!runplan.stage, !runplan.stage) -> ()
// GENERIC:      "runplan.provision_stage"(%s0) <{stage_count = 2 : i64, node_id = "node-a", layer_start = 0 : i64, layer_end = 1 : i64, block_count = 2 : i64, has_embedding, max_seq_len = 4 : i64, weights = #runplan.weights<uris = ["tiny.gguf"], sha256 = [], sizes = []>, tensors = [#runplan.slice<"token_embd.weight" F32 [8, 16] shard 0 offset 0 bytes 512>, #runplan.slice<"blk.0.attn_norm.weight" F32 [8] shard 0 offset 512 bytes 32>], inbound = #runplan.edge_provision<edge_id = "tok.in", kind = token_in, peer_node_id = "orchestrator", object_spec = <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16>, ring_spec = <slots = 2, slot_bytes = 16>>, outbound = #runplan.edge_provision<edge_id = "act.0", kind = activation, peer_node_id = "node-c", object_spec = <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128>, ring_spec = <slots = 2, slot_bytes = 128>>}> : (!runplan.stage) -> ()
