// Preloaded into `agentplane serve` by the soak bench (`node --require`, which
// worker threads inherit): every thread appends its V8 heap figures to a file
// of its own, so the bench can tell a growing JavaScript heap on any thread
// from growth outside the heaps (native allocations, fragmentation).
// With BENCH_SOAK_SNAPSHOTS ("60,600": seconds after start), every thread
// also writes a heap snapshot at those times into BENCH_SOAK_SNAPSHOT_DIR,
// to compare what grew.
// CommonJS, because --require loads it before the ESM entry point.
/* eslint-disable @typescript-eslint/no-require-imports -- a CommonJS module (see above) */
import fs = require("node:fs");
import path = require("node:path");
import v8 = require("node:v8");
import threads = require("node:worker_threads");
/* eslint-enable @typescript-eslint/no-require-imports */

const dir = process.env.BENCH_SOAK_HEAP_DIR;
const everyMs = Number(process.env.BENCH_SOAK_HEAP_EVERY_MS ?? 5000);
if (dir) {
  const file = path.join(dir, `heap-${process.pid}-${threads.threadId}.jsonl`);
  const sample = () => {
    const h = v8.getHeapStatistics();
    const m = process.memoryUsage();
    const line = { t: Date.now(), thread: threads.threadId, used: h.used_heap_size, total: h.total_heap_size, external: h.external_memory, arrayBuffers: m.arrayBuffers };
    fs.appendFileSync(file, `${JSON.stringify(line)}\n`);
  };
  sample();
  setInterval(sample, everyMs).unref();
  for (const at of (process.env.BENCH_SOAK_SNAPSHOTS ?? "").split(",").filter(Boolean))
    setTimeout(() => v8.writeHeapSnapshot(path.join(process.env.BENCH_SOAK_SNAPSHOT_DIR ?? dir, `heap-${process.pid}-${threads.threadId}-${at}s.heapsnapshot`)), Number(at) * 1000).unref();
}
