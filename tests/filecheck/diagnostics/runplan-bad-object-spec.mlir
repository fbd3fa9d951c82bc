// RUN: not pipeplan-opt %s 2>&1 | filecheck %s
// RP-OS-5: an edge whose ObjectSpec attribute states a non-power-of-two alignment is rejected while the
// text is parsed, by the attribute's own verifier: the error names the file, line and column of the
// attribute, shows the edge op's line and cites the contract ID (no pass runs, no module is printed).
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
// CHECK:      error: {{.*}}runplan-bad-object-spec.mlir:19:55
// CHECK-NEXT: {{^}}    runplan.edge "act.0" activation %s0 -> %s1 object <kind = activation,
// CHECK:      [RP-OS-5] object specs must have a valid extent, alignment, dtype width, shape and layout: activation object spec has alignment 24, which is not a positive power of two
// CHECK-NOT:  runplan.plan
