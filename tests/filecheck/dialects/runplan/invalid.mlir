// RUN: %verify-diag --parsing-diagnostics | filecheck %s

// One case per runplan verifier message (seed 000 invariants, cited by contract ID). Every case is
// the valid 2-block, 2-stage fake plan of ops.mlir (or its projected form) with one change.
// xdsl's --verify-diagnostics prints the message of the first verifier failure and exits 0;
// --parsing-diagnostics does the same for a parse error, which is how a typed attribute's verifier
// (node spec, model facts, config, weight source, object/ring spec, tensor slice, kinds) rejects a
// record while the text is parsed (printed after the source line and a caret, so not anchored).

// RP-LA-5: stage index -1 is negative
// CHECK: {{^}}[RP-LA-5] stage indices must be 0..stage_count-1: stage index -1 is negative
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
      config <max_seq_len = 4, activation_dtype = f32, token_dtype = i32, kv_dtype = f32, ring_slots = 2, alignment = 16>
      weights <uris = ["tiny.gguf"], sha256 = [], sizes = []> {
    %orch = runplan.orchestrator : !runplan.stage
    runplan.tensor "token_embd.weight" F32 [8, 16] shard 0 offset 0 bytes 512
    runplan.tensor "blk.0.attn_norm.weight" F32 [8] shard 0 offset 512 bytes 32 block 0
    runplan.tensor "blk.1.attn_norm.weight" F32 [8] shard 0 offset 544 bytes 32 block 1
    runplan.tensor "output_norm.weight" F32 [8] shard 0 offset 576 bytes 32
    runplan.tensor "output.weight" F32 [8, 16] shard 0 offset 608 bytes 512
    %s0 = runplan.stage -1 on "node-a" layers [0, 1) : !runplan.stage
    %s1 = runplan.stage 1 on "node-c" layers [1, 2) : !runplan.stage
    runplan.edge "tok.in" token_in %orch -> %s0 object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-AR-1: stage 1 has an empty node id
// CHECK: {{^}}[RP-AR-1] every stage must name a node of the pool: stage 1 has an empty node id
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
      config <max_seq_len = 4, activation_dtype = f32, token_dtype = i32, kv_dtype = f32, ring_slots = 2, alignment = 16>
      weights <uris = ["tiny.gguf"], sha256 = [], sizes = []> {
    %orch = runplan.orchestrator : !runplan.stage
    runplan.tensor "token_embd.weight" F32 [8, 16] shard 0 offset 0 bytes 512
    runplan.tensor "blk.0.attn_norm.weight" F32 [8] shard 0 offset 512 bytes 32 block 0
    runplan.tensor "blk.1.attn_norm.weight" F32 [8] shard 0 offset 544 bytes 32 block 1
    runplan.tensor "output_norm.weight" F32 [8] shard 0 offset 576 bytes 32
    runplan.tensor "output.weight" F32 [8, 16] shard 0 offset 608 bytes 512
    %s0 = runplan.stage 0 on "node-a" layers [0, 1) : !runplan.stage
    %s1 = runplan.stage 1 on "" layers [1, 2) : !runplan.stage
    runplan.edge "tok.in" token_in %orch -> %s0 object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-LA-4: stage 1 has range [1, 1)
// CHECK: {{^}}[RP-LA-4] every stage must have exactly one non-empty layer range: stage 1 has range [1, 1)
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
      config <max_seq_len = 4, activation_dtype = f32, token_dtype = i32, kv_dtype = f32, ring_slots = 2, alignment = 16>
      weights <uris = ["tiny.gguf"], sha256 = [], sizes = []> {
    %orch = runplan.orchestrator : !runplan.stage
    runplan.tensor "token_embd.weight" F32 [8, 16] shard 0 offset 0 bytes 512
    runplan.tensor "blk.0.attn_norm.weight" F32 [8] shard 0 offset 512 bytes 32 block 0
    runplan.tensor "blk.1.attn_norm.weight" F32 [8] shard 0 offset 544 bytes 32 block 1
    runplan.tensor "output_norm.weight" F32 [8] shard 0 offset 576 bytes 32
    runplan.tensor "output.weight" F32 [8, 16] shard 0 offset 608 bytes 512
    %s0 = runplan.stage 0 on "node-a" layers [0, 1) : !runplan.stage
    %s1 = runplan.stage 1 on "node-c" layers [1, 1) : !runplan.stage
    runplan.edge "tok.in" token_in %orch -> %s0 object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-LA-3: stage 1 has range [1, 3) but the model has 2 blocks
// CHECK: {{^}}[RP-LA-3] stage ranges must lie in the model's block range [0, block_count): stage 1 has range [1, 3) but the model has 2 blocks
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
      config <max_seq_len = 4, activation_dtype = f32, token_dtype = i32, kv_dtype = f32, ring_slots = 2, alignment = 16>
      weights <uris = ["tiny.gguf"], sha256 = [], sizes = []> {
    %orch = runplan.orchestrator : !runplan.stage
    runplan.tensor "token_embd.weight" F32 [8, 16] shard 0 offset 0 bytes 512
    runplan.tensor "blk.0.attn_norm.weight" F32 [8] shard 0 offset 512 bytes 32 block 0
    runplan.tensor "blk.1.attn_norm.weight" F32 [8] shard 0 offset 544 bytes 32 block 1
    runplan.tensor "output_norm.weight" F32 [8] shard 0 offset 576 bytes 32
    runplan.tensor "output.weight" F32 [8, 16] shard 0 offset 608 bytes 512
    %s0 = runplan.stage 0 on "node-a" layers [0, 1) : !runplan.stage
    %s1 = runplan.stage 1 on "node-c" layers [1, 3) : !runplan.stage
    runplan.edge "tok.in" token_in %orch -> %s0 object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-AR-6: a tensor has an empty name
// CHECK: {{^}}[RP-AR-6] model facts must be consistent with the tensor index: a tensor has an empty name
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
      config <max_seq_len = 4, activation_dtype = f32, token_dtype = i32, kv_dtype = f32, ring_slots = 2, alignment = 16>
      weights <uris = ["tiny.gguf"], sha256 = [], sizes = []> {
    %orch = runplan.orchestrator : !runplan.stage
    runplan.tensor "token_embd.weight" F32 [8, 16] shard 0 offset 0 bytes 512
    runplan.tensor "blk.0.attn_norm.weight" F32 [8] shard 0 offset 512 bytes 32 block 0
    runplan.tensor "blk.1.attn_norm.weight" F32 [8] shard 0 offset 544 bytes 32 block 1
    runplan.tensor "" F32 [8] shard 0 offset 576 bytes 32
    runplan.tensor "output.weight" F32 [8, 16] shard 0 offset 608 bytes 512
    %s0 = runplan.stage 0 on "node-a" layers [0, 1) : !runplan.stage
    %s1 = runplan.stage 1 on "node-c" layers [1, 2) : !runplan.stage
    runplan.edge "tok.in" token_in %orch -> %s0 object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-AR-6: has a negative shard, offset or size
// CHECK: {{^}}[RP-AR-6] model facts must be consistent with the tensor index: tensor 'output_norm.weight' has a negative shard, offset or size
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
      config <max_seq_len = 4, activation_dtype = f32, token_dtype = i32, kv_dtype = f32, ring_slots = 2, alignment = 16>
      weights <uris = ["tiny.gguf"], sha256 = [], sizes = []> {
    %orch = runplan.orchestrator : !runplan.stage
    runplan.tensor "token_embd.weight" F32 [8, 16] shard 0 offset 0 bytes 512
    runplan.tensor "blk.0.attn_norm.weight" F32 [8] shard 0 offset 512 bytes 32 block 0
    runplan.tensor "blk.1.attn_norm.weight" F32 [8] shard 0 offset 544 bytes 32 block 1
    runplan.tensor "output_norm.weight" F32 [8] shard 0 offset -576 bytes 32
    runplan.tensor "output.weight" F32 [8, 16] shard 0 offset 608 bytes 512
    %s0 = runplan.stage 0 on "node-a" layers [0, 1) : !runplan.stage
    %s1 = runplan.stage 1 on "node-c" layers [1, 2) : !runplan.stage
    runplan.edge "tok.in" token_in %orch -> %s0 object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-AR-6: has shape [0]; dimensions must be positive
// CHECK: {{^}}[RP-AR-6] model facts must be consistent with the tensor index: tensor 'output_norm.weight' has shape [0]; dimensions must be positive
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
      config <max_seq_len = 4, activation_dtype = f32, token_dtype = i32, kv_dtype = f32, ring_slots = 2, alignment = 16>
      weights <uris = ["tiny.gguf"], sha256 = [], sizes = []> {
    %orch = runplan.orchestrator : !runplan.stage
    runplan.tensor "token_embd.weight" F32 [8, 16] shard 0 offset 0 bytes 512
    runplan.tensor "blk.0.attn_norm.weight" F32 [8] shard 0 offset 512 bytes 32 block 0
    runplan.tensor "blk.1.attn_norm.weight" F32 [8] shard 0 offset 544 bytes 32 block 1
    runplan.tensor "output_norm.weight" F32 [0] shard 0 offset 576 bytes 32
    runplan.tensor "output.weight" F32 [8, 16] shard 0 offset 608 bytes 512
    %s0 = runplan.stage 0 on "node-a" layers [0, 1) : !runplan.stage
    %s1 = runplan.stage 1 on "node-c" layers [1, 2) : !runplan.stage
    runplan.edge "tok.in" token_in %orch -> %s0 object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-AR-6: has block 0 but its name says 1
// CHECK: {{^}}[RP-AR-6] model facts must be consistent with the tensor index: tensor 'blk.1.attn_norm.weight' has block 0 but its name says 1
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
      config <max_seq_len = 4, activation_dtype = f32, token_dtype = i32, kv_dtype = f32, ring_slots = 2, alignment = 16>
      weights <uris = ["tiny.gguf"], sha256 = [], sizes = []> {
    %orch = runplan.orchestrator : !runplan.stage
    runplan.tensor "token_embd.weight" F32 [8, 16] shard 0 offset 0 bytes 512
    runplan.tensor "blk.0.attn_norm.weight" F32 [8] shard 0 offset 512 bytes 32 block 0
    runplan.tensor "blk.1.attn_norm.weight" F32 [8] shard 0 offset 544 bytes 32 block 0
    runplan.tensor "output_norm.weight" F32 [8] shard 0 offset 576 bytes 32
    runplan.tensor "output.weight" F32 [8, 16] shard 0 offset 608 bytes 512
    %s0 = runplan.stage 0 on "node-a" layers [0, 1) : !runplan.stage
    %s1 = runplan.stage 1 on "node-c" layers [1, 2) : !runplan.stage
    runplan.edge "tok.in" token_in %orch -> %s0 object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-AR-6: has unknown ggml type 'F33'
// CHECK: {{^}}[RP-AR-6] model facts must be consistent with the tensor index: tensor 'output_norm.weight' has unknown ggml type 'F33'
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
      config <max_seq_len = 4, activation_dtype = f32, token_dtype = i32, kv_dtype = f32, ring_slots = 2, alignment = 16>
      weights <uris = ["tiny.gguf"], sha256 = [], sizes = []> {
    %orch = runplan.orchestrator : !runplan.stage
    runplan.tensor "token_embd.weight" F32 [8, 16] shard 0 offset 0 bytes 512
    runplan.tensor "blk.0.attn_norm.weight" F32 [8] shard 0 offset 512 bytes 32 block 0
    runplan.tensor "blk.1.attn_norm.weight" F32 [8] shard 0 offset 544 bytes 32 block 1
    runplan.tensor "output_norm.weight" F33 [8] shard 0 offset 576 bytes 32
    runplan.tensor "output.weight" F32 [8, 16] shard 0 offset 608 bytes 512
    %s0 = runplan.stage 0 on "node-a" layers [0, 1) : !runplan.stage
    %s1 = runplan.stage 1 on "node-c" layers [1, 2) : !runplan.stage
    runplan.edge "tok.in" token_in %orch -> %s0 object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-AR-6: has 40 bytes but F32 [8] takes 32
// CHECK: {{^}}[RP-AR-6] model facts must be consistent with the tensor index: tensor 'output_norm.weight' has 40 bytes but F32 [8] takes 32
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
      config <max_seq_len = 4, activation_dtype = f32, token_dtype = i32, kv_dtype = f32, ring_slots = 2, alignment = 16>
      weights <uris = ["tiny.gguf"], sha256 = [], sizes = []> {
    %orch = runplan.orchestrator : !runplan.stage
    runplan.tensor "token_embd.weight" F32 [8, 16] shard 0 offset 0 bytes 512
    runplan.tensor "blk.0.attn_norm.weight" F32 [8] shard 0 offset 512 bytes 32 block 0
    runplan.tensor "blk.1.attn_norm.weight" F32 [8] shard 0 offset 544 bytes 32 block 1
    runplan.tensor "output_norm.weight" F32 [8] shard 0 offset 576 bytes 40
    runplan.tensor "output.weight" F32 [8, 16] shard 0 offset 608 bytes 512
    %s0 = runplan.stage 0 on "node-a" layers [0, 1) : !runplan.stage
    %s1 = runplan.stage 1 on "node-c" layers [1, 2) : !runplan.stage
    runplan.edge "tok.in" token_in %orch -> %s0 object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-EA-1: an edge has an empty id
// CHECK: {{^}}[RP-EA-1] every edge id must be unique and non-empty: an edge has an empty id
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
    runplan.edge "" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-AR-5: edge 'act.0' has kind 'activations'
// CHECK: [RP-AR-5] edge kind must be token_in, activation or token_out: unknown edge kind 'activations' (token_in, activation, token_out)
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
    runplan.edge "act.0" activations %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-AR-7: an edge uses stage %s1 before the op that defines it
// CHECK: {{^}}[RP-AR-7] stage values are defined before they are used: 'runplan.edge' operand 1 (%s1) is used before its definition
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
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    %s1 = runplan.stage 1 on "node-c" layers [1, 2) : !runplan.stage
    runplan.edge "tok.in" token_in %orch -> %s0 object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-EA-2: edge 'act.0' has the same producer and consumer (stage 1)
// CHECK: {{^}}[RP-EA-2] every edge has exactly one producer and one consumer: edge 'act.0' has the same producer and consumer (%s1)
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
    runplan.edge "act.0" activation %s1 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-OS-1: edge 'act.0' has no object spec dictionary
// CHECK: {{^}}[RP-OS-1] every edge has an ObjectSpec and a RingSpec: edge 'act.0' has no object spec
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
    runplan.edge "act.0" activation %s0 -> %s1 ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-OS-1: edge 'act.0' has unexpected key 'actor'
// CHECK: [RP-OS-1] object spec must hold exactly kind, dtype, dtype_width, shape, layout, alignment, max_extent: object spec has unexpected key 'actor'
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128, actor = "x"> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-OS-1: edge 'act.0' lacks key 'slot_bytes'
// CHECK: [RP-OS-1] ring spec must hold exactly slots, slot_bytes: ring spec lacks key 'slot_bytes'
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-OS-1: edge 'act.0': 'layout' must be string
// (a record value of the wrong kind is a parse error of the record: 'layout' must be a string)
// CHECK: string literal expected
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = 1, alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-OS-3: edge 'act.0' (activation) has a 'token' object spec
// CHECK: {{^}}[RP-OS-3] token edges use token object specs, activation edges activation object specs: edge 'act.0' (activation) has a 'token' object spec
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = token, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-OS-5: edge 'act.0' has unknown dtype 'f8'
// CHECK: [RP-OS-5] dtypes must have a known width: unknown dtype 'f8' (i32, f32, f16, bf16)
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f8, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-OS-5: edge 'act.0' has dtype_width 2 but f32 is 4 bytes
// CHECK: [RP-OS-5] object specs must have a valid extent, alignment, dtype width, shape and layout: activation object spec has dtype_width 2 but f32 is 4 bytes
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 2, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-OS-5: edge 'act.0' has unsupported layout 'col_major'
// CHECK: [RP-OS-5] object specs must have a valid extent, alignment, dtype width, shape and layout: activation object spec has unsupported layout 'col_major'
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "col_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-OS-5: edge 'act.0' has alignment 24, which is not a positive power of two
// CHECK: [RP-OS-5] object specs must have a valid extent, alignment, dtype width, shape and layout: activation object spec has alignment 24, which is not a positive power of two
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 24, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-OS-5: edge 'act.0' has unsupported shape [4, 0]
// CHECK: [RP-OS-5] object specs must have a valid extent, alignment, dtype width, shape and layout: activation object spec has unsupported shape [4, 0]
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 0], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-OS-2: edge 'act.0' has f32 max_extent 256 but 4 * 8 * 4 (f32) = 128
// CHECK: {{^}}[RP-OS-2] activation max_extent must be max_seq_len * hidden_dim * dtype_width_bytes: edge 'act.0' has f32 max_extent 256 but 4 * 8 * 4 (f32) = 128
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [8, 8], layout = "row_major", alignment = 16, max_extent = 256> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-OS-5: edge 'act.0' has max_extent 128 but shape [4, 4] of f32 takes 64 bytes
// CHECK: [RP-OS-5] object specs must have a valid extent, alignment, dtype width, shape and layout: activation object spec has max_extent 128 but shape [4, 4] of f32 takes 64 bytes
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 4], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-OS-5: edge 'tok.in' has token dtype f32 but the config's is i32
// CHECK: {{^}}[RP-OS-5] object specs must have a valid extent, alignment, dtype width, shape and layout: edge 'tok.in' has token dtype f32 but the config's is i32
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
    runplan.edge "tok.in" token_in %orch -> %s0 object <kind = token, dtype = f32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-OS-5: edge 'act.0' has unsupported shape [8, 4]; a activation object is [4, 8]
// CHECK: {{^}}[RP-OS-5] object specs must have a valid extent, alignment, dtype width, shape and layout: edge 'act.0' has unsupported shape [8, 4]; a activation object is [4, 8]
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [8, 4], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-OS-5: edge 'act.0' has alignment 32 but the config's is 16
// CHECK: {{^}}[RP-OS-5] object specs must have a valid extent, alignment, dtype width, shape and layout: edge 'act.0' has alignment 32 but the config's is 16
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 32, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-OS-5: edge 'act.0' has 3 ring slots but the config asks for 2
// CHECK: {{^}}[RP-OS-5] ring specs must hold at least one slot of at least max_extent bytes, aligned: edge 'act.0' has 3 ring slots but the config asks for 2
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 3, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-OS-5: edge 'act.0' has slot_bytes 64 < max_extent 128
// CHECK: {{^}}[RP-OS-5] ring specs must hold at least one slot of at least max_extent bytes, aligned: edge 'act.0' has slot_bytes 64 < max_extent 128
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 64>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-OS-5: edge 'act.0' has slot_bytes 136, not a multiple of alignment 16
// CHECK: {{^}}[RP-OS-5] ring specs must hold at least one slot of at least max_extent bytes, aligned: edge 'act.0' has slot_bytes 136, not a multiple of alignment 16
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 136>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-OS-5: the plan lacks key 'kv_dtype'
// CHECK: [RP-OS-5] runtime config must hold exactly max_seq_len, activation_dtype, token_dtype, kv_dtype, ring_slots, alignment: runtime config lacks key 'kv_dtype'
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
      config <max_seq_len = 4, activation_dtype = f32, token_dtype = i32, ring_slots = 2, alignment = 16>
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
  }
}

// -----

// RP-AR-6: the plan has unexpected key 'hidden'
// CHECK: [RP-AR-6] model facts must hold exactly architecture, name, block_count, embedding_length, head_count, head_count_kv, feed_forward_length, vocab_size, context_length, rope_dimension_count, rope_freq_base, rms_norm_eps, alignment, block_bytes, files: model facts has unexpected key 'hidden'
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, hidden = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
  }
}

// -----

// RP-AR-6: the plan: 'uris' must be array of strings
// (a record value of the wrong kind is a parse error of the record: 'uris' must be strings)
// CHECK: string literal expected
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
      config <max_seq_len = 4, activation_dtype = f32, token_dtype = i32, kv_dtype = f32, ring_slots = 2, alignment = 16>
      weights <uris = [1], sha256 = [], sizes = []> {
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
  }
}

// -----

// RP-OS-5: max_seq_len is 0
// CHECK: [RP-OS-5] the runtime config must give valid object sizes: max_seq_len is 0
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
      config <max_seq_len = 0, activation_dtype = f32, token_dtype = i32, kv_dtype = f32, ring_slots = 2, alignment = 16>
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
  }
}

// -----

// RP-OS-5: kv_dtype 'q8' has no known width
// CHECK: [RP-OS-5] dtypes must have a known width: unknown dtype 'q8' (i32, f32, f16, bf16)
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
      config <max_seq_len = 4, activation_dtype = f32, token_dtype = i32, kv_dtype = q8, ring_slots = 2, alignment = 16>
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
  }
}

// -----

// RP-OS-5: ring_slots is 0
// CHECK: [RP-OS-5] the runtime config must give valid object sizes: ring_slots is 0
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
      config <max_seq_len = 4, activation_dtype = f32, token_dtype = i32, kv_dtype = f32, ring_slots = 0, alignment = 16>
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
  }
}

// -----

// RP-OS-5: alignment 12 is not a positive power of two
// CHECK: [RP-OS-5] the runtime config must give valid object sizes: alignment 12 is not a positive power of two
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
      config <max_seq_len = 4, activation_dtype = f32, token_dtype = i32, kv_dtype = f32, ring_slots = 2, alignment = 12>
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
  }
}

// -----

// RP-AR-6: vocab_size is 0
// CHECK: [RP-AR-6] model facts must be consistent with the requested stage layout: vocab_size is 0
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 0, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
  }
}

// -----

// RP-AR-6: head_count 2 is not a multiple of head_count_kv 3
// CHECK: [RP-AR-6] model facts must be consistent with the requested stage layout: head_count 2 is not a multiple of head_count_kv 3
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 3, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
  }
}

// -----

// RP-AR-6: block_bytes has 3 entries but block_count is 2
// CHECK: [RP-AR-6] model facts must be consistent with the requested stage layout: block_bytes has 3 entries but block_count is 2
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32, 0], files = ["tiny.gguf"], sha256 = "00ff">
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
  }
}

// -----

// RP-AR-6: the weight source has 1 uris but 2 sizes
// CHECK: [RP-AR-6] model facts must be consistent with the requested stage layout: the weight source has 1 uris but 2 sizes
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
      config <max_seq_len = 4, activation_dtype = f32, token_dtype = i32, kv_dtype = f32, ring_slots = 2, alignment = 16>
      weights <uris = ["tiny.gguf"], sha256 = [], sizes = [1, 2]> {
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
  }
}

// -----

// RP-AR-6: tensor 'output_norm.weight' appears twice in the tensor index
// CHECK: {{^}}[RP-AR-6] model facts must be consistent with the requested stage layout: tensor 'output_norm.weight' appears twice in the tensor index
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
      config <max_seq_len = 4, activation_dtype = f32, token_dtype = i32, kv_dtype = f32, ring_slots = 2, alignment = 16>
      weights <uris = ["tiny.gguf"], sha256 = [], sizes = []> {
    %orch = runplan.orchestrator : !runplan.stage
    runplan.tensor "token_embd.weight" F32 [8, 16] shard 0 offset 0 bytes 512
    runplan.tensor "blk.0.attn_norm.weight" F32 [8] shard 0 offset 512 bytes 32 block 0
    runplan.tensor "blk.1.attn_norm.weight" F32 [8] shard 0 offset 544 bytes 32 block 1
    runplan.tensor "output_norm.weight" F32 [8] shard 0 offset 576 bytes 32
    runplan.tensor "output_norm.weight" F32 [8, 16] shard 0 offset 608 bytes 512
    %s0 = runplan.stage 0 on "node-a" layers [0, 1) : !runplan.stage
    %s1 = runplan.stage 1 on "node-c" layers [1, 2) : !runplan.stage
    runplan.edge "tok.in" token_in %orch -> %s0 object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-AR-6: tensor 'blk.2.attn_norm.weight' is in block 2 but block_count is 2
// CHECK: {{^}}[RP-AR-6] model facts must be consistent with the requested stage layout: tensor 'blk.2.attn_norm.weight' is in block 2 but block_count is 2
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
      config <max_seq_len = 4, activation_dtype = f32, token_dtype = i32, kv_dtype = f32, ring_slots = 2, alignment = 16>
      weights <uris = ["tiny.gguf"], sha256 = [], sizes = []> {
    %orch = runplan.orchestrator : !runplan.stage
    runplan.tensor "token_embd.weight" F32 [8, 16] shard 0 offset 0 bytes 512
    runplan.tensor "blk.0.attn_norm.weight" F32 [8] shard 0 offset 512 bytes 32 block 0
    runplan.tensor "blk.2.attn_norm.weight" F32 [8] shard 0 offset 544 bytes 32 block 2
    runplan.tensor "output_norm.weight" F32 [8] shard 0 offset 576 bytes 32
    runplan.tensor "output.weight" F32 [8, 16] shard 0 offset 608 bytes 512
    %s0 = runplan.stage 0 on "node-a" layers [0, 1) : !runplan.stage
    %s1 = runplan.stage 1 on "node-c" layers [1, 2) : !runplan.stage
    runplan.edge "tok.in" token_in %orch -> %s0 object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-AR-6: tensor 'output.weight' is in shard 1 but the weight source has 1 uris
// CHECK: {{^}}[RP-AR-6] model facts must be consistent with the requested stage layout: tensor 'output.weight' is in shard 1 but the weight source has 1 uris
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
      config <max_seq_len = 4, activation_dtype = f32, token_dtype = i32, kv_dtype = f32, ring_slots = 2, alignment = 16>
      weights <uris = ["tiny.gguf"], sha256 = [], sizes = []> {
    %orch = runplan.orchestrator : !runplan.stage
    runplan.tensor "token_embd.weight" F32 [8, 16] shard 0 offset 0 bytes 512
    runplan.tensor "blk.0.attn_norm.weight" F32 [8] shard 0 offset 512 bytes 32 block 0
    runplan.tensor "blk.1.attn_norm.weight" F32 [8] shard 0 offset 544 bytes 32 block 1
    runplan.tensor "output_norm.weight" F32 [8] shard 0 offset 576 bytes 32
    runplan.tensor "output.weight" F32 [8, 16] shard 1 offset 608 bytes 512
    %s0 = runplan.stage 0 on "node-a" layers [0, 1) : !runplan.stage
    %s1 = runplan.stage 1 on "node-c" layers [1, 2) : !runplan.stage
    runplan.edge "tok.in" token_in %orch -> %s0 object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-AR-6: block 1 has no tensors but block_count is 2
// CHECK: {{^}}[RP-AR-6] model facts must be consistent with the requested stage layout: block 1 has no tensors but block_count is 2
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
      config <max_seq_len = 4, activation_dtype = f32, token_dtype = i32, kv_dtype = f32, ring_slots = 2, alignment = 16>
      weights <uris = ["tiny.gguf"], sha256 = [], sizes = []> {
    %orch = runplan.orchestrator : !runplan.stage
    runplan.tensor "token_embd.weight" F32 [8, 16] shard 0 offset 0 bytes 512
    runplan.tensor "blk.0.attn_norm.weight" F32 [8] shard 0 offset 512 bytes 32 block 0
        runplan.tensor "output_norm.weight" F32 [8] shard 0 offset 576 bytes 32
    runplan.tensor "output.weight" F32 [8, 16] shard 0 offset 608 bytes 512
    %s0 = runplan.stage 0 on "node-a" layers [0, 1) : !runplan.stage
    %s1 = runplan.stage 1 on "node-c" layers [1, 2) : !runplan.stage
    runplan.edge "tok.in" token_in %orch -> %s0 object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-AR-6: block_bytes[1] is 64 but the tensors of block 1 total 32 bytes
// CHECK: {{^}}[RP-AR-6] model facts must be consistent with the requested stage layout: block_bytes[1] is 64 but the tensors of block 1 total 32 bytes
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 64], files = ["tiny.gguf"], sha256 = "00ff">
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
  }
}

// -----

// RP-AR-2: stage 0 is assigned 2 times
// CHECK: {{^}}[RP-AR-2] each stage index is assigned exactly once: stage 0 is assigned 2 times
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
      config <max_seq_len = 4, activation_dtype = f32, token_dtype = i32, kv_dtype = f32, ring_slots = 2, alignment = 16>
      weights <uris = ["tiny.gguf"], sha256 = [], sizes = []> {
    %orch = runplan.orchestrator : !runplan.stage
    runplan.tensor "token_embd.weight" F32 [8, 16] shard 0 offset 0 bytes 512
    runplan.tensor "blk.0.attn_norm.weight" F32 [8] shard 0 offset 512 bytes 32 block 0
    runplan.tensor "blk.1.attn_norm.weight" F32 [8] shard 0 offset 544 bytes 32 block 1
    runplan.tensor "output_norm.weight" F32 [8] shard 0 offset 576 bytes 32
    runplan.tensor "output.weight" F32 [8, 16] shard 0 offset 608 bytes 512
    %s0 = runplan.stage 0 on "node-a" layers [0, 1) : !runplan.stage
    %s1 = runplan.stage 0 on "node-c" layers [1, 2) : !runplan.stage
    runplan.edge "tok.in" token_in %orch -> %s0 object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-AR-3: stage 1 is missing (stage 2 is out of range)
// CHECK: {{^}}[RP-AR-3] stage indices must be exactly 0..stage_count-1: stage 1 is missing (stage 2 is out of range)
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
      config <max_seq_len = 4, activation_dtype = f32, token_dtype = i32, kv_dtype = f32, ring_slots = 2, alignment = 16>
      weights <uris = ["tiny.gguf"], sha256 = [], sizes = []> {
    %orch = runplan.orchestrator : !runplan.stage
    runplan.tensor "token_embd.weight" F32 [8, 16] shard 0 offset 0 bytes 512
    runplan.tensor "blk.0.attn_norm.weight" F32 [8] shard 0 offset 512 bytes 32 block 0
    runplan.tensor "blk.1.attn_norm.weight" F32 [8] shard 0 offset 544 bytes 32 block 1
    runplan.tensor "output_norm.weight" F32 [8] shard 0 offset 576 bytes 32
    runplan.tensor "output.weight" F32 [8, 16] shard 0 offset 608 bytes 512
    %s0 = runplan.stage 0 on "node-a" layers [0, 1) : !runplan.stage
    %s1 = runplan.stage 2 on "node-c" layers [1, 2) : !runplan.stage
    runplan.edge "tok.in" token_in %orch -> %s0 object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-AR-4: the plan has no stages
// CHECK: {{^}}[RP-AR-4] the stage count must be between 1 and block_count: the plan has no stages
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
      config <max_seq_len = 4, activation_dtype = f32, token_dtype = i32, kv_dtype = f32, ring_slots = 2, alignment = 16>
      weights <uris = ["tiny.gguf"], sha256 = [], sizes = []> {
    %orch = runplan.orchestrator : !runplan.stage
    runplan.tensor "token_embd.weight" F32 [8, 16] shard 0 offset 0 bytes 512
    runplan.tensor "blk.0.attn_norm.weight" F32 [8] shard 0 offset 512 bytes 32 block 0
    runplan.tensor "blk.1.attn_norm.weight" F32 [8] shard 0 offset 544 bytes 32 block 1
    runplan.tensor "output_norm.weight" F32 [8] shard 0 offset 576 bytes 32
    runplan.tensor "output.weight" F32 [8, 16] shard 0 offset 608 bytes 512
  }
}

// -----

// RP-AR-4: 3 stages for 2 blocks
// CHECK: {{^}}[RP-AR-4] the stage count must be between 1 and block_count: 3 stages for 2 blocks
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
    %s2 = runplan.stage 2 on "node-b" layers [1, 2) : !runplan.stage
    runplan.edge "tok.in" token_in %orch -> %s0 object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-AR-1: stage 1 is assigned to unknown node 'node-z'
// CHECK: {{^}}[RP-AR-1] every stage must run on a node of the pool: stage 1 is assigned to unknown node 'node-z'
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
      config <max_seq_len = 4, activation_dtype = f32, token_dtype = i32, kv_dtype = f32, ring_slots = 2, alignment = 16>
      weights <uris = ["tiny.gguf"], sha256 = [], sizes = []> {
    %orch = runplan.orchestrator : !runplan.stage
    runplan.tensor "token_embd.weight" F32 [8, 16] shard 0 offset 0 bytes 512
    runplan.tensor "blk.0.attn_norm.weight" F32 [8] shard 0 offset 512 bytes 32 block 0
    runplan.tensor "blk.1.attn_norm.weight" F32 [8] shard 0 offset 544 bytes 32 block 1
    runplan.tensor "output_norm.weight" F32 [8] shard 0 offset 576 bytes 32
    runplan.tensor "output.weight" F32 [8, 16] shard 0 offset 608 bytes 512
    %s0 = runplan.stage 0 on "node-a" layers [0, 1) : !runplan.stage
    %s1 = runplan.stage 1 on "node-z" layers [1, 2) : !runplan.stage
    runplan.edge "tok.in" token_in %orch -> %s0 object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-LA-3: stage 0 starts at block 1
// CHECK: {{^}}[RP-LA-3] the union of stage ranges must cover the block range [0, block_count): stage 0 starts at block 1
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
      config <max_seq_len = 4, activation_dtype = f32, token_dtype = i32, kv_dtype = f32, ring_slots = 2, alignment = 16>
      weights <uris = ["tiny.gguf"], sha256 = [], sizes = []> {
    %orch = runplan.orchestrator : !runplan.stage
    runplan.tensor "token_embd.weight" F32 [8, 16] shard 0 offset 0 bytes 512
    runplan.tensor "blk.0.attn_norm.weight" F32 [8] shard 0 offset 512 bytes 32 block 0
    runplan.tensor "blk.1.attn_norm.weight" F32 [8] shard 0 offset 544 bytes 32 block 1
    runplan.tensor "output_norm.weight" F32 [8] shard 0 offset 576 bytes 32
    runplan.tensor "output.weight" F32 [8, 16] shard 0 offset 608 bytes 512
    %s0 = runplan.stage 0 on "node-a" layers [1, 2) : !runplan.stage
        runplan.edge "tok.in" token_in %orch -> %s0 object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
        runplan.edge "tok.out" token_out %s0 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-LA-1: stage 1 starts at block 2 but stage 0 ends at block 1
// CHECK: {{^}}[RP-LA-1] stage ranges must be contiguous: stage 1 starts at block 2 but stage 0 ends at block 1
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 3, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32, 32], files = ["tiny.gguf"], sha256 = "00ff">
      config <max_seq_len = 4, activation_dtype = f32, token_dtype = i32, kv_dtype = f32, ring_slots = 2, alignment = 16>
      weights <uris = ["tiny.gguf"], sha256 = [], sizes = []> {
    %orch = runplan.orchestrator : !runplan.stage
    runplan.tensor "token_embd.weight" F32 [8, 16] shard 0 offset 0 bytes 512
    runplan.tensor "blk.0.attn_norm.weight" F32 [8] shard 0 offset 512 bytes 32 block 0
    runplan.tensor "blk.1.attn_norm.weight" F32 [8] shard 0 offset 544 bytes 32 block 1
    runplan.tensor "blk.2.attn_norm.weight" F32 [8] shard 0 offset 1120 bytes 32 block 2
    runplan.tensor "output_norm.weight" F32 [8] shard 0 offset 576 bytes 32
    runplan.tensor "output.weight" F32 [8, 16] shard 0 offset 608 bytes 512
    %s0 = runplan.stage 0 on "node-a" layers [0, 1) : !runplan.stage
    %s1 = runplan.stage 1 on "node-c" layers [2, 3) : !runplan.stage
    runplan.edge "tok.in" token_in %orch -> %s0 object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-LA-2: stage 1 starts at block 0 but stage 0 ends at block 1
// CHECK: {{^}}[RP-LA-2] stage ranges must not overlap: stage 1 starts at block 0 but stage 0 ends at block 1
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
      config <max_seq_len = 4, activation_dtype = f32, token_dtype = i32, kv_dtype = f32, ring_slots = 2, alignment = 16>
      weights <uris = ["tiny.gguf"], sha256 = [], sizes = []> {
    %orch = runplan.orchestrator : !runplan.stage
    runplan.tensor "token_embd.weight" F32 [8, 16] shard 0 offset 0 bytes 512
    runplan.tensor "blk.0.attn_norm.weight" F32 [8] shard 0 offset 512 bytes 32 block 0
    runplan.tensor "blk.1.attn_norm.weight" F32 [8] shard 0 offset 544 bytes 32 block 1
    runplan.tensor "output_norm.weight" F32 [8] shard 0 offset 576 bytes 32
    runplan.tensor "output.weight" F32 [8, 16] shard 0 offset 608 bytes 512
    %s0 = runplan.stage 0 on "node-a" layers [0, 1) : !runplan.stage
    %s1 = runplan.stage 1 on "node-c" layers [0, 2) : !runplan.stage
    runplan.edge "tok.in" token_in %orch -> %s0 object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-LA-3: stage 1 ends at block 2 but the model has 3 blocks
// CHECK: {{^}}[RP-LA-3] the union of stage ranges must cover the block range [0, block_count): stage 1 ends at block 2 but the model has 3 blocks
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 3, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32, 32], files = ["tiny.gguf"], sha256 = "00ff">
      config <max_seq_len = 4, activation_dtype = f32, token_dtype = i32, kv_dtype = f32, ring_slots = 2, alignment = 16>
      weights <uris = ["tiny.gguf"], sha256 = [], sizes = []> {
    %orch = runplan.orchestrator : !runplan.stage
    runplan.tensor "token_embd.weight" F32 [8, 16] shard 0 offset 0 bytes 512
    runplan.tensor "blk.0.attn_norm.weight" F32 [8] shard 0 offset 512 bytes 32 block 0
    runplan.tensor "blk.1.attn_norm.weight" F32 [8] shard 0 offset 544 bytes 32 block 1
    runplan.tensor "blk.2.attn_norm.weight" F32 [8] shard 0 offset 1120 bytes 32 block 2
    runplan.tensor "output_norm.weight" F32 [8] shard 0 offset 576 bytes 32
    runplan.tensor "output.weight" F32 [8, 16] shard 0 offset 608 bytes 512
    %s0 = runplan.stage 0 on "node-a" layers [0, 1) : !runplan.stage
    %s1 = runplan.stage 1 on "node-c" layers [1, 2) : !runplan.stage
    runplan.edge "tok.in" token_in %orch -> %s0 object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-EA-1: edge id 'act.0' is used twice
// CHECK: {{^}}[RP-EA-1] every edge id must be unique within the run: edge id 'act.0' is used twice
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
    runplan.edge "act.0" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-AR-7: a plan with two orchestrators
// CHECK: {{^}}[RP-AR-7] the plan has one orchestrator: the plan has 2 orchestrators
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516e-06, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
      config <max_seq_len = 4, activation_dtype = f32, token_dtype = i32, kv_dtype = f32, ring_slots = 2, alignment = 16>
      weights <uris = ["tiny.gguf"], sha256 = [], sizes = []> {
    %orch = runplan.orchestrator : !runplan.stage
    %orch2 = runplan.orchestrator : !runplan.stage
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
  }
}

// -----

// RP-EA-3: the plan has 0 token-in edges, expected exactly one
// CHECK: {{^}}[RP-EA-3] the token-in edge is orchestrator -> stage 0: the plan has 0 token-in edges, expected exactly one
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
        runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-EA-3: edge 'tok.in' is orchestrator -> stage 1
// CHECK: {{^}}[RP-EA-3] the token-in edge is orchestrator -> stage 0: edge 'tok.in' is orchestrator -> stage 1
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
    runplan.edge "tok.in" token_in %orch -> %s1 object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-EA-4: edge 'act.0' is stage 1 -> stage 0
// CHECK: {{^}}[RP-EA-4] activation edge i is stage i -> stage i+1: edge 'act.0' is stage 1 -> stage 0
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
    runplan.edge "act.0" activation %s1 -> %s0 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-EA-4: edges 'act.0' and 'act.1' both connect stage 0 -> stage 1
// CHECK: {{^}}[RP-EA-4] activation edge i is stage i -> stage i+1: edges 'act.0' and 'act.1' both connect stage 0 -> stage 1
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
    runplan.edge "act.1" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-EA-4: no activation edge connects stage 0 -> stage 1
// CHECK: {{^}}[RP-EA-4] activation edge i is stage i -> stage i+1: no activation edge connects stage 0 -> stage 1
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
        runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-EA-5: the plan has 2 token-out edges, expected exactly one
// CHECK: {{^}}[RP-EA-5] the token-out edge is stage N-1 -> orchestrator: the plan has 2 token-out edges, expected exactly one
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
    runplan.edge "tok.out2" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-EA-5: edge 'tok.out' is stage 0 -> orchestrator but the last stage is 1
// CHECK: {{^}}[RP-EA-5] the token-out edge is stage N-1 -> orchestrator: edge 'tok.out' is stage 0 -> orchestrator but the last stage is 1
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
    runplan.edge "tok.out" token_out %s0 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-AR-7: 'test.op' is not a runplan op and cannot be part of a plan
// CHECK: {{^}}[RP-AR-7] the plan is the only source of stage, layer, edge and object-spec assignment: 'test.op' is not a runplan op and cannot be part of a plan
builtin.module {
  runplan.plan @tiny nodes ["node-a", "node-b", "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
      config <max_seq_len = 4, activation_dtype = f32, token_dtype = i32, kv_dtype = f32, ring_slots = 2, alignment = 16>
      weights <uris = ["tiny.gguf"], sha256 = [], sizes = []> {
    %orch = runplan.orchestrator : !runplan.stage
    runplan.tensor "token_embd.weight" F32 [8, 16] shard 0 offset 0 bytes 512
    runplan.tensor "blk.0.attn_norm.weight" F32 [8] shard 0 offset 512 bytes 32 block 0
    runplan.tensor "blk.1.attn_norm.weight" F32 [8] shard 0 offset 544 bytes 32 block 1
    runplan.tensor "output_norm.weight" F32 [8] shard 0 offset 576 bytes 32
    runplan.tensor "output.weight" F32 [8, 16] shard 0 offset 608 bytes 512
    %s0 = runplan.stage 0 on "node-a" layers [0, 1) : !runplan.stage
    "test.op"() : () -> ()
    %s1 = runplan.stage 1 on "node-c" layers [1, 2) : !runplan.stage
    runplan.edge "tok.in" token_in %orch -> %s0 object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128> ring <slots = 2, slot_bytes = 128>
    runplan.edge "tok.out" token_out %s1 -> %orch object <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16> ring <slots = 2, slot_bytes = 16>
  }
}

// -----

// RP-PP-2: a provision tensor slice with an empty dimension (the tensor slice attribute's verifier)
// CHECK: [RP-PP-2] a stage receives only its own tensors: tensor slice 'blk.0.attn_norm.weight' has shape [0], shard 0, offset 512, bytes 32
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
          "blk.0.attn_norm.weight" F32 [0] shard 0 offset 512 bytes 32]
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

// -----

// RP-PP-1: a provision about the orchestrator value, not a stage
// CHECK: {{^}}[RP-PP-1] exactly one provision per stage: a provision is about %orch, which is not a stage of the plan
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
    runplan.provision_stage %orch of 2 on "node-c" layers [1, 2) blocks 2 max_seq_len 4 head
        weights <uris = ["tiny.gguf"], sha256 = [], sizes = []>
        in <edge_id = "act.0", kind = activation, peer_node_id = "node-a", object_spec = <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128>, ring_spec = <slots = 2, slot_bytes = 128>>
        out <edge_id = "tok.out", kind = token_out, peer_node_id = "orchestrator", object_spec = <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16>, ring_spec = <slots = 2, slot_bytes = 16>>
        tensors [
          "blk.1.attn_norm.weight" F32 [8] shard 0 offset 544 bytes 32,
          "output_norm.weight" F32 [8] shard 0 offset 576 bytes 32,
          "output.weight" F32 [8, 16] shard 0 offset 608 bytes 512]
  }
}

// -----

// RP-PP-2: provision of stage 1 has range [1, 1)
// CHECK: {{^}}[RP-PP-2] a stage receives only its own non-empty layer range: provision of stage 1 has range [1, 1)
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
    runplan.provision_stage %s1 of 2 on "node-c" layers [1, 1) blocks 2 max_seq_len 4 head
        weights <uris = ["tiny.gguf"], sha256 = [], sizes = []>
        in <edge_id = "act.0", kind = activation, peer_node_id = "node-a", object_spec = <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128>, ring_spec = <slots = 2, slot_bytes = 128>>
        out <edge_id = "tok.out", kind = token_out, peer_node_id = "orchestrator", object_spec = <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16>, ring_spec = <slots = 2, slot_bytes = 16>>
        tensors [
          "blk.1.attn_norm.weight" F32 [8] shard 0 offset 544 bytes 32,
          "output_norm.weight" F32 [8] shard 0 offset 576 bytes 32,
          "output.weight" F32 [8, 16] shard 0 offset 608 bytes 512]
  }
}

// -----

// RP-PP-1: stage 0 has two provisions
// CHECK: {{^}}[RP-PP-1] exactly one provision per stage: stage 0 has two provisions
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
    runplan.provision_stage %s0 of 2 on "node-c" layers [1, 2) blocks 2 max_seq_len 4 head
        weights <uris = ["tiny.gguf"], sha256 = [], sizes = []>
        in <edge_id = "act.0", kind = activation, peer_node_id = "node-a", object_spec = <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128>, ring_spec = <slots = 2, slot_bytes = 128>>
        out <edge_id = "tok.out", kind = token_out, peer_node_id = "orchestrator", object_spec = <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16>, ring_spec = <slots = 2, slot_bytes = 16>>
        tensors [
          "blk.1.attn_norm.weight" F32 [8] shard 0 offset 544 bytes 32,
          "output_norm.weight" F32 [8] shard 0 offset 576 bytes 32,
          "output.weight" F32 [8, 16] shard 0 offset 608 bytes 512]
  }
}

// -----

// RP-PP-1: stage 0 has no provision
// CHECK: {{^}}[RP-PP-1] exactly one provision per stage: stage 0 has no provision
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

// -----

// RP-PP-2: provision of stage 1 has [0, 2) but the stage owns [1, 2)
// CHECK: {{^}}[RP-PP-2] a stage receives only its own layer range: provision of stage 1 has [0, 2) but the stage owns [1, 2)
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
    runplan.provision_stage %s1 of 2 on "node-c" layers [0, 2) blocks 2 max_seq_len 4 head
        weights <uris = ["tiny.gguf"], sha256 = [], sizes = []>
        in <edge_id = "act.0", kind = activation, peer_node_id = "node-a", object_spec = <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128>, ring_spec = <slots = 2, slot_bytes = 128>>
        out <edge_id = "tok.out", kind = token_out, peer_node_id = "orchestrator", object_spec = <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16>, ring_spec = <slots = 2, slot_bytes = 16>>
        tensors [
          "blk.1.attn_norm.weight" F32 [8] shard 0 offset 544 bytes 32,
          "output_norm.weight" F32 [8] shard 0 offset 576 bytes 32,
          "output.weight" F32 [8, 16] shard 0 offset 608 bytes 512]
  }
}

// -----

// RP-PP-2: provision of stage 0: tensor 'output.weight' differs
// CHECK: {{^}}[RP-PP-2] a stage receives only its own tensors: provision of stage 0: tensor 'output.weight' differs
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
          "blk.0.attn_norm.weight" F32 [8] shard 0 offset 512 bytes 32,
          "output.weight" F32 [8, 16] shard 0 offset 608 bytes 512]
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

// -----

// RP-PP-2: provision of stage 0: tensor byte ranges differ from the tensor index
// CHECK: {{^}}[RP-PP-2] a stage receives only its own tensors: provision of stage 0: tensor byte ranges differ from the tensor index
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
          "blk.0.attn_norm.weight" F32 [8] shard 0 offset 516 bytes 32]
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

// -----

// RP-PP-1: provision of stage 1 has max_seq_len 8 but the plan gives 4
// CHECK: {{^}}[RP-PP-1] provisions are the deterministic projection of the plan: provision of stage 1 has max_seq_len 8 but the plan gives 4
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
    runplan.provision_stage %s1 of 2 on "node-c" layers [1, 2) blocks 2 max_seq_len 8 head
        weights <uris = ["tiny.gguf"], sha256 = [], sizes = []>
        in <edge_id = "act.0", kind = activation, peer_node_id = "node-a", object_spec = <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128>, ring_spec = <slots = 2, slot_bytes = 128>>
        out <edge_id = "tok.out", kind = token_out, peer_node_id = "orchestrator", object_spec = <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16>, ring_spec = <slots = 2, slot_bytes = 16>>
        tensors [
          "blk.1.attn_norm.weight" F32 [8] shard 0 offset 544 bytes 32,
          "output_norm.weight" F32 [8] shard 0 offset 576 bytes 32,
          "output.weight" F32 [8, 16] shard 0 offset 608 bytes 512]
  }
}

// -----

// RP-PP-3: provision of stage 0 outbound edge is 'tok.out' (token_out) but the plan's is 'act.0' (activation)
// CHECK: {{^}}[RP-PP-3] a stage receives exactly its one inbound and one outbound edge: provision of stage 0 outbound edge is 'tok.out' (token_out) but the plan's is 'act.0' (activation)
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
        out <edge_id = "tok.out", kind = token_out, peer_node_id = "node-c", object_spec = <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128>, ring_spec = <slots = 2, slot_bytes = 128>>
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

// -----

// RP-PP-6: provision of stage 0 outbound edge 'act.0' names peer 'tcp://10.0.0.2:7000', which is not a node id of the pool
// CHECK: {{^}}[RP-PP-6] edge provisions name peer node ids, never actor addresses: provision of stage 0 outbound edge 'act.0' names peer 'tcp://10.0.0.2:7000', which is not a node id of the pool
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
        out <edge_id = "act.0", kind = activation, peer_node_id = "tcp://10.0.0.2:7000", object_spec = <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128>, ring_spec = <slots = 2, slot_bytes = 128>>
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

// -----

// RP-PP-5: provision of stage 1 inbound edge 'act.0' names peer 'ray://actor/stage0', which is not a node id of the pool
// CHECK: {{^}}[RP-PP-5] edge provisions name peer node ids, never actor addresses: provision of stage 1 inbound edge 'act.0' names peer 'ray://actor/stage0', which is not a node id of the pool
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
        in <edge_id = "act.0", kind = activation, peer_node_id = "ray://actor/stage0", object_spec = <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128>, ring_spec = <slots = 2, slot_bytes = 128>>
        out <edge_id = "tok.out", kind = token_out, peer_node_id = "orchestrator", object_spec = <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16>, ring_spec = <slots = 2, slot_bytes = 16>>
        tensors [
          "blk.1.attn_norm.weight" F32 [8] shard 0 offset 544 bytes 32,
          "output_norm.weight" F32 [8] shard 0 offset 576 bytes 32,
          "output.weight" F32 [8, 16] shard 0 offset 608 bytes 512]
  }
}

// -----

// RP-PP-4: provision of stage 0 outbound edge 'act.0' names 'node-b' but the consumer is 'node-c'
// CHECK: {{^}}[RP-PP-4] the outbound provision names the consumer node_id: provision of stage 0 outbound edge 'act.0' names 'node-b' but the consumer is 'node-c'
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
        out <edge_id = "act.0", kind = activation, peer_node_id = "node-b", object_spec = <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128>, ring_spec = <slots = 2, slot_bytes = 128>>
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

// -----

// RP-PP-5: provision of stage 1 inbound edge 'act.0' names 'node-b' but the producer is 'node-a'
// CHECK: {{^}}[RP-PP-5] the inbound provision names the producer node_id: provision of stage 1 inbound edge 'act.0' names 'node-b' but the producer is 'node-a'
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
        in <edge_id = "act.0", kind = activation, peer_node_id = "node-b", object_spec = <kind = activation, dtype = f32, dtype_width = 4, shape = [4, 8], layout = "row_major", alignment = 16, max_extent = 128>, ring_spec = <slots = 2, slot_bytes = 128>>
        out <edge_id = "tok.out", kind = token_out, peer_node_id = "orchestrator", object_spec = <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16>, ring_spec = <slots = 2, slot_bytes = 16>>
        tensors [
          "blk.1.attn_norm.weight" F32 [8] shard 0 offset 544 bytes 32,
          "output_norm.weight" F32 [8] shard 0 offset 576 bytes 32,
          "output.weight" F32 [8, 16] shard 0 offset 608 bytes 512]
  }
}

// -----

// RP-OS-4: provision of stage 1 outbound edge 'tok.out' specs differ from the edge's
// CHECK: {{^}}[RP-OS-4] specs are copied consistently into stage provisions: provision of stage 1 outbound edge 'tok.out' specs differ from the edge's
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
        out <edge_id = "tok.out", kind = token_out, peer_node_id = "orchestrator", object_spec = <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16>, ring_spec = <slots = 2, slot_bytes = 32>>
        tensors [
          "blk.1.attn_norm.weight" F32 [8] shard 0 offset 544 bytes 32,
          "output_norm.weight" F32 [8] shard 0 offset 576 bytes 32,
          "output.weight" F32 [8, 16] shard 0 offset 608 bytes 512]
  }
}

// -----

// RP-PP-6: provision of stage 0 has unexpected key 'actor_address'
// CHECK: [RP-PP-6] edge provision must hold exactly edge_id, kind, peer_node_id, object_spec, ring_spec: edge provision has unexpected key 'actor_address'
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
        in <actor_address = "10.0.0.1:1", edge_id = "tok.in", kind = token_in, peer_node_id = "orchestrator", object_spec = <kind = token, dtype = i32, dtype_width = 4, shape = [4], layout = "row_major", alignment = 16, max_extent = 16>, ring_spec = <slots = 2, slot_bytes = 16>>
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

// -----

// RP-AR-1: node spec with a node spec without memory
// CHECK: [RP-AR-1] node spec must hold exactly id, memory_bytes: node spec lacks key 'memory_bytes'
builtin.module {
  runplan.plan @tiny nodes ["node-a", #runplan.node<id = "node-b">, "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
  }
}

// -----

// RP-AR-1: node spec with an unknown key
// CHECK: [RP-AR-1] node spec must hold exactly id, memory_bytes: node spec has unexpected key 'speed'
builtin.module {
  runplan.plan @tiny nodes ["node-a", #runplan.node<id = "node-b", memory_bytes = 64, speed = 1.0>, "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
  }
}

// -----

// RP-AR-1: node spec with an integer peak
// (a record value of the wrong kind is a parse error of the record: 'flops_per_s' must be a float)
// CHECK: Expected float literal
builtin.module {
  runplan.plan @tiny nodes ["node-a", #runplan.node<id = "node-b", memory_bytes = 64, flops_per_s = 7>, "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
  }
}

// -----

// RP-AR-1: node spec with no memory
// CHECK: [RP-AR-1] every pool node is a node id or a node spec {id, memory_bytes[, peaks]}: node 'node-b': 'memory_bytes' must be > 0, got 0
builtin.module {
  runplan.plan @tiny nodes ["node-a", #runplan.node<id = "node-b", memory_bytes = 0>, "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
  }
}

// -----

// RP-AR-1: node spec with a negative peak
// CHECK: [RP-AR-1] every pool node is a node id or a node spec {id, memory_bytes[, peaks]}: node 'node-b': 'bandwidth_bytes_per_s' must be a finite number > 0, got -20000000000.0
builtin.module {
  runplan.plan @tiny nodes ["node-a", #runplan.node<id = "node-b", memory_bytes = 64, bandwidth_bytes_per_s = -2.0e10>, "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
  }
}

// -----

// RP-AR-1: node spec with an empty id
// CHECK: [RP-AR-1] every pool node is a node id or a node spec {id, memory_bytes[, peaks]}: a node spec has an empty 'id'
builtin.module {
  runplan.plan @tiny nodes ["node-a", #runplan.node<id = "", memory_bytes = 64>, "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
  }
}

// -----

// RP-AR-1: a nodes entry that is neither a node id nor a node spec
// CHECK: {{^}}[RP-AR-1] every pool node is a node id or a node spec {id, memory_bytes[, peaks]}: nodes[1] is array<i64: 1>, neither a string nor a node spec
builtin.module {
  runplan.plan @tiny nodes ["node-a", array<i64: 1>, "node-c"]
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
  }
}

// -----

// RP-AR-1: node spec with a duplicate id
// CHECK: {{^}}[RP-AR-1] pool node ids are unique: nodes[1] repeats node id 'node-a' of nodes[0]
builtin.module {
  runplan.plan @tiny nodes ["node-a", #runplan.node<id = "node-a", memory_bytes = 64>, "node-c"]
      model <architecture = "llama", name = "tiny", block_count = 2, embedding_length = 8, head_count = 2, head_count_kv = 1, feed_forward_length = 12, vocab_size = 16, context_length = 32, rope_dimension_count = 4, rope_freq_base = 1.000000e+04, rms_norm_eps = 9.9999997473787516E-6, alignment = 32, block_bytes = [32, 32], files = ["tiny.gguf"], sha256 = "00ff">
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
  }
}

