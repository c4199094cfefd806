// GetTenantOverview: the tenant's activity over a recent window, aggregated
// by the store (store/overview.ts) and named here: buckets of a fixed width
// per window, so the answer's size never depends on the load.
import type { MessageInitShape } from "@bufbuild/protobuf";
import { durationFromMs, timestampFromMs } from "@bufbuild/protobuf/wkt";
import { OverviewWindow, type RunCountsSchema } from "../../gen/platform/v1/overview_pb.js";
import { errorKindOfMessage } from "./error-kinds.js";
import type { OverviewCounts } from "../store/overview.js";
import type { RunStatus } from "../store/types.js";
import { tenantOf, type PlatformHandlers, type ServiceDeps } from "./handlers.js";

const MINUTE = 60_000;

// Each window's bucket width and count: at most 168 buckets.
export const WINDOWS: Record<Exclude<OverviewWindow, OverviewWindow.UNSPECIFIED>, { bucketMs: number; buckets: number }> = {
  [OverviewWindow.HOUR]: { bucketMs: MINUTE, buckets: 60 },
  [OverviewWindow.DAY]: { bucketMs: 15 * MINUTE, buckets: 96 },
  [OverviewWindow.WEEK]: { bucketMs: 60 * MINUTE, buckets: 168 },
};

// Agents and triggers listed with the most failures.
const TOP_FAILING = 5;

// The window ending with the bucket that holds `now`: bucket boundaries fall
// on multiples of the width, so a chart polled again moves by whole buckets.
export function overviewQuery(window: OverviewWindow, now: number) {
  const w = window === OverviewWindow.UNSPECIFIED ? OverviewWindow.HOUR : window;
  const { bucketMs, buckets } = WINDOWS[w];
  const end = (Math.floor(now / bucketMs) + 1) * bucketMs;
  return { window: w, start: end - buckets * bucketMs, bucketMs, buckets, top: TOP_FAILING };
}

type Counts = MessageInitShape<typeof RunCountsSchema>;
const runCounts = (at: (s: RunStatus) => number): Counts => ({
  queued: at("queued"),
  running: at("running"),
  succeeded: at("succeeded"),
  failed: at("failed"),
  cancelled: at("cancelled"),
  timedOut: at("timed_out"),
});

// Failed runs by kind as service/error-kinds.ts names them (the metrics'
// `error_kind`): the store groups by leading word, unknown words are `other`.
function failureKinds(words: OverviewCounts["failureWords"]) {
  const kinds = new Map<string, number>();
  for (const w of words) {
    const kind = w.status === "timed_out" ? "agent_timeout" : errorKindOfMessage(w.word);
    kinds.set(kind, (kinds.get(kind) ?? 0) + w.count);
  }
  return [...kinds].map(([kind, count]) => ({ kind, count })).sort((a, b) => b.count - a.count || a.kind.localeCompare(b.kind));
}

export function overviewHandlers({ store, now }: ServiceDeps): Pick<PlatformHandlers, "getTenantOverview"> {
  return {
    async getTenantOverview(req, call) {
      const tenant = tenantOf(call);
      const t = now();
      const q = overviewQuery(req.window, t);
      const counts = await store.overview.tenant(tenant.id, q);
      // Names of the few records listed: at most 2 × TOP_FAILING lookups.
      const agentName = async (id: string) => (await store.agents.get(tenant.id, id))?.name ?? "";
      const total = (s: RunStatus) => counts.runs[s].reduce((a, b) => a + b, 0);
      const failures = total("failed") + total("timed_out");
      const ended = failures + total("succeeded");
      return {
        overview: {
          window: q.window,
          startTime: timestampFromMs(q.start),
          endTime: timestampFromMs(q.start + q.buckets * q.bucketMs),
          bucketWidth: durationFromMs(q.bucketMs),
          buckets: counts.events.map((events, i) => ({
            startTime: timestampFromMs(q.start + i * q.bucketMs),
            events,
            runs: runCounts((s) => counts.runs[s][i]!),
          })),
          events: counts.events.reduce((a, b) => a + b, 0),
          runs: runCounts(total),
          failureRate: ended ? failures / ended : 0,
          durationP50: durationFromMs(counts.durations.p50Ms),
          durationP95: durationFromMs(counts.durations.p95Ms),
          endedRuns: counts.durations.count,
          queuedRuns: counts.queued,
          oldestQueuedAge: counts.oldestQueuedTime === undefined ? undefined : durationFromMs(Math.max(0, t - counts.oldestQueuedTime)),
          failingAgents: await Promise.all(
            counts.failingAgents.map(async (a) => ({ agentId: a.id, agentName: await agentName(a.id), failures: a.failures, runs: a.runs })),
          ),
          failingTriggers: await Promise.all(
            counts.failingTriggers.map(async (r) => {
              const trigger = await store.triggers.get(tenant.id, r.id);
              return {
                triggerId: r.id,
                agentId: trigger?.agentId ?? "",
                agentName: trigger ? await agentName(trigger.agentId) : "",
                failures: r.failures,
                runs: r.runs,
              };
            }),
          ),
          failureKinds: failureKinds(counts.failureWords),
          computeTime: timestampFromMs(t),
        },
      };
    },
  };
}
