// The runs of a SQLite database by status, counted on a thread of its own.
// better-sqlite3 is synchronous, and the benches that sample counts during a
// load (the soak, every 5 s) drive their paced generator from the same event
// loop: a count there held every request due meanwhile, whose latency counts
// from its scheduled send, so the ack p99 rose with the runs table (about
// 0.5 s a count at 450,000 runs on an Intel Xeon) though the service's did not.
import { parentPort, workerData } from "node:worker_threads";
import Database from "better-sqlite3";
import { RUN_ENDED } from "../../src/store/run-conditions.js";

const db = new Database(workerData as string, { readonly: true, fileMustExist: true });
// Ended runs from the covering runs_status index (its condition in the
// schema's own words, which SQLite needs to take it), queued and running ones
// from their partial indexes: about a third of a scan of the table's rows, in
// one read transaction so the three parts agree.
const stmt = db.prepare<[], { status: string; n: number }>(
  `select status, count(*) as n from runs where ${RUN_ENDED} group by status
   union all select 'queued', count(*) from runs where status = 'queued'
   union all select 'running', count(*) from runs where status = 'running'`,
);
parentPort!.on("message", (id: number) => parentPort!.postMessage({ id, rows: stmt.all() }));
