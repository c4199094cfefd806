import { SandboxBacklogError, type ExpressionSandbox, type Outcome } from "../integrations/expressions/sandbox.js";
import type { TriggerRow } from "../store/rows.js";
import type { Store } from "../store/store.js";
import { overloaded, retryLater } from "./errors.js";

// Why a filter did not get to say yes: its own failure, or suspension after
// repeated overruns.
export type FilterFailure = Exclude<Extract<Outcome, { ok: false }>["kind"], "skipped" | "overloaded"> | "suspended";

export interface FilterPolicy {
  // Wall-clock budget of one filter on one event.
  budgetMs: number;
  // A filter over budget (or too deep, or too large) this many times within
  // `suspendWindowMs` is not evaluated for the next `suspendWindowMs`.
  suspendAfter: number;
  suspendWindowMs: number;
  // How often a trigger's last failure is written to it, at most.
  recordEveryMs: number;
}

export const DEFAULT_FILTER_POLICY: FilterPolicy = { budgetMs: 50, suspendAfter: 3, suspendWindowMs: 60_000, recordEveryMs: 10_000 };

export interface EventMatcherOptions {
  store: Store;
  sandbox: ExpressionSandbox;
  policy?: Partial<FilterPolicy>;
  now?: () => number;
  // Every failed or skipped filter evaluation (metrics, logs).
  onFilterFailure?: (trigger: TriggerRow, kind: FilterFailure, message: string) => void;
}

// Per trigger version: an edited filter starts with a clean record.
const healthKey = (t: TriggerRow) => `${t.id}@${t.updateTime}`;

interface Health {
  overruns: number[];
  suspendedUntil: number;
  recordedAt: number;
}

// Which of the webhook triggers whose pattern an event matched (see
// trigger-index.ts) it matches: the JSONata filter over `{event_type,
// payload}`, run in the expression sandbox under the filter budget. A filter that fails does not match; the
// failure is counted, and written to the trigger (`filter_error`) at most
// every `recordEveryMs`. A filter that keeps overrunning its budget is
// suspended for a while, so a tenant's worst filter costs a bounded amount.
export class EventMatcher {
  readonly #o: Required<Omit<EventMatcherOptions, "policy">> & { policy: FilterPolicy };
  readonly #health = new Map<string, Health>();

  constructor(options: EventMatcherOptions) {
    this.#o = {
      ...options,
      now: options.now ?? Date.now,
      onFilterFailure: options.onFilterFailure ?? (() => {}),
      policy: { ...DEFAULT_FILTER_POLICY, ...options.policy },
    };
  }

  // `signal`: the caller no longer wants the answer (a webhook's sender went
  // away); the filters not yet evaluated are skipped, and the caller must not
  // act on the partial answer.
  async matching(tenantId: string, byPattern: TriggerRow[], eventType: string, payload: Record<string, unknown>, signal?: AbortSignal): Promise<TriggerRow[]> {
    const filtered = byPattern.filter((t) => t.filter);
    let outcomes: Outcome[] = [];
    if (filtered.length) {
      try {
        outcomes = await this.#o.sandbox.evaluate(
          tenantId,
          filtered.map((t) => t.filter!),
          { event_type: eventType, payload },
          this.#o.policy.budgetMs,
          "filter",
          {
            // Checked when the filter's turn comes, so one suspended while
            // this event waited is not evaluated either.
            skip: (i) => signal?.aborted === true || this.#suspended(filtered[i]!, this.#o.now()),
            // A filter the machine's load cut off is not the trigger's
            // failure: the event is refused for a retry below.
            settled: (i, outcome) => {
              if (!outcome.ok && outcome.kind !== "skipped" && outcome.kind !== "overloaded") this.#failed(filtered[i]!, outcome.kind, outcome.message, this.#o.now());
            },
          },
        );
      } catch (err) {
        if (err instanceof SandboxBacklogError)
          throw retryLater("this tenant's trigger filters are backlogged; retry later", 1);
        throw err;
      }
    }
    // Matching on without it would drop the event's run for good.
    if (outcomes.some((o) => !o.ok && o.kind === "overloaded")) throw overloaded("this event's trigger filters");
    const passed = new Set(filtered.filter((_, i) => outcomes[i]?.ok && outcomes[i].value === true));
    return byPattern.filter((t) => !t.filter || passed.has(t));
  }

  #suspended(trigger: TriggerRow, now: number): boolean {
    const health = this.#health.get(healthKey(trigger));
    if (!health || health.suspendedUntil <= now) return false;
    this.#o.onFilterFailure(trigger, "suspended", "");
    return true;
  }

  #failed(trigger: TriggerRow, kind: FilterFailure, message: string, now: number): void {
    const { policy, store } = this.#o;
    let health = this.#health.get(healthKey(trigger));
    if (!health) {
      if (this.#health.size >= 100_000) this.#health.clear();
      this.#health.set(healthKey(trigger), (health = { overruns: [], suspendedUntil: 0, recordedAt: 0 }));
    }
    let text = `${kind}: ${message}`;
    let suspending = false;
    if (kind !== "error") {
      health.overruns = health.overruns.filter((t) => t > now - policy.suspendWindowMs);
      health.overruns.push(now);
      if (health.overruns.length >= policy.suspendAfter) {
        health.suspendedUntil = now + policy.suspendWindowMs;
        health.overruns = [];
        suspending = true;
        text += ` (over budget ${policy.suspendAfter} times: not evaluated for ${policy.suspendWindowMs / 1000} s)`;
      }
    }
    this.#o.onFilterFailure(trigger, kind, message);
    if (now - health.recordedAt < policy.recordEveryMs && !suspending) return;
    health.recordedAt = now;
    // Best effort: a trigger's diagnostics never fail an event.
    store.triggers.update(trigger.tenantId, trigger.id, { filterError: text.slice(0, 500), filterErrorTime: now }).catch(() => {});
  }
}
