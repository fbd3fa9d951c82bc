// RUN: pipeplan-opt %s --split-input-file --verify-diagnostics -p runplan-verify | filecheck %s --check-prefix=VALID
// RUN: pipeplan-opt %s --split-input-file --disable-verify --verify-diagnostics -p runplan-verify | filecheck %s --check-prefix=PASS
// RUN: pipeplan-opt %s --split-input-file --disable-verify --verify-diagnostics -p runplan-project-provisioning | filecheck %s --check-prefix=PROJ

// runplan-verify and runplan-project-provisioning as passes (the op verifiers being skipped with
// --disable-verify): a valid plan goes through runplan-verify unchanged; an invalid one (RP-AR-1,
// stage 1 on a node outside the pool) fails both passes with the verifier's message, and the
// projection adds no provision to an invalid plan.

// VALID: runplan.plan @three nodes ["host-a", "host-b", "host-c", "host-d"]
// VALID: %s1 = runplan.stage 1 on "host-b" layers [1, 2) : !runplan.stage
// VALID-NOT: runplan.provision_stage
// VALID: {{^// -{5}$}}
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

// -----

// PASS: {{^// -{5}$}}
// PASS-NEXT: [RP-AR-1] every stage must run on a node of the pool: stage 1 is assigned to unknown node 'host-z'
// PROJ: {{^// -{5}$}}
// PROJ-NEXT: [RP-AR-1] every stage must run on a node of the pool: stage 1 is assigned to unknown node 'host-z'
// PROJ-NOT: runplan.provision_stage
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
    %s1 = runplan.stage 1 on "host-z" layers [1, 2) : !runplan.stage
    %s2 = runplan.stage 2 on "host-a" layers [2, 3) : !runplan.stage
    runplan.edge "tok.in" token_in %orch -> %s0 object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "act.1" activation %s1 -> %s2 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s2 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}
