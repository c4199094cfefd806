import type { StreamSession, Wake } from "./streams.js";

// Where a row stands in a change feed: the time of its change (by the clock
// of the process that made it), then its id.
export interface FeedKey {
  time: number;
  id: string;
}

// How far a change may be stamped before one already seen and still become
// visible after it: clock skew between replicas, and the time from taking
// `now` to the commit (group commit, a wait for the write lock).
const CHANGE_SKEW_MS = 2000;
const PAGE = 100;

export interface FeedSource<Row, Out = Row> {
  // Rows (of the tenant, filtered) whose key sorts after `from`, oldest first.
  read(from: FeedKey, limit: number): Promise<Row[]>;
  key(row: Row): FeedKey;
  // Equal for the same state of the same row: each is sent once.
  version(row: Row): string;
  // What is sent for a page's new rows, made for the page at once (one query
  // for all of them, not one per row); rows already sent are not passed.
  send(rows: Row[]): Promise<Out[]>;
}

// The rows that change from `start` on, each version once, while the
// session lasts. After a signal the feed reads on from the furthest key it
// has seen (cheap, at once); at each poll it reads again from CHANGE_SKEW_MS
// before that, for rows stamped earlier but visible only now. What it has
// sent within that window is remembered, and nothing older.
export async function* changes<Row, Out>(source: FeedSource<Row, Out>, session: StreamSession, start: number): AsyncGenerator<Out> {
  let high: FeedKey = { time: start, id: "" };
  const seen = new Map<string, number>();
  for (let wake: Wake = "poll"; wake !== "end"; wake = await session.next()) {
    let from: FeedKey = wake === "poll" ? { time: Math.max(start, high.time - CHANGE_SKEW_MS), id: "" } : high;
    for (;;) {
      const rows = await source.read(from, PAGE);
      const fresh: Row[] = [];
      for (const row of rows) {
        const key = source.key(row);
        from = key;
        if (key.time > high.time || (key.time === high.time && key.id > high.id)) high = key;
        const version = source.version(row);
        if (seen.has(version)) continue;
        seen.set(version, key.time);
        fresh.push(row);
      }
      for (const out of fresh.length ? await source.send(fresh) : []) {
        yield out;
        session.sent();
      }
      if (rows.length < PAGE || session.ended) break;
    }
    const floor = high.time - CHANGE_SKEW_MS;
    for (const [version, time] of seen) if (time < floor) seen.delete(version);
  }
}
