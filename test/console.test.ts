// The operator console in a real browser (Debian's Chromium through
// playwright-core) against the real server in `jwt` mode, logging in with
// authorization code + PKCE at a real oidc-provider, running agents on a real
// MCP SDK server. Screenshots go to test-output/console/.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { sign as githubSign } from "@octokit/webhooks-methods";
import type { Browser, Page } from "playwright-core";
import { OverviewWindow } from "../gen/platform/v1/overview_pb.js";
import { loadConfig } from "../src/config.js";
import { overviewQuery } from "../src/service/overview.js";
import { createAuthenticator } from "../src/integrations/identity/index.js";
import { firstLoadJsGzipBytes, launchBrowser, newUser, screenshot, SCREENSHOTS } from "./support/browser.js";
import { startHeadersMcp, startOpenMcp, type CustomerMcp } from "./support/customer-mcp.js";
import { freeLoopbackPort } from "./support/listen.js";
import { PATIENCE_MS, waitFor } from "./support/wait.js";
import { startIdp, type TestIdp } from "./support/oidc-idp.js";
import { startServer, type TestServer } from "./support/server.js";

const AUD = "https://api.agentplane.test";
const CLIENT_ID = "agentplane-console";
const SCOPES = "openid platform:read platform:write";

let idp: TestIdp;
let server: TestServer;
let mcp: CustomerMcp;
let browser: Browser;
let admin: Page;
const measured: Record<string, number> = {};
// The webhook token the admin copied from the console.
let webhookToken = "";

beforeAll(async () => {
  // The IdP must know the console's redirect URI before the server starts.
  const port = await freeLoopbackPort();
  idp = await startIdp({
    clients: [],
    publicClients: [{ clientId: CLIENT_ID, redirectUris: [`http://127.0.0.1:${port}/console/callback`], scope: SCOPES }],
    scopes: SCOPES.split(" "),
    audience: AUD,
    accessTokenFormat: "jwt",
  });
  mcp = await startOpenMcp();
  server = await startServer({
    port,
    authenticator: createAuthenticator({ mode: "jwt", issuer: idp.issuer, audience: AUD, algorithms: ["RS256"], clockToleranceSeconds: 60 }),
    runtime: { executor: "agents" },
    outboundAllow: ["127.0.0.0/8"],
    console: { issuer: idp.issuer, clientId: CLIENT_ID, audience: AUD, scopes: SCOPES },
  });
  await server.seedTenant("acme", [
    { subject: "alice", role: "admin" },
    { subject: "victor", role: "viewer" },
  ]);
  await server.seedTenant("beta", [{ subject: "alice", role: "viewer" }]);
  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  // Everything started is stopped first: a setup that failed (no Chromium)
  // must not leave the server's sandbox processes keeping jest alive.
  await browser?.close();
  await server?.close();
  await mcp?.close();
  await idp?.stop();
  if (browser) writeFileSync(join(SCREENSHOTS, "measurements.json"), JSON.stringify(measured, null, 2));
});

// Opens the server's root as a user would and signs in at oidc-provider's
// development login and consent pages; answers once the console shows a tenant.
async function login(page: Page, user: string): Promise<void> {
  await page.goto(`${server.url}/`);
  await page.waitForURL(`${idp.issuer}/**`);
  await page.locator('input[name="login"]').fill(user);
  await page.locator('input[name="password"]').fill("anything");
  await page.getByRole("button", { name: "Sign-in" }).click();
  await page.getByRole("button", { name: "Continue" }).click();
  await page.waitForURL(/\/console\/t\/[^/]+\/overview/);
}

async function openTenant(page: Page, slug: string): Promise<void> {
  const switcher = page.getByLabel("Tenant");
  if ((await switcher.count()) && (await switcher.inputValue()) !== slug) await switcher.selectOption(slug);
  await page.waitForURL(new RegExp(`/console/t/${slug}/`));
}

async function section(page: Page, name: string): Promise<void> {
  await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name, exact: true }).click();
  await page.getByRole("heading", { level: 1, name }).waitFor();
}

describe("console in Chromium, jwt mode, login at oidc-provider", () => {
  test("an admin logs in with PKCE, creates a source, a skill, an agent and a trigger, sends a test event and watches the run succeed", async () => {
    ({ page: admin } = await newUser(browser));
    const errors: string[] = [];
    admin.on("pageerror", (err) => errors.push(err.message));
    await login(admin, "alice");
    // Tokens stay in memory: nothing of the login is left in web storage.
    expect(await admin.evaluate("JSON.stringify([Object.keys(localStorage), Object.keys(sessionStorage)])")).toBe("[[],[]]");
    await openTenant(admin, "acme");

    // A webhook source: its token is shown once.
    await section(admin, "Webhook sources");
    await admin.getByRole("link", { name: "New source" }).click();
    await admin.getByLabel("Name", { exact: true }).fill("shop");
    await admin.getByRole("button", { name: "Create source" }).click();
    const token = admin.getByTestId("webhook-token");
    await expect(token.textContent()).resolves.toMatch(/^whk_/);
    webhookToken = (await token.textContent())!;
    await screenshot(admin, "source-created-token-once");
    await section(admin, "Webhook sources");
    await admin.getByRole("link", { name: "shop" }).click();
    await admin.getByRole("heading", { name: "Webhook source shop" }).waitFor();
    expect(await admin.getByTestId("webhook-token").count()).toBe(0);

    // A skill on the customer's MCP server: its tools are listed.
    await section(admin, "Skills");
    await admin.getByRole("link", { name: "New skill" }).click();
    await admin.getByLabel("Name", { exact: true }).fill("crm");
    await admin.getByLabel("MCP URL").fill(mcp.url);
    await admin.getByRole("button", { name: "Create skill" }).click();
    await admin.getByRole("heading", { name: "Skill crm" }).waitFor();
    await admin.getByText("echo", { exact: true }).waitFor();

    // An agent with one step; the API's own message shows beside the field.
    await section(admin, "Agents");
    await admin.getByRole("link", { name: "New agent" }).click();
    await admin.getByLabel("crm").check();
    await admin.getByRole("button", { name: "Add step" }).click();
    await admin.getByLabel("Tool", { exact: true }).fill("echo");
    await admin.getByLabel("Arguments (JSONata)").fill('{"text": event.payload.name}');
    await admin.getByRole("button", { name: "Create agent" }).click();
    const invalid = admin.locator(".field.invalid");
    await invalid.getByText("is required").waitFor();
    expect(await invalid.locator("label").textContent()).toBe("Name");
    await screenshot(admin, "agent-validation-message");
    await admin.getByLabel("Name", { exact: true }).fill("greeter");
    await admin.getByRole("button", { name: "Create agent" }).click();
    await admin.getByRole("heading", { name: "Agent greeter" }).waitFor();

    // A trigger on the source's order.created events.
    await section(admin, "Triggers");
    await admin.getByRole("link", { name: "New trigger" }).click();
    await admin.getByLabel("Agent").selectOption({ label: "greeter" });
    await admin.getByLabel("Source").selectOption({ label: "shop" });
    await admin.getByLabel("Event type pattern").fill("order.created");
    await admin.getByRole("button", { name: "Create trigger" }).click();
    await admin.getByText("webhook order.created from shop").waitFor();

    // A test event from the console starts a run.
    await section(admin, "Webhook sources");
    await admin.getByRole("link", { name: "shop" }).click();
    await admin.getByLabel("Event type").fill("order.created");
    await admin.getByLabel("Payload (JSON object)").fill('{"name": "Ada"}');
    await admin.getByRole("button", { name: "Send test event" }).click();
    await admin.getByText("it matched 1 trigger.").waitFor();

    // The runs list shows it succeed without a reload.
    await section(admin, "Runs");
    await admin.locator("table.runs .status-succeeded").first().waitFor();
    await admin.locator("table.runs tbody tr").first().getByRole("link").first().click();
    await admin.locator(".run-status .status-succeeded").waitFor();
    const step = admin.locator(".timeline .step").first();
    await step.locator(".status-succeeded").waitFor();
    await expect(step.getByLabel("Result of step 1").textContent()).resolves.toContain("Ada");
    await screenshot(admin, "run-succeeded-timeline");
    expect(mcp.toolCalls()).toContainEqual({ name: "echo", arguments: { text: "Ada" } });
    expect(errors).toEqual([]);
  }, 90_000);

  test("a webhook's run appears as succeeded in the open runs list, timed from the 202", async () => {
    await section(admin, "Runs");
    await admin.locator("[data-liveness]").waitFor();
    const res = await fetch(`${server.url}/webhooks/events`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-webhook-token": webhookToken },
      body: JSON.stringify({ event_type: "order.created", payload: { name: "Grace" } }),
    });
    const accepted = performance.now();
    expect(res.status).toBe(202);
    const { event_id } = (await res.json()) as { event_id: string };
    await admin.locator(`table.runs tr:has(a[href$="/events/${event_id}"]) .status-succeeded`).waitFor({ timeout: PATIENCE_MS });
    const ms = Math.round(performance.now() - accepted);
    measured.webhookAcceptedToSucceededInConsoleMs = ms;
    measured.runsListLiveness = (await admin.locator("[data-liveness]").getAttribute("data-liveness")) === "live" ? 1 : 0;
    console.log(`webhook 202 → run "succeeded" in the console: ${ms} ms (${measured.runsListLiveness ? "WatchRuns stream" : "polling fallback"})`);
    // It arrived over the WatchRuns stream, not the polling fallback.
    expect(measured.runsListLiveness).toBe(1);
    await screenshot(admin, "runs-live");
  }, 60_000);

  test("an admin cancels a slow run from its live page", async () => {
    await section(admin, "Agents");
    await admin.getByRole("link", { name: "New agent" }).click();
    await admin.getByLabel("Name", { exact: true }).fill("sleeper");
    await admin.getByLabel("crm").check();
    await admin.getByRole("button", { name: "Add step" }).click();
    await admin.getByLabel("Tool", { exact: true }).fill("slow");
    await admin.getByLabel("Arguments (JSONata)").fill('{"ms": 60000}');
    await admin.getByRole("button", { name: "Create agent" }).click();
    await admin.getByRole("heading", { name: "Agent sleeper" }).waitFor();
    await admin.getByLabel("Input (JSON)").fill('{"why": "by hand"}');
    await admin.getByRole("button", { name: "Run agent" }).click();
    await admin.waitForURL(/\/runs\/run_/);
    await admin.locator(".run-status .status-running").waitFor();
    // The step in flight shows as it starts, with its arguments.
    const step = admin.locator(".timeline .step").first();
    await step.locator(".status-running").waitFor();
    await expect(step.getByLabel("Arguments of step 1").textContent()).resolves.toContain("60000");
    await screenshot(admin, "run-running");
    await admin.getByRole("button", { name: "Cancel run" }).click();
    await admin.locator(".run-status .status-cancelled").waitFor();
    await step.locator(".status-running").waitFor({ state: "detached" });
    // The step the cancel interrupted says so: it was stopped, it did not fail.
    await step.locator(".lane-label .status-cancelled").waitFor();
    expect(await admin.locator(".timeline .status-failed").count()).toBe(0);
    await step.getByText("cancelled: the run was cancelled while the step ran").waitFor();
    expect(await admin.getByRole("button", { name: "Cancel run" }).count()).toBe(0);
    await screenshot(admin, "run-cancelled");
  }, 60_000);

  test("an admin creates a skill with headers, edits it keeping the write-only values, and saves an OAuth skill's key pair", async () => {
    const keyed = await startHeadersMcp({ "X-API-Key": "console-key-4b1d", Authorization: "Basic Y29uc29sZTpwdw==" });
    try {
      await section(admin, "Skills");
      await admin.getByRole("link", { name: "New skill" }).click();
      await admin.getByLabel("Name", { exact: true }).fill("keyed");
      await admin.getByLabel("MCP URL").fill(keyed.url);
      await admin.getByLabel("Headers", { exact: true }).check();
      await admin.getByLabel("Header 1 name").fill("X-API-Key");
      await admin.getByLabel("Header 1 value").fill("console-key-4b1d");
      await admin.getByRole("button", { name: "Add header" }).click();
      await admin.getByLabel("Header 2 name").fill("Authorization");
      await admin.getByLabel("Header 2 value").fill("Basic Y29uc29sZTpwdw==");
      await admin.getByRole("button", { name: "Create skill" }).click();
      await admin.getByRole("heading", { name: "Skill keyed" }).waitFor();
      await admin.getByText("echo", { exact: true }).waitFor();
      await admin.getByText("headers X-API-Key, Authorization").waitFor();

      // Editing: the values are not shown, only that they are set; left empty they are kept.
      await admin.getByRole("link", { name: "Edit" }).click();
      const value1 = admin.getByLabel("Header 1 value");
      await expect(value1.inputValue()).resolves.toBe("");
      expect(await value1.getAttribute("placeholder")).toBe("set");
      expect(await admin.getByText("set; leave empty to keep it").count()).toBe(2);
      // A name the transport owns: the API's message shows at that row.
      await admin.getByRole("button", { name: "Add header" }).click();
      await admin.getByLabel("Header 3 name").fill("Host");
      await admin.getByLabel("Header 3 value").fill("internal.example");
      await admin.getByRole("button", { name: "Save skill" }).click();
      const invalid = admin.locator(".field.invalid");
      await invalid.getByText("is set by the transport and cannot be configured", { exact: false }).waitFor();
      expect(await invalid.locator("label").textContent()).toBe("Header 3 name");
      await screenshot(admin, "skill-headers-validation");
      await admin.getByRole("button", { name: "Remove header 3" }).click();
      await admin.getByRole("button", { name: "Save skill" }).click();
      await admin.getByRole("heading", { name: "Skill keyed" }).waitFor();
      const before = keyed.requestLog().length;
      await admin.getByRole("button", { name: "Refresh tools" }).click();
      await waitFor("the refresh to reach the server", 10_000, async () => (keyed.requestLog().length > before ? true : undefined), 20);
      await admin.getByText("The last refresh failed").waitFor({ state: "detached" });
      const last = keyed.requestLog().at(-1)!;
      expect([last.headers["x-api-key"], last.headers.authorization]).toEqual(["console-key-4b1d", "Basic Y29uc29sZTpwdw=="]);

      // OAuth with a generated key pair: its public JWK shows after save, with a copy button.
      await section(admin, "Skills");
      await admin.getByRole("link", { name: "New skill" }).click();
      await admin.getByLabel("Name", { exact: true }).fill("signed");
      await admin.getByLabel("MCP URL").fill(mcp.url);
      await admin.getByLabel("OAuth client credentials").check();
      await admin.getByLabel("Issuer").fill("https://auth.example.test/");
      await admin.getByLabel("Client ID").fill("agentplane");
      await admin.getByLabel("Token endpoint authentication").selectOption({ label: "private_key_jwt" });
      await admin.getByLabel("Key pair for private_key_jwt").selectOption("ES256");
      await admin.getByRole("button", { name: "Create skill" }).click();
      await admin.getByRole("heading", { name: "Skill signed" }).waitFor();
      const jwk = JSON.parse((await admin.getByLabel("Public JWK").textContent())!) as Record<string, unknown>;
      expect(jwk).toMatchObject({ kty: "EC", crv: "P-256", alg: "ES256", use: "sig" });
      expect(jwk.d).toBeUndefined();
      await admin.context().grantPermissions(["clipboard-read", "clipboard-write"], { origin: server.url });
      await admin.getByRole("button", { name: "Copy public JWK" }).click();
      await admin.getByText("copied", { exact: true }).waitFor();
      expect(JSON.parse(await admin.evaluate<string>("navigator.clipboard.readText()"))).toEqual(jwk);
      await screenshot(admin, "skill-public-jwk");
      // Its edit form keeps the pair unless another algorithm is chosen.
      await admin.getByRole("link", { name: "Edit" }).click();
      await expect(admin.getByLabel("Key pair for private_key_jwt").inputValue()).resolves.toBe("ES256");
      await admin.getByRole("button", { name: "Save skill" }).click();
      await admin.getByRole("heading", { name: "Skill signed" }).waitFor();
      expect(JSON.parse((await admin.getByLabel("Public JWK").textContent())!)).toEqual(jwk);
    } finally {
      await keyed.close();
    }
  }, 60_000);

  test("an admin creates a GitHub source: its URL and generated secret shown once, a mapping's error beside its field; the secret verifies and rotates", async () => {
    await section(admin, "Webhook sources");
    await admin.getByRole("link", { name: "New source" }).click();
    await admin.getByLabel("Name", { exact: true }).fill("github");
    await admin.getByLabel("Kind").selectOption({ label: "GitHub" });
    const mapping = admin.getByLabel("Mapping (JSONata, optional)");
    await mapping.fill('{"event_type": ');
    await admin.getByRole("button", { name: "Create source" }).click();
    const invalid = admin.locator(".field.invalid");
    await invalid.getByText(/^invalid JSONata/).waitFor();
    expect(await invalid.locator("label").textContent()).toBe("Mapping (JSONata, optional)");
    await mapping.fill('{"event_type": "repo." & headers."x-github-event", "payload": body}');
    await admin.getByRole("button", { name: "Create source" }).click();
    const secret = (await admin.getByTestId("signing-secret").textContent())!;
    expect(secret).toMatch(/^[0-9a-f]{64}$/);
    const url = (await admin.getByTestId("source-url").textContent())!;
    expect(url).toMatch(new RegExp(`^${server.url}/webhooks/sources/src_`));
    expect(await admin.getByRole("button", { name: "Rotate token" }).count()).toBe(0);
    await screenshot(admin, "signed-source-created");

    // GitHub's signature with that secret is accepted, mapped to repo.push
    // (a push of its own each time: GitHub deliveries are keyed by their body).
    let pushes = 0;
    const deliver = async (key: string, body = JSON.stringify({ ref: "refs/heads/main", after: `sha-${++pushes}` })) =>
      (
        await fetch(url, {
          method: "POST",
          headers: { "content-type": "application/json", "x-github-event": "push", "x-hub-signature-256": await githubSign(key, body) },
          body,
        })
      ).status;
    expect(await deliver(secret)).toBe(202);

    // A new secret, shown once; the old one still verifies during the grace period.
    admin.once("dialog", (dialog) => void dialog.accept());
    await admin.getByRole("button", { name: "Rotate signing secret" }).click();
    // The new secret replaces the old in the banner, or the form says why not
    // (a locator waits on the DOM itself; a failed rotation names its error).
    await admin.getByTestId("signing-secret").filter({ hasNotText: secret }).or(admin.getByRole("alert")).first().waitFor();
    expect(await admin.getByRole("alert").allTextContents()).toEqual([]);
    const rotated = (await admin.getByTestId("signing-secret").textContent())!;
    expect(rotated).toMatch(/^[0-9a-f]{64}$/);
    expect(await deliver(rotated)).toBe(202);
    expect(await deliver(secret)).toBe(202);
    await admin.getByText("Previous signing secret valid until").waitFor();
    await section(admin, "Webhook sources");
    await admin.getByRole("link", { name: "github" }).click();
    await admin.getByRole("heading", { name: "Webhook source github" }).waitFor();
    expect(await admin.getByTestId("signing-secret").count()).toBe(0);
    expect(await admin.locator("body").textContent()).not.toContain(rotated);
  }, 60_000);

  test("the overview shows the figures the store aggregates for the last hour, drawn as a chart", async () => {
    await openTenant(admin, "acme");
    await section(admin, "Overview");
    const tenant = (await server.store.tenants.get("acme"))!;
    // The page reads every 5 s: wait until it shows what the store says now
    // (the runs of the tests above have ended).
    const tile = (name: string) => admin.locator(".tiles > div", { hasText: name }).locator("dd");
    await waitFor("the overview's tiles to show the store's counts", 20_000, async () => {
      const counts = await server.store.overview.tenant(tenant.id, overviewQuery(OverviewWindow.HOUR, Date.now()));
      const runs = Object.values(counts.runs).flat().reduce((a, b) => a + b, 0);
      const events = counts.events.reduce((a, b) => a + b, 0);
      const shown = (await tile("Runs").innerText()) === String(runs) && (await tile("Events received").innerText()) === String(events);
      return runs > 0 && shown ? true : undefined;
    }, 200);
    expect(await admin.locator(".chart svg g").count()).toBe(60);
    expect(await admin.locator(".chart rect.bar-succeeded").count()).toBeGreaterThan(0);
    await screenshot(admin, "overview");
    await admin.getByRole("button", { name: "7 days" }).click();
    await admin.waitForURL(/window=week/);
    await waitFor("the week's 168 buckets", 20_000, async () => ((await admin.locator(".chart svg g").count()) === 168 ? true : undefined));
  }, 60_000);

  test("a viewer sees no write controls; the tenant switcher shows the admin's other tenant read-only", async () => {
    const { page: viewer, context } = await newUser(browser);
    try {
      await login(viewer, "victor");
      await viewer.getByText("viewer: read only").waitFor();
      const writes = /^(New (agent|skill|trigger|source)|Edit|Delete|Run agent|Cancel run|Send test event|Rotate token|Rotate signing secret|Replay( event)?|Run again with this input|Refresh tools|Try it)$/;
      await section(viewer, "Agents");
      await viewer.getByRole("link", { name: "greeter" }).click();
      await viewer.getByRole("heading", { name: "Agent greeter" }).waitFor();
      expect(await viewer.getByRole("button", { name: writes }).count()).toBe(0);
      expect(await viewer.getByRole("link", { name: writes }).count()).toBe(0);
      await section(viewer, "Webhook sources");
      await viewer.getByRole("link", { name: "shop" }).click();
      await viewer.getByRole("heading", { name: "Webhook source shop" }).waitFor();
      expect(await viewer.getByRole("button", { name: writes }).count()).toBe(0);
      await section(viewer, "Runs");
      await viewer.locator("table.runs tbody tr").first().getByRole("link").first().click();
      await viewer.getByRole("heading", { level: 1, name: /^(greeter · order\.created|sleeper · by hand)$/ }).waitFor();
      await viewer.getByRole("heading", { name: "Steps" }).waitFor();
      expect(await viewer.getByRole("button", { name: writes }).count()).toBe(0);
      await screenshot(viewer, "viewer-run");
    } finally {
      await context.close();
    }

    // Alice is admin of acme and viewer of beta.
    await openTenant(admin, "acme");
    await section(admin, "Agents");
    await admin.getByRole("link", { name: "New agent" }).waitFor();
    await admin.getByLabel("Tenant").selectOption("beta");
    await admin.getByText("viewer: read only").waitFor();
    await admin.getByRole("heading", { name: "Agents" }).waitFor();
    expect(await admin.getByRole("link", { name: "New agent" }).count()).toBe(0);
    await screenshot(admin, "tenant-switcher-viewer");
  }, 60_000);

  test("the first load is under 250 KB of JavaScript, gzipped", () => {
    const bytes = firstLoadJsGzipBytes();
    measured.firstLoadJsGzipBytes = bytes;
    console.log(`console first-load JavaScript: ${(bytes / 1024).toFixed(1)} KB gzip`);
    expect(bytes).toBeLessThan(250 * 1024);
  });
});

describe("console over HTTP", () => {
  test("GET / leads to the console; client routes get the app with a self-only CSP; hashed assets are cached for good", async () => {
    const root = await fetch(`${server.url}/`, { redirect: "manual" });
    expect(root.status).toBe(302);
    expect(root.headers.get("location")).toBe("/console/");
    const page = await fetch(`${server.url}/console/t/acme/runs/run_1`);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toMatch(/^text\/html/);
    const csp = page.headers.get("content-security-policy") ?? "";
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain(`connect-src 'self' ${idp.issuer}`);
    expect(page.headers.get("cache-control")).toBe("no-cache");
    const html = await page.text();
    const script = /src="(\/console\/assets\/[^"]+\.js)"/.exec(html)?.[1];
    expect(script).toBeDefined();
    const asset = await fetch(`${server.url}${script}`);
    expect(asset.status).toBe(200);
    expect(asset.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
    expect(asset.headers.get("content-encoding")).toBe("gzip");
    // Read to the end: an unread body this large (130 KB) stalls its socket,
    // which then outlives the server and keeps the jest worker from exiting.
    expect((await asset.arrayBuffer()).byteLength).toBeGreaterThan(0);
    expect((await fetch(`${server.url}/console/assets/missing-0000.js`)).status).toBe(404);
  });

  test("config.json names the public client, issuer, audience and scopes", async () => {
    const res = await fetch(`${server.url}/console/config.json`);
    expect(await res.json()).toEqual({ issuer: idp.issuer, client_id: CLIENT_ID, audience: AUD, scopes: SCOPES });
  });

  test("without a client id the console says how to configure one", async () => {
    const bare = await startServer({ authenticator: createAuthenticator({ mode: "jwt", issuer: idp.issuer, audience: AUD, algorithms: ["RS256"], clockToleranceSeconds: 60 }) });
    const { page, context } = await newUser(browser);
    try {
      await page.goto(`${bare.url}/console/`);
      await page.getByRole("heading", { name: "The console needs an OAuth client" }).waitFor();
      await expect(page.getByText("AGENTPLANE_CONSOLE_CLIENT_ID", { exact: true }).count()).resolves.toBe(1);
    } finally {
      await context.close();
      await bare.close();
    }
  });
});

describe("console settings", () => {
  const key = Buffer.alloc(32).toString("base64");
  const jwt = { AGENTPLANE_AUTH_MODE: "jwt", AGENTPLANE_JWT_ISSUER: "https://tenant.auth0.test/", AGENTPLANE_JWT_AUDIENCE: "https://api.test", AGENTPLANE_SECRET_KEY: key };

  test("default to the API's issuer and audience, with no client until one is set", () => {
    expect(loadConfig(jwt).console).toEqual({ clientId: "", issuer: "https://tenant.auth0.test/", audience: "https://api.test", scopes: "openid platform:read platform:write" });
    const set = loadConfig({
      ...jwt,
      AGENTPLANE_CONSOLE_CLIENT_ID: "spa",
      AGENTPLANE_CONSOLE_ISSUER: "https://login.test",
      AGENTPLANE_CONSOLE_AUDIENCE: "urn:api",
      AGENTPLANE_CONSOLE_SCOPES: "openid platform:read",
    });
    expect(set.console).toEqual({ clientId: "spa", issuer: "https://login.test", audience: "urn:api", scopes: "openid platform:read" });
  });

  test("in introspection mode name no issuer (an opaque-token IdP's login is configured explicitly)", () => {
    const c = loadConfig({ AGENTPLANE_AUTH_MODE: "introspection", AGENTPLANE_INTROSPECTION_URL: "https://hydra.test/admin/oauth2/introspect", AGENTPLANE_INTROSPECTION_AUDIENCE: "urn:api", AGENTPLANE_SECRET_KEY: key });
    expect(c.console).toMatchObject({ issuer: "", audience: "urn:api", clientId: "" });
  });

  test("in dev mode point at the dev issuer and its console client", () => {
    const c = loadConfig({ AGENTPLANE_PORT: "9999" }, { dev: true });
    expect(c.console).toMatchObject({ issuer: "http://127.0.0.1:9999", audience: "http://127.0.0.1:9999", clientId: "agentplane-console" });
  });
});
