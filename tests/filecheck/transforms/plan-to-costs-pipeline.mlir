// RUN: env PIPEPLAN_LOCAL_PEAKS=2.0e10,1.0e11 pipeplan plan %models/stories260K.gguf --stages 2 | pipeplan-opt -p 'convert-runplan-to-pplan,pplan-legalize{target=virtual-queue},pplan-select-implementations,pplan-resolve-costs{evidence=roofline}' | filecheck %s
// RUN: rm -rf %t.cache
// RUN: env -u PIPEPLAN_LOCAL_PEAKS PIPEPLAN_CACHE=%t.cache pipeplan plan %models/stories260K.gguf --stages 2 | pipeplan-opt -p 'convert-runplan-to-pplan,pplan-legalize{target=virtual-queue},pplan-select-implementations,pplan-resolve-costs{evidence=roofline}' | filecheck %s --check-prefix=PROBE
// RUN: filecheck %s --check-prefix=CACHE --input-file=%t.cache/local_peaks.json

// Issue 4's command-line pipeline, exactly as written: `pipeplan plan M --stages 2 | pipeplan-opt -p
// 'convert-runplan-to-pplan,pplan-legalize{target=virtual-queue},pplan-select-implementations,
// pplan-resolve-costs{evidence=roofline}'`. Without --nodes the plan runs on a local pool whose node
// specs state this machine's peaks; the RunPlan IR carries them, so convert-runplan-to-pplan builds the
// DeploymentBinding from the IR (no pool= option, no process default) and roofline costing has every
// peak it needs (AB-G-1, AB-G-4).
//
// First run: peaks fixed by PIPEPLAN_LOCAL_PEAKS (2e10 B/s, 1e11 FLOP/s; link = memory bandwidth), so
// the decode attn_q matmul of block 3 costs max(8192 / 1e11, (16640 + 256) / 2e10) = 8.448e-07 s.
// Second run: no override, so `pipeplan plan` probes this machine once with numpy and caches the
// figures in $PIPEPLAN_CACHE/local_peaks.json (values vary by machine: only their presence is checked).

// CHECK:      pplan.plan
// CHECK:      pplan.task matmul({{.*}}) -> "blk.3.q_proj" at "blk.3.attn_q" work [1, 64, 64] {pplan.candidates = [#pplan.candidate<"vq.matmul", "queue.compute", 0>], pplan.costs = [#pplan.cost<"vq.matmul", 8.448{{[0-9]*}}e-07 s, roofline, direct, conf 0.5>]}
// CHECK:      pplan.deployment_binding @deployment {devices = [{bandwidth_bytes_per_s = 2.000000e+10 : f64, flops_per_s = 1.000000e+11 : f64, id = "local0", link_bandwidth_bytes_per_s = 2.000000e+10 : f64, memory_bytes = {{[0-9]+}} : i64, reserved_bytes = {{[0-9]+}} : i64}, {{{.*}}, id = "local1", {{.*}}}], stage_devices = ["local0", "local1"], topology = "chain"}
// CHECK:      pplan.target_binding @target {{{.*}}target = "virtual-queue"
// CHECK:      pplan.candidates {{{.*}}target = "virtual-queue"
// CHECK:      pplan.evidence_policy @policy {providers = ["roofline"]
// CHECK:      pplan.costed_view {

// PROBE:      pplan.task matmul({{.*}}) -> "blk.3.q_proj" at "blk.3.attn_q" work [1, 64, 64] {pplan.candidates = [#pplan.candidate<"vq.matmul", "queue.compute", 0>], pplan.costs = [#pplan.cost<"vq.matmul", {{.*}} s, roofline, direct,
// PROBE:      pplan.deployment_binding @deployment {devices = [{bandwidth_bytes_per_s = {{[0-9.]+e\+[0-9]+}} : f64, flops_per_s = {{[0-9.]+e\+[0-9]+}} : f64, id = "local0", link_bandwidth_bytes_per_s = {{[0-9.]+e\+[0-9]+}} : f64, memory_bytes = {{[0-9]+}} : i64, reserved_bytes = {{[0-9]+}} : i64}

// CACHE:      "bandwidth_bytes_per_s": {{[0-9.e+]+}},
// CACHE-NEXT: "flops_per_s": {{[0-9.e+]+}},
// CACHE-NEXT: "format": "pipeplan-local-peaks/1",
// CACHE-NEXT: "link_bandwidth_bytes_per_s": {{[0-9.e+]+}},
