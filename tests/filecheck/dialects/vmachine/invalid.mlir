// RUN: pipeplan-opt %s --split-input-file --verify-diagnostics | filecheck %s
// AB-M-1: vmachine verifiers reject instructions outside the kernel ABI, wrong arity, missing attributes,
// duplicate ids and a bad ABI.

builtin.module {
  vmachine.program attributes {target = "t", deployment = "d", concrete = "c", portable = "p", binder = "b", engine = "e"} {
    vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
    vmachine.stage attributes {index = 0 : i64, device = "n0", layer_start = 0 : i64, layer_end = 1 : i64} {
      vmachine.step attributes {name = "decode", rows = 1 : i64} {
        vmachine.queue attributes {engine = "q"} {
          vmachine.kernel {id = "i0", cmd = "c0", kernel = "frobnicate", ins = [], outs = [], attrs = {}, block = 0 : i64}
        }
      }
    }
  }
}

// CHECK: kernel 'frobnicate' is not in the virtual target's kernel ABI

// -----

builtin.module {
  vmachine.program attributes {target = "t", deployment = "d", concrete = "c", portable = "p", binder = "b", engine = "e"} {
    vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
    vmachine.stage attributes {index = 0 : i64, device = "n0", layer_start = 0 : i64, layer_end = 1 : i64} {
      vmachine.step attributes {name = "decode", rows = 1 : i64} {
        vmachine.queue attributes {engine = "q"} {
          vmachine.kernel {id = "i0", cmd = "c0", kernel = "matmul", ins = ["a"], outs = ["b"], attrs = {}, block = 0 : i64}
        }
      }
    }
  }
}

// CHECK: kernel 'matmul' takes 2 inputs and 1 outputs, got 1 and 1

// -----

builtin.module {
  vmachine.program attributes {target = "t", deployment = "d", concrete = "c", portable = "p", binder = "b", engine = "e"} {
    vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
    vmachine.stage attributes {index = 0 : i64, device = "n0", layer_start = 0 : i64, layer_end = 1 : i64} {
      vmachine.step attributes {name = "decode", rows = 1 : i64} {
        vmachine.queue attributes {engine = "q"} {
          vmachine.kernel {id = "i0", cmd = "c0", kernel = "attention", ins = ["q", "k", "v", "x"], outs = ["o"], attrs = {}, block = 0 : i64}
        }
      }
    }
  }
}

// CHECK: kernel 'attention' takes 'start_pos' as its last input

// -----

builtin.module {
  vmachine.program attributes {target = "t", deployment = "d", concrete = "c", portable = "p", binder = "b", engine = "e"} {
    vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
    vmachine.stage attributes {index = 0 : i64, device = "n0", layer_start = 0 : i64, layer_end = 1 : i64} {
      vmachine.step attributes {name = "decode", rows = 1 : i64} {
        vmachine.queue attributes {engine = "q"} {
          vmachine.kernel {id = "i0", cmd = "c0", kernel = "rms_norm", ins = ["a", "w"], outs = ["b"], attrs = {}, block = 0 : i64}
        }
      }
    }
  }
}

// CHECK: kernel 'rms_norm' needs attributes ['eps']

// -----

builtin.module {
  vmachine.program attributes {target = "t", deployment = "d", concrete = "c", portable = "p", binder = "b", engine = "e"} {
    vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
    vmachine.stage attributes {index = 0 : i64, device = "n0", layer_start = 0 : i64, layer_end = 1 : i64} {
      vmachine.step attributes {name = "decode", rows = 1 : i64} {
        vmachine.queue attributes {engine = "q"} {
          vmachine.recv {id = "i0", cmd = "c0", edge = "e0", dst = "x"}
          vmachine.send {id = "i0", cmd = "c1", edge = "e1", src = "x"}
        }
      }
    }
  }
}

// CHECK: duplicate instruction id 'i0'

// -----

builtin.module {
  vmachine.program attributes {target = "t", deployment = "d", concrete = "c", portable = "p", binder = "b", engine = "e"} {
    vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 0 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
    vmachine.stage attributes {index = 0 : i64, device = "n0", layer_start = 0 : i64, layer_end = 1 : i64} {
      vmachine.step attributes {name = "decode", rows = 1 : i64} {
        vmachine.queue attributes {engine = "q"} {

        }
      }
    }
  }
}

// CHECK: vmachine.abi: max_seq_len must be positive, got 0
