import type { TriggerRow } from "../store/rows.js";

// A trigger with its position among the candidates: matches come back in the
// order the store listed them, as a linear scan would return them.
interface Entry {
  trigger: TriggerRow;
  order: number;
}

// One node per pattern prefix of literal and `*` segments.
interface Node {
  literal: Map<string, Node>;
  star?: Node;
  // Patterns that end at this node.
  ends: Entry[];
  // Patterns whose next (last) segment is `**`: one or more further segments.
  rest: Entry[];
}

const node = (): Node => ({ literal: new Map(), ends: [], rest: [] });

// The webhook triggers of one tenant and source, compiled once so that an
// event costs a lookup by its type, not a check of every trigger: patterns
// without wildcards in a map by type, the rest in a prefix tree over their
// dotted segments (see event-pattern.ts for the grammar). A lookup visits at
// most one node per pattern prefix, and only the prefixes the event's type
// can reach.
export class TriggerIndex {
  readonly size: number;
  readonly #exact = new Map<string, Entry[]>();
  readonly #root = node();

  constructor(candidates: readonly TriggerRow[]) {
    let order = 0;
    for (const trigger of candidates) {
      const pattern = trigger.eventTypePattern;
      if (!pattern) continue;
      const entry = { trigger, order: order++ };
      if (!pattern.includes("*")) {
        const list = this.#exact.get(pattern);
        if (list) list.push(entry);
        else this.#exact.set(pattern, [entry]);
        continue;
      }
      let at = this.#root;
      const segments = pattern.split(".");
      for (let i = 0; i < segments.length; i++) {
        const segment = segments[i]!;
        if (segment === "**") {
          at.rest.push(entry);
          break;
        }
        let next = segment === "*" ? at.star : at.literal.get(segment);
        if (!next) {
          next = node();
          if (segment === "*") at.star = next;
          else at.literal.set(segment, next);
        }
        at = next;
        if (i === segments.length - 1) at.ends.push(entry);
      }
    }
    this.size = order;
  }

  // The triggers whose pattern matches the event type, in candidate order.
  matching(eventType: string): TriggerRow[] {
    const found: Entry[] = [];
    const exact = this.#exact.get(eventType);
    if (exact) found.push(...exact);
    const root = this.#root;
    if (root.star || root.literal.size || root.rest.length) collect(root, eventType.split("."), 0, found);
    if (found.length > 1) found.sort((a, b) => a.order - b.order);
    return found.map((e) => e.trigger);
  }
}

function collect(at: Node, segments: string[], i: number, found: Entry[]): void {
  if (i === segments.length) {
    found.push(...at.ends);
    return;
  }
  found.push(...at.rest);
  const literal = at.literal.get(segments[i]!);
  if (literal) collect(literal, segments, i + 1, found);
  if (at.star) collect(at.star, segments, i + 1, found);
}
