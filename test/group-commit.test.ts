// The store's one batching loop (store/group-commit.ts), which ingest and run
// writes use on both engines, and what ingest adds to it (store/ingest-batch.ts).
import { StoreQuotaError, StoreUnavailableError } from "../src/store/errors.js";
import { batchCommits, groupCommit } from "../src/store/group-commit.js";
import { batchedIngest, OVER_QUOTA, settle } from "../src/store/ingest-batch.js";
import type { IngestItem } from "../src/store/store.js";

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

const timers = () => process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;

test("writes of one event-loop turn share one commit, each settled with its own result", async () => {
  const batches: number[][] = [];
  const write = batchCommits<number, string>(
    (batch) => {
      batches.push(batch.map((p) => p.write));
      for (const p of batch) p.resolve(`r${p.write}`);
    },
    { windowMs: 0, maxBatch: 256 },
  );
  expect(await Promise.all([write(1), write(2), write(3)])).toEqual(["r1", "r2", "r3"]);
  expect(batches).toEqual([[1, 2, 3]]);
});

test("one commit at a time: what arrives meanwhile is the next batch, committed as soon as it ends", async () => {
  const batches: number[][] = [];
  const gates: ReturnType<typeof deferred>[] = [];
  const write = batchCommits<number, number>(
    async (batch) => {
      batches.push(batch.map((p) => p.write));
      const gate = deferred();
      gates.push(gate);
      await gate.promise;
      for (const p of batch) p.resolve(p.write);
    },
    { windowMs: 0, maxBatch: 256 },
  );
  const first = write(1);
  await turn();
  expect(batches).toEqual([[1]]);
  const later = [write(2), write(3)];
  await turn();
  await turn();
  expect(batches).toEqual([[1]]);
  gates[0]!.resolve();
  expect(await first).toBe(1);
  await turn();
  expect(batches).toEqual([[1], [2, 3]]);
  gates[1]!.resolve();
  expect(await Promise.all(later)).toEqual([2, 3]);
});

test("the first write waits for the window; a full batch commits at once and cancels the wait", async () => {
  const batches: number[][] = [];
  const write = batchCommits<number, number>(
    (batch) => {
      batches.push(batch.map((p) => p.write));
      for (const p of batch) p.resolve(p.write);
    },
    { windowMs: 60_000, maxBatch: 3 },
  );
  const before = timers();
  const results = [write(1), write(2)];
  await turn();
  await turn();
  expect(batches).toEqual([]);
  expect(timers()).toBe(before + 1);
  results.push(write(3), write(4));
  expect(batches).toEqual([[1, 2, 3]]);
  expect(await Promise.all(results.slice(0, 3))).toEqual([1, 2, 3]);
  // The fourth write waits for a window of its own.
  expect(timers()).toBe(before + 1);
  results.push(write(5), write(6));
  expect(await Promise.all(results)).toEqual([1, 2, 3, 4, 5, 6]);
  expect(batches).toEqual([
    [1, 2, 3],
    [4, 5, 6],
  ]);
  expect(timers()).toBe(before);
});

test("a commit that throws fails the writes it left unsettled, with what `failed` makes of the error", async () => {
  let failing = true;
  const write = batchCommits<number, number>(
    (batch) => {
      batch[0]!.resolve(batch[0]!.write);
      if (failing) throw new Error("disk gone");
      for (const p of batch) p.resolve(p.write);
    },
    { windowMs: 0, maxBatch: 256 },
    (err) => new Error(`wrapped: ${(err as Error).message}`),
  );
  const [a, b] = await Promise.allSettled([write(1), write(2)]);
  expect(a).toEqual({ status: "fulfilled", value: 1 });
  expect(b).toEqual({ status: "rejected", reason: new Error("wrapped: disk gone") });
  // The loop goes on.
  failing = false;
  expect(await Promise.all([write(3), write(4)])).toEqual([3, 4]);
});

test("groupCommit: a batch that fails is committed again write by write, so one bad write fails alone", async () => {
  const commits: number[][] = [];
  const write = groupCommit<number, number>(async (writes) => {
    commits.push(writes);
    if (writes.includes(13)) throw new Error("bad write");
    return writes.map((w) => w * 2);
  }, 64);
  const [a, bad, c] = await Promise.allSettled([write(1), write(13), write(3)]);
  expect(a).toEqual({ status: "fulfilled", value: 2 });
  expect(bad).toEqual({ status: "rejected", reason: new Error("bad write") });
  expect(c).toEqual({ status: "fulfilled", value: 6 });
  expect(commits).toEqual([[1, 13, 3], [1], [13], [3]]);
});

const item = (id: string): IngestItem => ({
  event: {
    id,
    tenantId: "ten_1",
    sourceId: "src_1",
    eventType: "order.created",
    payload: {},
    receiveTime: 0,
    matchedTriggerIds: [],
    createTime: 0,
    updateTime: 0,
  },
  runs: [],
});

test("ingest: an item over its tenant's cap fails as a quota error, a failed commit as unavailable", async () => {
  let fail = false;
  const ingest = batchedIngest(
    (batch) => {
      if (fail) throw new Error("SQLITE_IOERR");
      for (const p of batch) settle(p, p.write.item.event.id === "evt_over" ? OVER_QUOTA : { duplicate: false, eventId: p.write.item.event.id });
    },
    { windowMs: 0, maxBatch: 256 },
  );
  const [ok, over] = await Promise.allSettled([ingest(item("evt_ok"), 1000), ingest(item("evt_over"), 1000)]);
  expect(ok).toEqual({ status: "fulfilled", value: { duplicate: false, eventId: "evt_ok" } });
  expect(over.status === "rejected" && over.reason).toBeInstanceOf(StoreQuotaError);
  fail = true;
  const failed = ingest(item("evt_later"), 1000);
  await expect(failed).rejects.toBeInstanceOf(StoreUnavailableError);
  await expect(failed).rejects.toThrow("ingest commit failed: SQLITE_IOERR");
});
