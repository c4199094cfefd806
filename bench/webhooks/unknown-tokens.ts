// A legitimate webhook's latency beside a flood of unauthenticated posts
// (issue 19, item 8): on PostgreSQL, while a stranger posts to
// /webhooks/events with a token no source has, at a fixed rate. Three
// phases: the quiet sender alone; beside a flood of one unknown token (the
// same key again and again: remembered as unknown, one store query); beside
// a flood of a new made-up token each time (one indexed query each).
//
// One agentplane server (buildApp on a fresh PostgreSQL database, no
// runtime); the quiet tenant has one source and one matching trigger, and
// every event carries a distinct Idempotency-Key. It reports; it fails only
// on a server error.
import { randomBytes } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import autocannon, { type Result } from "autocannon";
import { AgentSchema } from "../../gen/platform/v1/agent_pb.js";
import {
  CreateAgentRequestSchema,
  CreateTenantRequestSchema,
  CreateTriggerRequestSchema,
  CreateWebhookSourceRequestSchema,
} from "../../gen/platform/v1/platform_service_pb.js";
import { buildApp } from "../../src/app.js";
import type { Authenticator, Principal } from "../../src/integrations/identity/index.js";
import { SecretBox } from "../../src/lib/secret-box.js";
import { createLogger } from "../../src/log.js";
import { createPostgresStore } from "../../src/store/postgres/store.js";
import { positiveInt } from "../lib/env.js";
import { freshDatabase } from "../lib/postgres.js";
import { describeHost, runBench } from "../lib/run.js";
import { printTable } from "../lib/table.js";

const QUIET_RATE = 50;
const body = JSON.stringify({ event_type: "order.created", payload: { order_id: "ord_1", total: 168.87 } });

const quiet = (url: string, token: string, seconds: number) =>
  autocannon({
    url: `${url}/webhooks/events`,
    method: "POST",
    headers: { "content-type": "application/json", "x-webhook-token": token, "idempotency-key": "quiet-[<id>]" },
    body,
    idReplacement: true,
    connections: 4,
    overallRate: QUIET_RATE,
    duration: seconds,
    workers: 1,
  });

// `token` may hold `[<id>]`: a new 27-character id in each request.
const flood = (url: string, token: string, rate: number, seconds: number) =>
  autocannon({
    url: `${url}/webhooks/events`,
    method: "POST",
    headers: { "content-type": "application/json", "x-webhook-token": token },
    body,
    idReplacement: true,
    connections: 32,
    overallRate: rate,
    duration: seconds,
    workers: 1,
  });

runBench(async () => {
  const seconds = positiveInt("BENCH_SECONDS", 15);
  const rate = positiveInt("BENCH_FLOOD_RATE", 2000);
  const database = await freshDatabase();
  const store = await createPostgresStore({ url: database.url, poolSize: 10 });
  // Source lookups by token digest that reached the store.
  let queries = 0;
  const find = store.webhooks.findSourceByTokenDigest.bind(store.webhooks);
  store.webhooks.findSourceByTokenDigest = (digest, now) => (queries++, find(digest, now));
  const fixed: Principal = { subject: "bench-admin", scopes: new Set(), claims: {} };
  const authenticator: Authenticator = { authenticate: () => Promise.resolve(fixed) };
  const app = await buildApp({
    store,
    secrets: new SecretBox(randomBytes(32)),
    authenticator,
    logger: createLogger("silent"),
    accessLog: false,
    webhook: { maxBytes: 1024 * 1024, ratePerSecond: 1000, burst: 1000 },
  });
  try {
    await app.server.listen({ host: "127.0.0.1", port: 0 });
    const address = app.server.server.address();
    if (!address || typeof address === "string") throw new Error("server has no TCP address");
    const url = `http://127.0.0.1:${address.port}`;
    const op = app.platform;
    await op.invokeAsOperator("createTenant", create(CreateTenantRequestSchema, { tenant: { slug: "quiet", displayName: "quiet" } }));
    const { agent } = await op.invokeAsOperator(
      "createAgent",
      create(CreateAgentRequestSchema, { agent: create(AgentSchema, { name: "a", model: { baseUrl: "http://192.0.2.1/v1", model: "placeholder" } }) }),
      "quiet",
    );
    const { token } = await op.invokeAsOperator("createWebhookSource", create(CreateWebhookSourceRequestSchema, { webhookSource: { name: "shop" } }), "quiet");
    await op.invokeAsOperator(
      "createTrigger",
      create(CreateTriggerRequestSchema, { trigger: { agentId: agent!.id, kind: { case: "webhook", value: { eventTypePattern: "order.*" } } } }),
      "quiet",
    );

    console.log(describeHost());
    console.log(`quiet: ${QUIET_RATE} events/s on 4 connections; flood: ${rate} posts/s on 32 connections; ${seconds} s per phase; PostgreSQL\n`);
    const alone = await quiet(url, token!, seconds);
    const phase = async (floodToken: string) => {
      const before = queries;
      const [q, f] = await Promise.all([quiet(url, token!, seconds), flood(url, floodToken, rate, seconds)]);
      if (f.statusCodeStats["500"] || q.statusCodeStats["500"]) throw new Error("the server answered 500");
      return [q, f, queries - before] as const;
    };
    const [sameQuiet, same, sameQueries] = await phase(`whk_${randomBytes(32).toString("base64url")}`);
    const [newQuiet, fresh, newQueries] = await phase("whk_made_up_[<id>]");

    const fmt = (n: number) => n.toFixed(0);
    const row = (name: string, q: Result, f?: Result, n?: number) => [
      name,
      fmt(q.latency.p50),
      fmt(q.latency.p99),
      fmt(q.latency.max),
      String(q.non2xx),
      f ? String(f.requests.total) : "",
      n === undefined ? "" : String(n),
    ];
    printTable(
      ["phase", "quiet p50 ms", "quiet p99 ms", "quiet max ms", "quiet non-2xx", "flood posts", "store lookups"],
      [row("alone", alone), row("beside one unknown token", sameQuiet, same, sameQueries), row("beside a new token each post", newQuiet, fresh, newQueries)],
    );
  } finally {
    await app.stop(1000);
    await store.close();
    await database.drop();
  }
});
