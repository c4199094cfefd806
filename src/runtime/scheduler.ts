import { Cron } from "croner";
import type { Logger } from "pino";
import { FailureStreak } from "../lib/failure-streak.js";
import { LogThrottle } from "../lib/log-throttle.js";
import { NO_OBSERVER, type Observer } from "../lib/observer.js";
import { queuedRun } from "../store/queued-run.js";
import type { TriggerRow } from "../store/rows.js";
import type { ScheduledTrigger, ScheduleStore, StoreSignals } from "../store/store.js";

export interface SchedulerOptions {
  store: ScheduleStore;
  // Trigger and agent changes (here or on another replica) are picked up as
  // the store signals them.
  signals?: Pick<StoreSignals, "onChanged">;
  log: Logger;
  onRunsQueued?: () => void;
  // How often trigger changes are picked up without a signal, at most.
  refreshMs?: number;
  // How soon after a tick's start a change signal may start another (a
  // tick reads every tenant's schedule triggers): one tenant changing its
  // agents or triggers without pause costs that read this often at most.
  signalGapMs?: number;
  now?: () => number;
  // A slot of a tenant that already has this many queued runs is skipped.
  maxQueuedRuns?: number;
  // Told of slots fired, skipped and missed (metrics).
  observer?: Observer;
}

// A trigger skipped at the quota warns at most once per this window: a
// schedule (or one stored before the minimum interval) that fires every
// second would otherwise write a line a second, per trigger.
const SKIPPED_WARNING_WINDOW_MS = 60_000;

// Slots missed during a long downtime are counted up to this many per fire.
const MAX_MISSED_COUNTED = 1000;

// A schedule trigger's cron as a tick last saw it, and its first slot after
// its last: a tick evaluates a cron (some 160 µs with a timezone) only for a
// trigger that is new, changed, fired elsewhere or due, not for every
// schedule of every tenant whenever any tenant changes a trigger.
interface Plan {
  cron: Cron;
  expression: string;
  timezone: string | null;
  last: number;
  next: number | undefined;
}

// The slots after `last` and before `due` that never fired.
function missedBetween(cron: Cron, last: number, due: number): number {
  let n = 0;
  for (let t = cron.nextRun(new Date(last))?.getTime(); t !== undefined && t < due && n < MAX_MISSED_COUNTED; t = cron.nextRun(new Date(t))?.getTime()) n++;
  return n;
}

// Fires schedule triggers. Each slot is recorded with its run in one
// transaction (primary key: trigger, slot), so a slot fires once across
// restarts and replicas; after downtime only the latest missed slot fires.
// A trigger's first slot is the first one after its creation (lastSlot
// defaults to createTime), so a trigger picked up late still fires it.
export class Scheduler {
  readonly #o: Required<Omit<SchedulerOptions, "signals">> & Pick<SchedulerOptions, "signals">;
  #timer?: NodeJS.Timeout;
  // When the timer will tick, and when the last tick started (now()).
  #timerAt = Infinity;
  #lastStart = -Infinity;
  #stopped = true;
  #ticking = false;
  #again = false;
  #unsubscribe?: () => void;
  readonly #skippedWarnings: LogThrottle;
  // A failed tick (the database is down) is tried again within a second or
  // two, not at the next refresh, so slots due meanwhile fire soon after.
  readonly #failures: FailureStreak;
  // By trigger id, the schedule triggers of the last tick's read.
  #plans = new Map<string, Plan>();

  constructor(options: SchedulerOptions) {
    this.#o = { refreshMs: 30_000, signalGapMs: 1000, now: Date.now, onRunsQueued: () => {}, maxQueuedRuns: Infinity, observer: NO_OBSERVER, ...options };
    this.#skippedWarnings = new LogThrottle(SKIPPED_WARNING_WINDOW_MS, 10_000, () => this.#o.now());
    this.#failures = new FailureStreak(this.#o.log, "scheduler tick", 100, 2000);
  }

  start(): void {
    this.#stopped = false;
    this.#unsubscribe = this.#o.signals?.onChanged((table) => {
      if (table !== "webhook_sources") this.#changed();
    });
    void this.#loop();
  }

  stop(): void {
    this.#stopped = true;
    this.#unsubscribe?.();
    clearTimeout(this.#timer);
  }

  // Fires every slot due at `now`; returns how many fired.
  async tick(now = this.#o.now()): Promise<{ fired: number; next?: number }> {
    let fired = 0;
    let next: number | undefined;
    const plans = new Map<string, Plan>();
    for (const trigger of await this.#o.store.scheduleTriggers()) {
      const plan = this.#plan(trigger);
      plans.set(trigger.id, plan);
      if (plan.next !== undefined && plan.next <= now) {
        // The latest slot due: after downtime, only it fires.
        const due = plan.cron.previousRuns(1, new Date(now + 1))[0]?.getTime();
        if (due !== undefined && due > plan.last) {
          if (await this.#fire(trigger, due, now)) {
            fired++;
            const missed = missedBetween(plan.cron, plan.last, due);
            if (missed) this.#o.observer.scheduleSlots("missed", missed);
          }
          // Fired, skipped at the quota or taken by another replica: the
          // slot is recorded either way.
          plan.last = due;
        }
        plan.next = plan.cron.nextRun(new Date(Math.max(plan.last, now)))?.getTime();
      }
      if (plan.next !== undefined && (next === undefined || plan.next < next)) next = plan.next;
    }
    this.#plans = plans;
    if (fired) this.#o.onRunsQueued();
    return { fired, next };
  }

  // The trigger's plan, its cron parsed again only when its schedule changed
  // and its next slot found again only when its last slot did.
  #plan(trigger: ScheduledTrigger): Plan {
    const last = trigger.lastSlot ?? trigger.createTime;
    let plan = this.#plans.get(trigger.id);
    if (!plan || plan.expression !== trigger.cron || plan.timezone !== trigger.timezone) {
      const cron = new Cron(trigger.cron!, { paused: true, timezone: trigger.timezone ?? undefined });
      plan = { cron, expression: trigger.cron!, timezone: trigger.timezone, last: Number.NaN, next: undefined };
    }
    if (plan.last !== last) {
      plan.last = last;
      plan.next = plan.cron.nextRun(new Date(last))?.getTime();
    }
    return plan;
  }

  async #fire(trigger: TriggerRow, slot: number, now: number): Promise<boolean> {
    const run = queuedRun(
      { tenantId: trigger.tenantId, agentId: trigger.agentId, triggerId: trigger.id, input: { scheduled_time: new Date(slot).toISOString() } },
      now,
    );
    const outcome = await this.#o.store.fireSlot(trigger.id, slot, run, this.#o.maxQueuedRuns);
    if (outcome === "fired")
      this.#o.log.debug({ tenant: trigger.tenantId, run: run.id, agent: trigger.agentId, trigger: trigger.id, via: "schedule", slot: new Date(slot).toISOString() }, "run queued");
    if (outcome === "fired") this.#o.observer.scheduleSlots("fired", 1);
    if (outcome === "over_quota") this.#o.observer.scheduleSlots("skipped", 1);
    // `held`: the trigger's slots skipped since its last line.
    const held = outcome === "over_quota" ? this.#skippedWarnings.admit(trigger.id) : undefined;
    if (held !== undefined)
      this.#o.log.warn(
        { triggerId: trigger.id, tenantId: trigger.tenantId, slot: new Date(slot).toISOString(), maxQueuedRuns: this.#o.maxQueuedRuns, held },
        "schedule slot skipped: the tenant has reached its queued-runs quota (AGENTPLANE_QUOTA_QUEUED_RUNS)",
      );
    return outcome === "fired";
  }

  // A change signalled: a tick now, or once the gap since the last one's
  // start has passed; after the tick under way if one is (what changed
  // may not be in the triggers it read).
  #changed(): void {
    if (this.#stopped) return;
    if (this.#ticking) {
      this.#again = true;
      return;
    }
    const now = this.#o.now();
    const at = this.#lastStart + this.#o.signalGapMs;
    if (now >= at) return void this.#loop();
    if (this.#timerAt <= at) return;
    this.#wake(at - now);
  }

  #wake(wait: number): void {
    clearTimeout(this.#timer);
    this.#timerAt = this.#o.now() + wait;
    this.#timer = setTimeout(() => void this.#loop(), wait);
  }

  async #loop(): Promise<void> {
    if (this.#stopped || this.#ticking) return;
    this.#ticking = true;
    clearTimeout(this.#timer);
    this.#timerAt = Infinity;
    this.#lastStart = this.#o.now();
    let wait = this.#o.refreshMs;
    try {
      const { next } = await this.tick();
      this.#failures.succeeded();
      if (next !== undefined) wait = Math.max(10, Math.min(wait, next - this.#o.now()));
    } catch (err) {
      wait = Math.min(wait, this.#failures.failed(err));
    }
    this.#ticking = false;
    if (this.#again) {
      this.#again = false;
      wait = Math.min(wait, Math.max(0, this.#lastStart + this.#o.signalGapMs - this.#o.now()));
    }
    if (!this.#stopped) this.#wake(wait);
  }
}
