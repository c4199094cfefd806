// Management API capacity: what real JWT verification costs on a read.
//
// Two real agentplane servers run side by side in this process, identical
// except for the authenticator: "jwt" verifies RS256 access tokens through the
// production code path (createJwtAuthenticator over a local JWKS), "auth
// disabled" resolves a fixed principal without looking at the token. Each
// one's capacity on ListAgents (a 20-agent page) is the highest rate an
// open-loop paced generator, in a process of its own, offers it with every
// request answered 200 within the p99 objective (../lib/capacity.ts), and the
// ratio is reported against the target "authenticated >= 80% of
// unauthenticated". It reports; it does not fail on a missed target nor on a
// failed step, only on a failed preflight or warm-up or a dead generator.
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { SignJWT, createLocalJWKSet, exportJWK, generateKeyPair } from "jose";
import { AgentSchema } from "../../gen/platform/v1/agent_pb.js";
import { Role } from "../../gen/platform/v1/common_pb.js";
import {
  AddMemberRequestSchema,
  CreateAgentRequestSchema,
  CreateTenantRequestSchema,
} from "../../gen/platform/v1/platform_service_pb.js";
import { buildApp, type App } from "../../src/app.js";
import type { Authenticator, Principal } from "../../src/integrations/identity/index.js";
import { createJwtAuthenticator } from "../../src/integrations/identity/jwt.js";
import { SecretBox } from "../../src/lib/secret-box.js";
import { createLogger } from "../../src/log.js";
import { createSqliteStore } from "../../src/store/sqlite/store.js";
import type { Store } from "../../src/store/store.js";
import {
  capacitySettingsFromEnv,
  compareCapacities,
  describeCapacity,
  printCapacityTable,
  ratioOf,
  type CapacitySummary,
  type CapacityTarget,
} from "../lib/capacity.js";
import { describeHost, removeScratchDir, runBench, scratchDir } from "../lib/run.js";

const ISSUER = "https://bench.agentplane.invalid";
const AUDIENCE = "agentplane-bench";
const SUBJECT = "bench-admin";
const SCOPES = ["platform:read", "platform:write"];
const TENANT = "bench";
const AGENT_COUNT = 20;
const METHOD_PATH = "/platform.v1.PlatformService/ListAgents";
const WARMUP_SECONDS = 3;
// Paced, not judged on latency: low enough that no server ends it with a
// backlog the first search would inherit.
const WARMUP_RATE = 500;
const TARGET_RATIO = 0.8;

interface BenchServer {
  name: string;
  url: string;
  app: App;
  close(): Promise<void>;
}

// Starts agentplane the way production does (every surface, SQLite store with
// its default synchronous=FULL, silent logger) on a loopback port.
async function startServer(name: string, authenticator: Authenticator): Promise<BenchServer> {
  const dir = scratchDir("agentplane-bench-");
  let store: Store | undefined;
  let app: App | undefined;
  try {
    store = createSqliteStore({ path: join(dir, "agentplane.db") });
    app = await buildApp({
      store,
      secrets: new SecretBox(randomBytes(32)),
      authenticator,
      logger: createLogger("silent"),
    });
    await app.server.listen({ host: "127.0.0.1", port: 0 });
    const address = app.server.server.address();
    if (!address || typeof address === "string") throw new Error(`${name}: server has no TCP address`);
    await seed(app);
    const opened = { app, store };
    return {
      name,
      url: `http://127.0.0.1:${address.port}`,
      app,
      async close() {
        await opened.app.server.close();
        await opened.store.close();
        removeScratchDir(dir);
      },
    };
  } catch (err) {
    await app?.server.close().catch(() => undefined);
    await store?.close().catch(() => undefined);
    removeScratchDir(dir);
    throw err;
  }
}

// Tenant "bench" with bench-admin as admin, and a page of agents, created
// through the service with operator authority.
async function seed(app: App): Promise<void> {
  const op = app.platform;
  await op.invokeAsOperator(
    "createTenant",
    create(CreateTenantRequestSchema, { tenant: { slug: TENANT, displayName: "Benchmark tenant" } }),
  );
  await op.invokeAsOperator(
    "addMember",
    create(AddMemberRequestSchema, { member: { tenant: TENANT, subject: SUBJECT, role: Role.ADMIN } }),
    TENANT,
  );
  for (let i = 1; i <= AGENT_COUNT; i++) {
    const n = String(i).padStart(2, "0");
    const agent = create(AgentSchema, {
      name: `triage-agent-${n}`,
      description: `Triages incoming events for queue ${n} and routes them to the owning team.`,
      instructions:
        "You are a triage assistant. Read the event, classify its severity (low, medium, high), " +
        "summarise it in two sentences and name the team that owns the affected component.",
      model: { baseUrl: "https://models.example.com/v1", model: "gpt-4o-mini", apiKey: i % 2 === 0 ? `sk-bench-${n}` : "" },
      maxSteps: 8,
    });
    await op.invokeAsOperator("createAgent", create(CreateAgentRequestSchema, { agent }), TENANT);
  }
}

function headersFor(token: string): Record<string, string> {
  return { "content-type": "application/json", authorization: `Bearer ${token}`, "x-platform-tenant": TENANT };
}

// One request through fetch before any load: the page is what we think it
// is, and the "jwt" server really rejects a token it cannot verify.
async function preflight(server: BenchServer, token: string, expectVerification: boolean): Promise<void> {
  const res = await fetch(server.url + METHOD_PATH, { method: "POST", headers: headersFor(token), body: "{}" });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${server.name}: ListAgents answered ${res.status}: ${text}`);
  const body = JSON.parse(text) as { agents?: unknown[] };
  if (body.agents?.length !== AGENT_COUNT)
    throw new Error(`${server.name}: ListAgents returned ${body.agents?.length ?? 0} agents, expected ${AGENT_COUNT}`);

  const forged = await fetch(server.url + METHOD_PATH, { method: "POST", headers: headersFor("not-a-jwt"), body: "{}" });
  await forged.arrayBuffer();
  if (expectVerification && forged.status !== 401)
    throw new Error(`${server.name}: an unverifiable token got ${forged.status}, expected 401`);
  if (!expectVerification && forged.status !== 200)
    throw new Error(`${server.name}: auth-disabled server answered ${forged.status} to an arbitrary token`);
}

function capacityTarget(server: BenchServer, token: string): CapacityTarget {
  return { name: server.name, paced: { url: server.url + METHOD_PATH, headers: headersFor(token), body: "{}" } };
}


async function main(): Promise<void> {
  // ListAgents answers 200; the settings' default status is the webhooks' 202.
  const settings = { ...capacitySettingsFromEnv(), status: "200" };

  // Identity: an RS256 key pair, verification through the production JWT
  // authenticator over a local key set, and one access token for bench-admin.
  const { publicKey, privateKey } = await generateKeyPair("RS256");
  const publicJwk = { ...(await exportJWK(publicKey)), kid: "bench-1", alg: "RS256", use: "sig" };
  const jwtAuthenticator = createJwtAuthenticator({
    issuer: ISSUER,
    audience: AUDIENCE,
    algorithms: ["RS256"],
    clockToleranceSeconds: 60,
    keySet: createLocalJWKSet({ keys: [publicJwk] }),
  });
  const token = await new SignJWT({ scope: SCOPES.join(" ") })
    .setProtectedHeader({ alg: "RS256", kid: "bench-1", typ: "at+jwt" })
    .setIssuer(ISSUER)
    .setAudience(AUDIENCE)
    .setSubject(SUBJECT)
    .setIssuedAt()
    .setExpirationTime("1h")
    .sign(privateKey);

  // Same routes and service code; no token verification at all.
  const fixedPrincipal: Principal = { subject: SUBJECT, scopes: new Set(SCOPES), claims: {} };
  const disabledAuthenticator: Authenticator = { authenticate: () => Promise.resolve(fixedPrincipal) };

  const servers: BenchServer[] = [];
  try {
    const disabled = await startServer("auth disabled", disabledAuthenticator);
    servers.push(disabled);
    const jwt = await startServer("jwt", jwtAuthenticator);
    servers.push(jwt);
    await preflight(disabled, token, false);
    await preflight(jwt, token, true);

    console.log(
      `agentplane management bench: POST ${METHOD_PATH} (${AGENT_COUNT} agents/page)\n` +
        `${describeHost()}\n${describeCapacity(settings)}\n` +
        `${WARMUP_SECONDS} s warm-up at ${WARMUP_RATE}/s per server, then searches in the order disabled, jwt, jwt, disabled\n`,
    );
    const [d, j] = (await compareCapacities(
      [capacityTarget(disabled, token), capacityTarget(jwt, token)],
      settings,
      { rate: WARMUP_RATE, seconds: WARMUP_SECONDS },
    )) as [CapacitySummary, CapacitySummary];
    console.log("");
    printCapacityTable([d, j], "server", "req/s");
    const ratio = ratioOf(j, d);
    const verdict = ratio >= TARGET_RATIO ? "met" : "NOT met";
    console.log(
      `\njwt / disabled: ${(ratio * 100).toFixed(1)} % of req/s sustained ` +
        `(target: authenticated >= ${TARGET_RATIO * 100}% of unauthenticated: ${verdict}); ` +
        `p50 ${d.p50.toFixed(1)} -> ${j.p50.toFixed(1)} ms, p99 ${d.p99.toFixed(1)} -> ${j.p99.toFixed(1)} ms`,
    );
  } finally {
    for (const server of servers.reverse()) await server.close();
  }
}

runBench(main);
