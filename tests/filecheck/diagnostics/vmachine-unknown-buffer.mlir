// RUN: not pipeplan-opt %s 2>&1 | filecheck %s
// AB-M-1: a vmachine instruction reading a buffer the program does not declare is rejected on parse, at that instruction
// (an undefined %name is a parse error; %b.ghost comes from outside the program).
%b.ghost = builtin.unrealized_conversion_cast to !vmachine.buffer
vmachine.program attributes {target = "t", deployment = "d", concrete = "c", portable = "p", binder = "b", engine = "e"} {
  vmachine.abi {n_embd = 64 : i64, n_head = 8 : i64, n_head_kv = 4 : i64, n_ff = 172 : i64, n_vocab = 512 : i64, n_ctx = 2048 : i64, rope_dim = 8 : i64, n_layer = 5 : i64, max_seq_len = 64 : i64, rope_base = 1.000000e+04 : f64, rms_eps = 1.000000e-05 : f64, tied_embedding = 0 : i64}
  %b.y = vmachine.buffer "b.y" transient step decode {name = "output", stage = 0 : i64, device = "n0", space = "device", offset = 0 : i64, size = 256 : i64, alignment = 64 : i64}
  vmachine.stage attributes {index = 0 : i64, device = "n0", layer_start = 0 : i64, layer_end = 1 : i64} {
    vmachine.step decode attributes {rows = 1 : i64} {
      vmachine.queue attributes {engine = "q"} {
        vmachine.kernel "i0" "add" (%b.ghost, %b.y) -> (%b.y) {cmd = "c0", attrs = {}, block = 0 : i64}
      }
    }
  }
}
// CHECK:      vmachine-unknown-buffer.mlir:11:9: error: [AB-M-1] a machine program must respect its dataflow and kernel ABI: instruction 'i0' (command 'c0'): names buffer '%b.ghost' that the program does not declare
// CHECK-NEXT: {{^}}  vmachine.kernel "i0" "add" (%b.ghost, %b.y) -> (%b.y) {cmd = "c0", attrs = {}, block = 0 : i64}{{$}}
// CHECK-NOT:  vmachine.program
