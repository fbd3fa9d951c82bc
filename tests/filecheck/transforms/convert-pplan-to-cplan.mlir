// RUN: printf '[[nodes]]\nid = "n0"\nmemory_bytes = 1073741824\nbandwidth_bytes_per_s = 1.0e11\nflops_per_s = 1.0e12\nlink_bandwidth_bytes_per_s = 1.0e9\n[[nodes]]\nid = "n1"\nmemory_bytes = 1073741824\nbandwidth_bytes_per_s = 1.0e11\nflops_per_s = 1.0e12\nlink_bandwidth_bytes_per_s = 1.0e9\n' > %t.pool.toml
// RUN: pipeplan plan %models/stories260K.gguf --nodes %t.pool.toml --stages 2 --max-seq-len 64 -o %t.runplan.mlir
// RUN: pipeplan-opt %t.runplan.mlir -p 'convert-runplan-to-pplan{pool="%t.pool.toml" prompt_len=4},pplan-legalize{target=virtual-queue},pplan-select-implementations,pplan-resolve-costs{evidence=roofline}' -o %t.pplan.mlir
// RUN: pipeplan-opt %t.pplan.mlir -p 'convert-pplan-to-cplan{binder=list-schedule keep_source=true},cplan-verify{require_source=true}' | filecheck %s --check-prefix=LIST
// RUN: pipeplan-opt %t.pplan.mlir -p 'convert-pplan-to-cplan{binder=reference-queue keep_source=true},cplan-verify{require_source=true}' | filecheck %s --check-prefix=QUEUE
// RUN: pipeplan-opt %t.pplan.mlir -p 'convert-pplan-to-cplan{binder=reference-slot keep_source=true},cplan-verify{require_source=true}' | filecheck %s --check-prefix=SLOT
// RUN: pipeplan-opt %t.pplan.mlir -p 'convert-pplan-to-cplan{binder=bogus}' --verify-diagnostics | filecheck %s --check-prefix=BAD

// stories260K on 2 stages through the whole binding chain. Each binder gives one cplan.plan that
// passes the commit gate (AB-R-5) and relation invariants (AB-R-6); the reference binders keep the
// 1:1 task -> command identity (AB-R-1) and emit different typed extensions (AB-R-7); stage 0's
// first weight sits at offset 0 of n0 (aligned linear allocation, AB-R-3). Commands take the !cplan.alloc
// values they read/write and the !cplan.timepoint of each dependency; queues and slots list timepoints.

// LIST:      cplan.plan attributes {binder = "list-schedule", target = "virtual-queue@1", deployment = "deployment:n0,n1", evidence = "roofline@r1", risk = "accept-fallback", source = "sha256:{{[0-9a-f]+}}"} {
// LIST-NEXT:   cplan.device {id = "n0", capacity = {device = 1073741824 : i64, host = 1073741824 : i64, link = 1073741824 : i64}, engines = {queue.compute = 1 : i64, queue.copy = 1 : i64}}
// LIST:        cplan.link {id = "link.n0.n1", src = "n0", dst = "n1", capacity = 1073741824 : i64}
// LIST:        %[[RECV:[0-9]+]] = cplan.command "cmd.prefill.s0.recv.e0" (%{{[0-9]+}}) -> (%{{[0-9]+}}) cost direct by roofline {task = "prefill.s0.recv.e0"
// LIST:        %[[NORM:[0-9]+]] = cplan.command "cmd.prefill.s0.b0.rms_norm.attn_norm" (%{{[0-9]+}}, %{{[0-9]+}}) -> (%{{[0-9]+}}) after(%{{[0-9]+}})
// LIST-NEXT:   %{{[0-9]+}} = cplan.command "cmd.prefill.s0.b0.matmul.attn_q" (%{{[0-9]+}}, %{{[0-9]+}}) -> (%{{[0-9]+}}) after(%[[NORM]]) cost direct by roofline {task = "prefill.s0.b0.matmul.attn_q", op = "matmul", impl = "vq.matmul", device = "n0", engine = "queue.compute", lineage = #cplan.lineage<prefill, stage 0, block 0, "blk.0.attn_q">, duration = {{.*}}
// LIST:        cplan.sync %{{[0-9]+}} -> %{{[0-9]+}}
// LIST:        cplan.queue_schedule {
// LIST-NEXT:     cplan.queue "n0" "queue.copy" [%[[RECV]], 

// QUEUE:      cplan.plan attributes {binder = "reference-queue"
// QUEUE:        cplan.queue_schedule {
// QUEUE-NOT:    cplan.slot

// SLOT:       cplan.plan attributes {binder = "reference-slot"
// SLOT:         cplan.slot_dataflow {
// SLOT-NEXT:      cplan.slot "slot.n0.queue.copy" on "n0" "queue.copy" [%{{[0-9]+}}, 
// SLOT:           cplan.fire %{{[0-9]+}} on "slot.n0.queue.compute" after [%{{[0-9]+}}]

// BAD: error[unsupported_binder]: unknown binder 'bogus' (reference-queue | reference-slot | list-schedule)
