// Where the `tenants` mode's gap comes from: the SQLite ingest commit alone
// (the writer thread's transaction, on this thread), batches of the same
// events from one tenant and from a hundred, CPU and bytes written per event.
// SQLite's WAL holds whole pages: a commit writes every page it changed, and
// each tenant's rows sit on pages of their own in every index that starts
// with the tenant, so a batch from a hundred tenants changes many more pages
// than the same batch from one. BENCH_DROP=index,… drops indexes first, to
// see what each costs.
import { randomUUID } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { newId } from "../../src/lib/ids.js";
import { queuedRun } from "../../src/store/queued-run.js";
import { openConnection } from "../../src/store/sqlite/connection.js";
import { createIngestCommitter, encodeIngest, type EncodedIngest } from "../../src/store/sqlite/ingest-commit.js";
import { createSqliteStore } from "../../src/store/sqlite/store.js";
import { positiveInt } from "../lib/env.js";

const EVENTS = positiveInt("BENCH_EVENTS", 60_000);
const BATCH = positiveInt("BENCH_BATCH", 64);
const TENANTS = (process.env.BENCH_TENANTS ?? "1,100,100,1").split(",").map(Number);
const DROP = (process.env.BENCH_DROP ?? "").split(",").filter(Boolean);
// NORMAL: the commit's own work, without the fsync that FULL adds to each.
const SYNCHRONOUS = process.env.BENCH_SYNCHRONOUS === "FULL" ? "FULL" : "NORMAL";

// The webhook bench's event: about 1 KiB of payload.
const payload = { total: 150, customer: { tier: "gold", name: "x".repeat(900) } };

// Bytes this process has written to storage (the WAL, and checkpoints into the database file).
const bytesWritten = () => Number(/write_bytes: (\d+)/.exec(readFileSync("/proc/self/io", "utf8"))![1]);

function batchOf(tenants: number, first: number, now: number): EncodedIngest[] {
  return Array.from({ length: BATCH }, (_, i) => {
    const n = (first + i) % tenants;
    const [tenantId, sourceId, agentId, triggerId] = [`ten_${n}`, `src_${n}`, `agt_${n}`, `trg_${n}`];
    const id = newId("evt");
    const event = { id, tenantId, sourceId, eventType: "order.created", payload, receiveTime: now, idempotencyKey: randomUUID(), matchedTriggerIds: [triggerId], createTime: now, updateTime: now };
    return encodeIngest({ event, runs: [queuedRun({ tenantId, agentId, triggerId, eventId: id }, now)], maxQueuedRuns: 1e9 }, 86_400_000);
  });
}

function measure(tenants: number): string {
  const dir = mkdtempSync(join(tmpdir(), "agentplane-locality-"));
  try {
    const path = join(dir, "agentplane.db");
    createSqliteStore({ path }).close();
    const raw = openConnection({ path, synchronous: SYNCHRONOUS });
    for (const index of DROP) raw.exec(`drop index ${index}`);
    const commit = createIngestCommitter(raw);
    const [written, cpu, start] = [bytesWritten(), process.cpuUsage(), performance.now()];
    for (let sent = 0, now = Date.now(); sent < EVENTS; sent += BATCH, now++) commit(batchOf(tenants, sent, now));
    const used = process.cpuUsage(cpu);
    const row = [
      String(tenants).padStart(7),
      (((performance.now() - start) * 1000) / EVENTS).toFixed(1).padStart(13),
      ((used.user + used.system) / EVENTS).toFixed(1).padStart(12),
      ((bytesWritten() - written) / EVENTS / 1024).toFixed(1).padStart(21),
    ].join("  ");
    raw.close();
    return row;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

console.log(`the SQLite ingest commit by tenants sending; node ${process.version}, ${cpus().length} CPUs (${cpus()[0]?.model.trim()}), load average ${loadavg().map((l) => l.toFixed(1)).join(" ")}`);
console.log(`${EVENTS} events of 1 KiB with one run each, in batches of ${BATCH}, synchronous=${SYNCHRONOUS}${DROP.length ? `, indexes dropped: ${DROP.join(", ")}` : ""}`);
console.log("tenants  µs/event wall  µs/event CPU  KiB written per event");
console.log("-------  -------------  ------------  ---------------------");
for (const tenants of TENANTS) console.log(measure(tenants));
