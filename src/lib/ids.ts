import { v7 as uuidv7 } from "uuid";

// Record ids: a kind prefix and a UUIDv7, so ids sort by creation time and
// keyset pagination "newest first" is an order by id.
export type IdKind = "ten" | "mem" | "agt" | "skl" | "trg" | "src" | "evt" | "run";

export function newId(kind: IdKind): string {
  return `${kind}_${uuidv7()}`;
}
