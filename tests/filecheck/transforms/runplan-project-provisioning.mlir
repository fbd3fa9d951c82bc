// RUN: pipeplan-opt %s -p runplan-project-provisioning | filecheck %s
// RUN: pipeplan-opt %s -p runplan-project-provisioning,runplan-project-provisioning | filecheck %s
// RUN: pipeplan-opt %s -p runplan-project-provisioning | pipeplan-opt -p runplan-verify | filecheck %s

// RP-PP-1..6, RP-OS-4: a 3-stage plan of a 3-block fake model with a TIED embedding (no
// output.weight) on nodes host-d, host-b, host-a of a 4-node pool (host-c unused). The pass adds one
// runplan.provision_stage per stage, in stage order, after the edges; running it twice gives the
// same ops (idempotent); its output passes runplan-verify.
// Stage 0 gets token_embd + block 0; stage 1 only block 1; stage 2 block 2, output_norm and the
// tied token_embd. Inbound peers name the producer's node (or "orchestrator"), outbound peers the
// consumer's node: node ids only, never actor addresses. Specs are copied from the edges.

builtin.module {
  runplan.plan @three nodes ["host-a", "host-b", "host-c", "host-d"]
      model <architecture = "llama", name = "tiny-tied", block_count = 3, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32, 32], files = ["tiny.gguf"], sha256 = "00ff">
      config <max_seq_len = 4, activation_dtype = f32, token_dtype = i32, kv_dtype = f32, ring_slots = 2, alignment = 16>
      weights <uris = ["tiny.gguf"], sha256 = [], sizes = []> {
    %orch = runplan.orchestrator : !runplan.stage
    runplan.tensor "token_embd.weight" F32 [8, 16] shard 0 offset 0 bytes 512
    runplan.tensor "blk.0.attn_norm.weight" F32 [8] shard 0 offset 512 bytes 32 block 0
    runplan.tensor "blk.1.attn_norm.weight" F32 [8] shard 0 offset 544 bytes 32 block 1
    runplan.tensor "blk.2.attn_norm.weight" F32 [8] shard 0 offset 576 bytes 32 block 2
    runplan.tensor "output_norm.weight" F32 [8] shard 0 offset 608 bytes 32
    %s0 = runplan.stage 0 on "host-d" layers [0, 1) : !runplan.stage
    %s1 = runplan.stage 1 on "host-b" layers [1, 2) : !runplan.stage
    %s2 = runplan.stage 2 on "host-a" layers [2, 3) : !runplan.stage
    runplan.edge "tok.in" token_in %orch -> %s0 object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "act.1" activation %s1 -> %s2 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s2 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// CHECK:      runplan.edge "tok.out" token_out %s2 -> %orch
// CHECK-NEXT: runplan.provision_stage %s0 of 3 on "host-d" layers [0, 1) blocks 3 max_seq_len 4 embedding{{$}}
// CHECK-NEXT:   weights <uris = ["tiny.gguf"], sha256 = [], sizes = []>
// CHECK-NEXT:   in <edge_id = "tok.in", kind = token_in, peer_node_id = "orchestrator", object_spec = <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16>, ring_spec = <slots = 2, slot_bytes = 16>>
// CHECK-NEXT:   out <edge_id = "act.0", kind = activation, peer_node_id = "host-b", object_spec = <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128>, ring_spec = <slots = 2, slot_bytes = 128>>
// CHECK-NEXT:   tensors [
// CHECK-NEXT:     "token_embd.weight" F32 [8, 16] shard 0 offset 0 bytes 512,
// CHECK-NEXT:     "blk.0.attn_norm.weight" F32 [8] shard 0 offset 512 bytes 32]
// CHECK-NEXT: runplan.provision_stage %s1 of 3 on "host-b" layers [1, 2) blocks 3 max_seq_len 4{{$}}
// CHECK-NEXT:   weights <uris = ["tiny.gguf"], sha256 = [], sizes = []>
// CHECK-NEXT:   in <edge_id = "act.0", kind = activation, peer_node_id = "host-d", object_spec = <kind = activation, {{.*}}, max_extent = 128>, ring_spec = <slots = 2, slot_bytes = 128>>
// CHECK-NEXT:   out <edge_id = "act.1", kind = activation, peer_node_id = "host-a", object_spec = <kind = activation, {{.*}}, max_extent = 128>, ring_spec = <slots = 2, slot_bytes = 128>>
// CHECK-NEXT:   tensors [
// CHECK-NEXT:     "blk.1.attn_norm.weight" F32 [8] shard 0 offset 544 bytes 32]
// CHECK-NEXT: runplan.provision_stage %s2 of 3 on "host-a" layers [2, 3) blocks 3 max_seq_len 4 head{{$}}
// CHECK-NEXT:   weights <uris = ["tiny.gguf"], sha256 = [], sizes = []>
// CHECK-NEXT:   in <edge_id = "act.1", kind = activation, peer_node_id = "host-b", {{.*}}>
// CHECK-NEXT:   out <edge_id = "tok.out", kind = token_out, peer_node_id = "orchestrator", object_spec = <kind = token, {{.*}}, max_extent = 16>, ring_spec = <slots = 2, slot_bytes = 16>>
// CHECK-NEXT:   tensors [
// CHECK-NEXT:     "token_embd.weight" F32 [8, 16] shard 0 offset 0 bytes 512,
// CHECK-NEXT:     "blk.2.attn_norm.weight" F32 [8] shard 0 offset 576 bytes 32,
// CHECK-NEXT:     "output_norm.weight" F32 [8] shard 0 offset 608 bytes 32]
// CHECK-NEXT: }
// CHECK-NOT:  runplan.provision_stage
