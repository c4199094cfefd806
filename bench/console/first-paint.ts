// The console's overview against a tenant with many runs (issue 22: first
// meaningful paint under 1 s with 100,000 runs): `agentplane dev` as `make
// run` starts it (SQLite), its dev tenant seeded with BENCH_RUNS runs (and as
// many events) spread over the last 7 days, then Debian's Chromium signs in
// through the dev issuer BENCH_REPEATS times. Each time it records, on the
// page's own clock (from the navigation that brings the console back from
// the sign-in), when the overview shows the store's figures: the tiles
// filled and the last hour's 60 bars drawn; then how long the 7-day view
// (168 bars, every seeded run aggregated) takes after its button is clicked.
import Database from "better-sqlite3";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { launchBrowser, newUser } from "../../test/support/browser.js";
import { CliProcess } from "../../test/support/cli-process.js";
import { freeLoopbackPort } from "../../test/support/listen.js";
import { positiveInt } from "../lib/env.js";
import { percentile } from "../lib/stats.js";
import { printTable } from "../lib/table.js";

const RUNS = positiveInt("BENCH_RUNS", 100_000);
const REPEATS = positiveInt("BENCH_REPEATS", 5);
const WEEK = 7 * 24 * 3600_000;

// An id of `kind` made at `ms` (the UUIDv7 layout of src/lib/ids.ts), unique by `i`.
function idAt(kind: string, ms: number, i: number): string {
  const t = ms.toString(16).padStart(12, "0");
  const hex = (n: number, w: number) => n.toString(16).padStart(w, "0");
  return `${kind}_${t.slice(0, 8)}-${t.slice(8, 12)}-7${hex(i % 4096, 3)}-8${hex(Math.floor(i / 4096) % 4096, 3)}-${hex(i, 12)}`;
}

// Ended runs only (the dev runtime would otherwise take the queued ones):
// 90 % succeeded, 6 % failed (three kinds), 2 % timed out, 2 % cancelled.
function seed(file: string, runs: number): void {
  const db = new Database(file);
  try {
    const { id: tenant } = db.prepare("select id from tenants where slug = 'dev'").get() as { id: string };
    const now = Date.now();
    const start = now - WEEK;
    const step = WEEK / runs;
    const event = db.prepare(
      `insert into events (id, tenant_id, source_id, event_type, payload, receive_time, matched_trigger_ids, create_time, update_time)
       values (?, ?, 'src_bench', 'order.created', ?, ?, '["trg_bench"]', ?, ?)`,
    );
    const run = db.prepare(
      `insert into runs (id, tenant_id, agent_id, trigger_id, event_id, status, attempt, steps, error, start_time, end_time, create_time, update_time)
       values (?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?)`,
    );
    const errors = ["steps[0] (lookup): skill_timeout: no answer in 30 s", "steps[0] (lookup): skill_error: upstream 500", "steps[0].arguments: expression_error: undefined function"];
    db.transaction(() => {
      for (let i = 0; i < runs; i++) {
        const t = Math.floor(start + i * step);
        const r = i % 100;
        const status = r < 90 ? "succeeded" : r < 96 ? "failed" : r < 98 ? "timed_out" : "cancelled";
        const eventId = idAt("evt", t, i);
        event.run(eventId, tenant, JSON.stringify({ order: i, total: i % 1000 }), t, t, t);
        const steps = JSON.stringify([{ kind: "tool_call", tool: "lookup", arguments: { order: i }, result: { ok: true }, startTime: t + 5, endTime: t + 5 + (i % 900) }]);
        const error = status === "failed" ? errors[r % 3]! : status === "timed_out" ? "agent timeout" : "";
        run.run(idAt("run", t, i), tenant, `agt_${i % 20}`, `trg_${i % 50}`, eventId, status, steps, error, t + 5, t + 10 + (i % 1000), t, t);
      }
    })();
  } finally {
    db.close();
  }
}

// What the functions run in the page use of its document (this project's
// TypeScript has no DOM types outside the console).
type PageGlobals = { document: { querySelectorAll(s: string): ArrayLike<{ textContent: string | null }> & Iterable<{ textContent: string | null }> } };

// The page's clock (ms since its navigation began) at the first animation
// frame where `predicate` is truthy: it returns performance.now() then.
async function onPage(page: Page, predicate: () => number): Promise<number> {
  const handle = await page.waitForFunction(predicate, undefined, { polling: "raf", timeout: 60_000 });
  return (await handle.jsonValue()) as number;
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), "agentplane-first-paint-"));
  const env = { AGENTPLANE_DATA_DIR: dir, AGENTPLANE_WORKER_THREADS: "1", AGENTPLANE_LOG_LEVEL: "warn" };
  const browser = await launchBrowser();
  let dev: CliProcess | undefined;
  try {
    // Once to create the database and the dev tenant, then seeded while stopped.
    dev = new CliProcess(["dev"], env, await freeLoopbackPort());
    await dev.ready("agentplane dev");
    await dev.kill();
    const t0 = performance.now();
    seed(join(dir, "agentplane.db"), RUNS);
    console.log(`seeded ${RUNS.toLocaleString()} runs and events over 7 days in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    dev = new CliProcess(["dev"], env, await freeLoopbackPort());
    await dev.ready("agentplane dev");

    const rows: string[][] = [];
    const paints: number[] = [];
    const weeks: number[] = [];
    for (let i = 0; i < REPEATS; i++) {
      const { page, context, errors } = await newUser(browser);
      try {
        await page.goto(`${dev.url}/`);
        await page.getByRole("button", { name: "Sign in as dev-user" }).click();
        await page.waitForURL(/\/console\/t\/dev\/overview/);
        // On the page's clock: ms since this document's navigation began.
        // Functions Playwright runs in the page: nothing from this scope.
        const painted = await onPage(page, () => {
          const { document } = globalThis as unknown as PageGlobals;
          const tiles = [...document.querySelectorAll(".tiles dd")].map((d) => d.textContent ?? "");
          return document.querySelectorAll(".chart svg g").length === 60 && tiles.some((t) => /[1-9]/.test(t)) ? performance.now() : 0;
        });
        const clicked = (await page.evaluate("performance.now()")) as number;
        await page.getByRole("button", { name: "7 days" }).click();
        const week = await onPage(page, () =>
          (globalThis as unknown as PageGlobals).document.querySelectorAll(".chart svg g").length === 168 ? performance.now() : 0,
        );
        if (errors.length) throw new Error(`page errors: ${errors.join("; ")}`);
        paints.push(painted);
        weeks.push(week - clicked);
        rows.push([String(i + 1), painted.toFixed(0), (week - clicked).toFixed(0)]);
      } finally {
        await context.close();
      }
    }
    printTable(["sign-in", "overview painted (ms from navigation)", "7-day view (ms from click)"], rows);
    const cpu = process.cpuUsage();
    console.log(
      `overview first paint p50 ${percentile(paints, 50).toFixed(0)} ms, max ${Math.max(...paints).toFixed(0)} ms (target < 1000); ` +
        `7-day view p50 ${percentile(weeks, 50).toFixed(0)} ms, max ${Math.max(...weeks).toFixed(0)} ms; ` +
        `this process's CPU ${((cpu.user + cpu.system) / 1000).toFixed(0)} ms`,
    );
  } finally {
    await dev?.kill();
    await browser.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
