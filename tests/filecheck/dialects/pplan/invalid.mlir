// RUN: %verify-diag | filecheck %s

// Verifier messages of the pplan dialect: shapes/bytes/dtypes, undeclared buffers and tasks,
// dependency cycles, lifetime classes, binding contents.

pplan.plan @p attributes {decode_pos = 1 : i64, model = "m", prompt_len = 1 : i64, source = "s", stage_count = 1 : i64} {
  pplan.buffer @x {alignment = 64 : i64, bytes = 20 : i64, dtype = "f32", lifetime = "transient", memspace = "device", origin = "o", shape = array<i64: 1, 4>, stage = 0 : i64}
}
// CHECK: buffer @x: bytes 20 inconsistent with dtype f32 and shape [1, 4] (expected 16)

// -----

pplan.plan @p attributes {decode_pos = 1 : i64, model = "m", prompt_len = 1 : i64, source = "s", stage_count = 1 : i64} {
  pplan.buffer @w {alignment = 32 : i64, bytes = 72 : i64, dtype = "q4_k", lifetime = "weight", memspace = "device", origin = "o", shape = array<i64: 1, 128>, stage = 0 : i64}
}
// CHECK: buffer @w: innermost dimension of shape [1, 128] is not a multiple of the q4_k block size 256

// -----

pplan.plan @p attributes {decode_pos = 1 : i64, model = "m", prompt_len = 1 : i64, source = "s", stage_count = 1 : i64} {
  pplan.buffer @x {alignment = 64 : i64, bytes = 16 : i64, dtype = "f32", lifetime = "scratch", memspace = "device", origin = "o", shape = array<i64: 1, 4>, stage = 0 : i64}
}
// CHECK: buffer @x: lifetime 'scratch' is not one of ['weight', 'kv', 'transient', 'edge']

// -----

pplan.plan @p attributes {decode_pos = 1 : i64, model = "m", prompt_len = 1 : i64, source = "s", stage_count = 1 : i64} {
  pplan.buffer @x {alignment = 64 : i64, bytes = 16 : i64, dtype = "f32", lifetime = "transient", memspace = "device", origin = "o", shape = array<i64: 1, 4>, stage = 0 : i64}
  pplan.task @t {alignment = 64 : i64, block = 0 : i64, bytes_read = 16 : i64, bytes_written = 16 : i64, collective = "none", deps = [], dtypes = ["f32", "f32"], flops = 4 : i64, layout = "row_major", memspace = "device", model_op = "m", op = "last_row", read_bytes = array<i64: 16>, reads = [@y], shape = array<i64: 1, 4>, stage = 0 : i64, step = "decode", write_bytes = array<i64: 16>, writes = [@x]}
}
// CHECK: task @t: uses undeclared buffer @y

// -----

pplan.plan @p attributes {decode_pos = 1 : i64, model = "m", prompt_len = 1 : i64, source = "s", stage_count = 1 : i64} {
  pplan.buffer @x {alignment = 64 : i64, bytes = 16 : i64, dtype = "f32", lifetime = "transient", memspace = "device", origin = "o", shape = array<i64: 1, 4>, stage = 0 : i64}
  pplan.task @t {alignment = 64 : i64, block = 0 : i64, bytes_read = 16 : i64, bytes_written = 16 : i64, collective = "none", deps = [@nowhere], dtypes = ["f32", "f32"], flops = 0 : i64, layout = "row_major", memspace = "device", model_op = "m", op = "last_row", read_bytes = array<i64: 16>, reads = [@x], shape = array<i64: 1, 4>, stage = 0 : i64, step = "decode", write_bytes = array<i64: 16>, writes = [@x]}
}
// CHECK: task @t: depends on undeclared task @nowhere

// -----

pplan.plan @p attributes {decode_pos = 1 : i64, model = "m", prompt_len = 1 : i64, source = "s", stage_count = 1 : i64} {
  pplan.buffer @x {alignment = 64 : i64, bytes = 16 : i64, dtype = "f32", lifetime = "transient", memspace = "device", origin = "o", shape = array<i64: 1, 4>, stage = 0 : i64}
  pplan.task @a {alignment = 64 : i64, block = 0 : i64, bytes_read = 16 : i64, bytes_written = 16 : i64, collective = "none", deps = [@b], dtypes = ["f32", "f32"], flops = 0 : i64, layout = "row_major", memspace = "device", model_op = "m", op = "last_row", read_bytes = array<i64: 16>, reads = [@x], shape = array<i64: 1, 4>, stage = 0 : i64, step = "decode", write_bytes = array<i64: 16>, writes = [@x]}
  pplan.task @b {alignment = 64 : i64, block = 0 : i64, bytes_read = 16 : i64, bytes_written = 16 : i64, collective = "none", deps = [@a], dtypes = ["f32", "f32"], flops = 0 : i64, layout = "row_major", memspace = "device", model_op = "m", op = "last_row", read_bytes = array<i64: 16>, reads = [@x], shape = array<i64: 1, 4>, stage = 0 : i64, step = "decode", write_bytes = array<i64: 16>, writes = [@x]}
}
// CHECK: dependency cycle through task @{{a|b}}

// -----

pplan.plan @p attributes {decode_pos = 1 : i64, model = "m", prompt_len = 1 : i64, source = "s", stage_count = 1 : i64} {
  pplan.buffer @x {alignment = 64 : i64, bytes = 16 : i64, dtype = "f32", lifetime = "transient", memspace = "device", origin = "o", shape = array<i64: 1, 4>, stage = 0 : i64}
  pplan.task @t {alignment = 64 : i64, block = 0 : i64, bytes_read = 16 : i64, bytes_written = 16 : i64, collective = "none", deps = [], dtypes = ["f16", "f32"], flops = 0 : i64, layout = "row_major", memspace = "device", model_op = "m", op = "last_row", read_bytes = array<i64: 16>, reads = [@x], shape = array<i64: 1, 4>, stage = 0 : i64, step = "decode", write_bytes = array<i64: 16>, writes = [@x]}
}
// CHECK: task @t: operand 0 dtype f16 differs from buffer @x dtype f32

// -----

pplan.plan @p attributes {decode_pos = 1 : i64, model = "m", prompt_len = 1 : i64, source = "s", stage_count = 1 : i64} {
  pplan.buffer @x {alignment = 64 : i64, bytes = 16 : i64, dtype = "f32", lifetime = "transient", memspace = "device", origin = "o", shape = array<i64: 1, 4>, stage = 0 : i64}
  pplan.task @t {alignment = 64 : i64, block = 0 : i64, bytes_read = 32 : i64, bytes_written = 16 : i64, collective = "none", deps = [], dtypes = ["f32", "f32"], flops = 0 : i64, layout = "row_major", memspace = "device", model_op = "m", op = "last_row", read_bytes = array<i64: 32>, reads = [@x], shape = array<i64: 1, 4>, stage = 0 : i64, step = "decode", write_bytes = array<i64: 16>, writes = [@x]}
}
// CHECK: task @t: accesses 32 bytes of buffer @x which holds 16

// -----

pplan.plan @p attributes {decode_pos = 1 : i64, model = "m", prompt_len = 1 : i64, source = "s", stage_count = 1 : i64} {
  pplan.buffer @x {alignment = 64 : i64, bytes = 16 : i64, dtype = "f32", lifetime = "transient", memspace = "device", origin = "o", shape = array<i64: 1, 4>, stage = 0 : i64}
  pplan.task @t {alignment = 64 : i64, block = 0 : i64, bytes_read = 16 : i64, bytes_written = 16 : i64, collective = "none", deps = [], dtypes = ["f32", "f32"], flops = 7 : i64, layout = "row_major", memspace = "device", model_op = "m", op = "matmul", read_bytes = array<i64: 16>, reads = [@x], shape = array<i64: 1, 4, 4>, stage = 0 : i64, step = "decode", write_bytes = array<i64: 16>, writes = [@x]}
}
// CHECK: task @t: matmul flops 7 inconsistent with work shape [M, N, K] = [1, 4, 4] (expected 2*M*N*K)

// -----

pplan.plan @p attributes {decode_pos = 1 : i64, model = "m", prompt_len = 1 : i64, source = "s", stage_count = 1 : i64} {
  pplan.buffer @x {alignment = 64 : i64, bytes = 16 : i64, dtype = "f32", lifetime = "transient", memspace = "device", origin = "o", shape = array<i64: 1, 4>, stage = 0 : i64}
  pplan.task @t {alignment = 64 : i64, block = 0 : i64, bytes_read = 15 : i64, bytes_written = 16 : i64, collective = "none", deps = [], dtypes = ["f32", "f32"], flops = 0 : i64, layout = "row_major", memspace = "device", model_op = "m", op = "last_row", read_bytes = array<i64: 16>, reads = [@x], shape = array<i64: 1, 4>, stage = 0 : i64, step = "decode", write_bytes = array<i64: 16>, writes = [@x]}
}
// CHECK: task @t: bytes_read/bytes_written 15/16 differ from the sums of the accesses 16/16

// -----

pplan.plan @p attributes {decode_pos = 1 : i64, model = "m", prompt_len = 1 : i64, source = "s", stage_count = 1 : i64} {
  pplan.buffer @x {alignment = 64 : i64, bytes = 16 : i64, dtype = "f32", lifetime = "transient", memspace = "device", origin = "o", shape = array<i64: 1, 4>, stage = 0 : i64}
  pplan.task @t {alignment = 64 : i64, block = 0 : i64, bytes_read = 16 : i64, bytes_written = 16 : i64, collective = "none", deps = [], dtypes = ["f32", "f32"], flops = 0 : i64, layout = "row_major", memspace = "device", model_op = "m", op = "send", read_bytes = array<i64: 16>, reads = [@x], shape = array<i64: 1, 4>, stage = 0 : i64, step = "decode", write_bytes = array<i64: 16>, writes = [@x]}
}
// CHECK: task @t: op send requires collective send

// -----

pplan.deployment_binding @deployment {devices = [{bandwidth_bytes_per_s = 1.0e+11 : f64, flops_per_s = 1.0e+12 : f64, id = "n0", link_bandwidth_bytes_per_s = 1.0e+09 : f64, memory_bytes = 100 : i64, reserved_bytes = 160 : i64}], stage_devices = ["n0"], topology = "chain"}
// CHECK: deployment binding: device n0 reserves 160 bytes but has capacity 100

// -----

pplan.deployment_binding @deployment {devices = [{bandwidth_bytes_per_s = 1.0e+11 : f64, flops_per_s = 1.0e+12 : f64, id = "n0", link_bandwidth_bytes_per_s = 1.0e+09 : f64, memory_bytes = 100 : i64, reserved_bytes = 0 : i64}], stage_devices = ["n1"], topology = "chain"}
// CHECK: deployment binding: stage 0 device 'n1' is not a declared device

// -----

pplan.evidence_policy @policy {fallback = "sometimes", max_age_s = 0 : i64, providers = ["roofline"], revision = "r1", uncertainty_budget = 1.0 : f64}
// CHECK: evidence policy: fallback 'sometimes' is not one of ['allow', 'forbid']

// -----

pplan.evidence_policy @policy {fallback = "allow", max_age_s = 0 : i64, providers = ["oracle"], revision = "r1", uncertainty_budget = 1.0 : f64}
// CHECK: evidence policy: unknown provider 'oracle' (roofline | measured:<file>)
