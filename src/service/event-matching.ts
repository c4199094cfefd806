import jsonata from "jsonata";
import type { TriggerRow } from "../store/schema.js";
import { matchesEventType } from "./event-pattern.js";

type Expression = ReturnType<typeof jsonata>;

// Which of a tenant's candidate webhook triggers an event matches: pattern,
// then the JSONata filter over `{event_type, payload}`. Compiled filters are
// kept per trigger version, so a busy trigger is not recompiled per event.
export class EventMatcher {
  readonly #compiled = new Map<string, Expression>();

  constructor(private readonly onFilterError: (triggerId: string, err: unknown) => void = () => {}) {}

  async matching(candidates: TriggerRow[], eventType: string, payload: Record<string, unknown>): Promise<TriggerRow[]> {
    const matched: TriggerRow[] = [];
    for (const trigger of candidates) {
      if (!trigger.eventTypePattern || !matchesEventType(trigger.eventTypePattern, eventType)) continue;
      if (trigger.filter && !(await this.#passes(trigger, { event_type: eventType, payload }))) continue;
      matched.push(trigger);
    }
    return matched;
  }

  async #passes(trigger: TriggerRow, input: object): Promise<boolean> {
    const key = `${trigger.id}@${trigger.updateTime}`;
    let expression = this.#compiled.get(key);
    if (!expression) {
      expression = jsonata(trigger.filter!);
      if (this.#compiled.size > 10_000) this.#compiled.clear();
      this.#compiled.set(key, expression);
    }
    try {
      return (await expression.evaluate(input)) === true;
    } catch (err) {
      // A filter that fails on this payload does not match it.
      this.onFilterError(trigger.id, err);
      return false;
    }
  }
}
