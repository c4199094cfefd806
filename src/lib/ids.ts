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
    seq = ((random[6]! & 0x7f) << 24) | (random[7]! << 16) | (random[8]! << 8) | random[9]!;
    msecs = now;
  } else {
    seq = (seq + 1) | 0;
    if (seq === 0) msecs++;
  }
  return `${kind}_${uuidv7({ random, msecs, seq })}`;
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
