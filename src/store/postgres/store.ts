import { StoreUnavailableError } from "../errors.js";
import type * as rows from "../rows.js";
import { SignalHub } from "../signal-hub.js";
import { signalled } from "../signalled.js";
import type { EventQuery, Store } from "../store.js";
import { within } from "./deadline.js";
import { pg, toStoreError } from "./errors.js";
import type { GroupCommitOptions } from "../group-commit.js";
import { ChangeNotifier } from "./change-notifier.js";
import { createPgWebhookStore } from "./ingest.js";
import { createPgMemberChange, createPgMemberships } from "./members.js";
import { migratePostgres, openPostgres, openQueuePool } from "./open.js";
import { createPgRunQueue } from "./queue.js";
import { createPgRateLimits } from "./rate-limits.js";
import { createRunRepo, tenantRepo, tenantStore } from "./repos.js";
import { createPgRetention } from "./retention.js";
import { createPgOverview } from "./overview.js";
import { queuedCount, queueStats, runIdsForEvent, runIdsForEvents } from "./runs.js";
import { createPgScheduleStore } from "./schedules.js";
import * as schema from "./schema.js";
import { listenSignals } from "./signals.js";

export interface PostgresStoreOptions {
  // postgres://user:password@host:port/database
  url: string;
  // Connections of this process's pool; LISTEN takes one more.
  poolSize?: number;
  migrate?: boolean;
  groupCommit?: GroupCommitOptions;
  // How long ping waits for an answer before calling the database unreachable.
  pingTimeoutMs?: number;
  // How long a webhook's or a read's query may wait (for a connection, then
  // for its answer) before it is cancelled and the call answers unavailable.
  hotPathTimeoutMs?: number;
}

export async function createPostgresStore(options: PostgresStoreOptions): Promise<Store> {
  const opened = openPostgres({ url: options.url, poolSize: options.poolSize });
  const { sql, db } = opened;
  const signals = new SignalHub();
  try {
    if (options.migrate !== false) await migratePostgres(opened);
    await listenSignals(sql, signals);
  } catch (err) {
    await sql.end({ timeout: 0 });
    // Classified: a database that is down is "unavailable", as on any call.
    throw toStoreError(err);
  }
  const timeoutMs = options.hotPathTimeoutMs ?? 5000;
  const changes = new ChangeNotifier(sql, signals);
  const queuePool = openQueuePool(options.url);
  const { members, agents, skills, triggers, webhookSources, events } = schema;
  const memberRepo = tenantRepo<typeof members, rows.MemberRow, rows.MemberInsert>(sql, db, members, timeoutMs);
  const memberBySubject = `${memberRepo.reader.select}
    where ${memberRepo.reader.col(members.tenantId)} = $1 and ${memberRepo.reader.col(members.subject)} = $2`;
  const runRepo = createRunRepo(sql, db, timeoutMs);
  const pingTimeoutMs = options.pingTimeoutMs ?? 2000;

  return signalled({
    tenants: tenantStore(sql, db, timeoutMs),
    members: {
      ...memberRepo.repo,
      findBySubject: (tenantId, subject) =>
        pg(async () => (await within(sql.unsafe<rows.MemberRow[]>(memberBySubject, [tenantId, subject], { prepare: true }), timeoutMs))[0]),
      change: createPgMemberChange(db),
      memberships: createPgMemberships(sql, timeoutMs),
    },
    agents: tenantRepo<typeof agents, rows.AgentRow, rows.AgentInsert>(sql, db, agents, timeoutMs).repo,
    skills: tenantRepo<typeof skills, rows.SkillRow, rows.SkillInsert>(sql, db, skills, timeoutMs).repo,
    triggers: tenantRepo<typeof triggers, rows.TriggerRow, rows.TriggerInsert>(sql, db, triggers, timeoutMs).repo,
    webhookSources: tenantRepo<typeof webhookSources, rows.WebhookSourceRow, rows.WebhookSourceInsert>(sql, db, webhookSources, timeoutMs).repo,
    events: tenantRepo<typeof events, rows.EventRow, rows.EventInsert>(sql, db, events, timeoutMs, [
      { key: "receivedAfter" satisfies keyof EventQuery, column: events.receiveTime, op: ">=" },
      { key: "receivedBefore" satisfies keyof EventQuery, column: events.receiveTime, op: "<" },
    ]).repo,
    runs: {
      ...runRepo.repo,
      idsForEvent: (tenantId, eventId) => pg(() => runIdsForEvent(sql, tenantId, eventId)),
      idsForEvents: (tenantId, eventIds) => pg(() => runIdsForEvents(sql, tenantId, eventIds)),
      queuedCount: (tenantId) => pg(() => queuedCount(sql, tenantId)),
      queueStats: () => pg(() => queueStats(sql)),
    },
    webhooks: createPgWebhookStore(sql, options.groupCommit ?? { windowMs: 0, maxBatch: 256 }, timeoutMs),
    queue: createPgRunQueue(queuePool.sql),
    schedules: createPgScheduleStore(sql),
    signals,
    rateLimits: createPgRateLimits(sql),
    retention: createPgRetention(sql),
    overview: createPgOverview(sql, timeoutMs),
    // Any failure, or no answer in time (a host that drops packets leaves a
    // connection attempt hanging), is "unreachable".
    async ping() {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${pingTimeoutMs} ms`)), pingTimeoutMs);
      });
      try {
        await Promise.race([sql`select 1`.execute(), late]);
      } catch (err) {
        throw new StoreUnavailableError(`database unreachable: ${(err as Error).message}`);
      } finally {
        clearTimeout(timer);
      }
    },
    close: async () => {
      await changes.flush();
      await Promise.all([sql.end({ timeout: 5 }), queuePool.sql.end({ timeout: 5 })]);
    },
  }, changes);
}
