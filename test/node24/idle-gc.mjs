// Run by test/node24.test.ts under Node 24: prepares and drops statements,
// then goes idle, so V8 collects them in a major GC run from a task of its
// own, outside any context. Node 24.19's node::ObjectWrap aborted the process
// there (`Assertion failed: (env) != nullptr`); the patched better-sqlite3
// (patches/better-sqlite3+12.11.1.patch) must live through it. Exits 0 after
// that GC, 1 if none came.
import console from "node:console";
import { constants, PerformanceObserver } from "node:perf_hooks";
import process from "node:process";
import { setTimeout } from "node:timers";
import Database from "better-sqlite3";

// Statements, and enough other garbage for V8 to want its memory back.
function churn() {
  const db = new Database(":memory:");
  const garbage = [];
  for (let i = 0; i < 20000; i++) {
    db.prepare(`select ${i}`).get();
    if (i % 10 === 0) garbage.push(new Array(1000).fill(i));
  }
  return garbage.length;
}

churn();
new PerformanceObserver((list) => {
  if (list.getEntries().some((e) => e.detail.kind === constants.NODE_PERFORMANCE_GC_MAJOR)) {
    console.log("statements collected by an idle major GC");
    process.exit(0);
  }
}).observe({ entryTypes: ["gc"] });
setTimeout(() => process.exit(1), 60_000);
