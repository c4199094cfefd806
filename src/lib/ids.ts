import { randomFillSync } from "node:crypto";
import { v7 as uuidv7 } from "uuid";

// Record ids: a kind prefix and a UUIDv7, so ids sort by creation time and
// keyset pagination "newest first" is an order by id.
export type IdKind = "ten" | "mem" | "agt" | "skl" | "trg" | "src" | "evt" | "run";

// uuid's v7() draws 16 random bytes per id through crypto.getRandomValues,
// whose per-call overhead shows on the webhook path (two ids per event). The
// same CSPRNG bytes are drawn here in blocks instead. uuid only keeps its
// monotonic state when called without options, so that state (the
// millisecond and the 32-bit counter seeded from the random bytes, carried
// into the next millisecond on overflow) is kept here exactly as uuid keeps it.
const POOL_IDS = 256;
const pool = new Uint8Array(16 * POOL_IDS);
let next = POOL_IDS;
let msecs = -Infinity;
let seq = 0;

function randomBlock(): Uint8Array {
  if (next === POOL_IDS) {
    randomFillSync(pool);
    next = 0;
  }
  return pool.subarray(16 * next, 16 * ++next);
}

export function newId(kind: IdKind): string {
  const random = randomBlock();
  const now = Date.now();
  if (now > msecs) {
    seq = seedOf(random);
    msecs = now;
  } else {
    seq = (seq + 1) | 0;
    if (seq === 0) msecs++;
  }
  return `${kind}_${uuidv7({ random, msecs, seq })}`;
}

const seedOf = (random: Uint8Array) => ((random[6]! & 0x7f) << 24) | (random[7]! << 16) | (random[8]! << 8) | random[9]!;

// newIdAt's own sequence: a test's clock, or a caller's time taken a moment
// ago, does not move newId's.
let atMsecs = -Infinity;
let atSeq = 0;

// An id made at `ms` by the caller's clock, exactly: a run's id says its
// create_time to the millisecond (store/list-query.ts, RUN_LIST_SPLIT).
// Ids made at the same millisecond as the last one follow it (a wrapped
// counter is not carried into the next millisecond: the 62 random bits keep
// it unique); at a later one they start a new sequence; at an earlier one (a
// clock set back, a time taken before another caller's) they get a random
// one, unordered among that millisecond's ids.
export function newIdAt(kind: IdKind, ms: number): string {
  const random = randomBlock();
  const at = Math.floor(ms);
  if (at < atMsecs) return `${kind}_${uuidv7({ random, msecs: at, seq: seedOf(random) })}`;
  atSeq = at > atMsecs ? seedOf(random) : (atSeq + 1) | 0;
  atMsecs = at;
  return `${kind}_${uuidv7({ random, msecs: at, seq: atSeq })}`;
}

// When an id was made (its UUIDv7 milliseconds), by the clock of the process
// that made it.
export function idTime(id: string): number {
  const hex = id.slice(id.indexOf("_") + 1).replace("-", "").slice(0, 12);
  return parseInt(hex, 16);
}

// The lowest id of a kind made at `ms`: every id made then or later sorts
// after it (version and variant nibbles are never 0).
export function idFloor(kind: IdKind, ms: number): string {
  const hex = Math.max(0, Math.floor(ms)).toString(16).padStart(12, "0");
  return `${kind}_${hex.slice(0, 8)}-${hex.slice(8)}-0000-0000-000000000000`;
}
