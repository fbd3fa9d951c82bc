// RUN: pipeplan-opt %s -p 'pplan-legalize' --verify-diagnostics | filecheck %s
// RUN: pipeplan-opt %s -p 'pplan-legalize{target=virtual-queue},pplan-select-implementations,pplan-resolve-costs{evidence=roofline}' --verify-diagnostics | filecheck %s --check-prefix=DEPLOY
// RUN: pipeplan-opt %s -p 'pplan-legalize{target=no-such-target}' --verify-diagnostics | filecheck %s --check-prefix=UNKNOWN

// The binding gate never reads a default (AB-G-1, AB-G-4): without a TargetBinding (no target
// option, no pplan.target_binding op) legalization fails naming it; without a DeploymentBinding
// cost resolution fails naming it; an unknown target is a diagnostic listing the known ones.

pplan.plan @run0 attributes {decode_pos = 1 : i64, model = "m", prompt_len = 1 : i64, source = "runplan @run0", stage_count = 1 : i64} {
  %0 = pplan.edge_object "e0" "activation" : !pplan.buffer<1x4xf32, edge>
  pplan.step decode {
    pplan.stage 0 {
      %1 = pplan.task "recv.e0" recv(%0) -> "x" at "edge:e0" work [1, 4] bytes [16, 16] : !pplan.buffer<1x4xf32>
      %2 = pplan.task "b0.add.x" add(%1, %1) updates(%1) at "blk.0.add(x)" blk 0 work [1, 4] flops 4 bytes [16, 16, 16] : !pplan.buffer<1x4xf32>
      pplan.yield
    }
    pplan.yield
  }
}

// CHECK: missing binding: TargetBinding (pplan.target_binding) is required by pplan-legalize; add a pplan.target_binding op or pass pplan-legalize{target=<name>}
// DEPLOY: missing binding: DeploymentBinding (pplan.deployment_binding) is required by pplan-resolve-costs; add a pplan.deployment_binding op or pass convert-runplan-to-pplan{pool=<pool.toml>}
// UNKNOWN: pplan-legalize: unknown target 'no-such-target'; known targets: cuda-triton, virtual-queue, virtual-slot
