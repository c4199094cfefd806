// What an operator sees in the console (issue 22), in Chromium against the
// real server: a tenant seeded through the API (a skill on a real MCP SDK
// server, a webhook source, plan and model agents, triggers, events and
// their runs), then the run timeline, names instead of ids, the expression
// "Try it" panel, sign-out, a 390 px wide screen and a viewer's pages. The
// pictures of docs/console.md are taken here, from this tenant, on every
// run into test-output/ (a test run leaves the work tree as it was), and
// into docs/console with AGENTPLANE_UPDATE_SCREENSHOTS=1 (`make screenshots`).
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { createAuthenticator } from "../src/integrations/identity/index.js";
import { apiSettled, launchBrowser, newUser } from "./support/browser.js";
import { startOpenMcp, type CustomerMcp } from "./support/customer-mcp.js";
import { freeLoopbackPort } from "./support/listen.js";
import { startModelServer, type ModelServer } from "./support/model-server.js";
import { startIdp, type TestIdp } from "./support/oidc-idp.js";
import { bearer, connectMust, startServer, type TestServer } from "./support/server.js";
import { PATIENCE_MS, waitFor } from "./support/wait.js";
import { CPU_BUDGET_ONLY } from "./support/sandbox-processes.js";

type Json = Record<string, unknown>;

const AUD = "https://api.agentplane.test";
const CLIENT_ID = "agentplane-console";
const SCOPES = "openid platform:read platform:write";
const DOCS = process.env.AGENTPLANE_UPDATE_SCREENSHOTS === "1" ? join(process.cwd(), "docs", "console") : join(process.cwd(), "test-output", "console-docs");

let idp: TestIdp;
let server: TestServer;
let mcp: CustomerMcp;
let model: ModelServer;
let browser: Browser;
let seederToken: string;
const seeded: { shopToken: string; runs: Record<string, string>; paidEvent: string } = { shopToken: "", runs: {}, paidEvent: "" };

const must = (method: string, body: unknown, tenant = "acme") => connectMust(server, method, body, bearer(seederToken, tenant));

async function ended(id: string): Promise<Json> {
  return waitFor(`run ${id} to end`, 30_000, async () => {
    const run = (await must("GetRun", { id })).run as Json;
    return ["RUN_STATUS_QUEUED", "RUN_STATUS_RUNNING"].includes(run.status as string) ? undefined : run;
  }, 50);
}

async function webhook(body: Json): Promise<string> {
  const res = await fetch(`${server.url}/webhooks/events`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-webhook-token": seeded.shopToken },
    body: JSON.stringify(body),
  });
  expect(res.status).toBe(202);
  return ((await res.json()) as { event_id: string }).event_id;
}

beforeAll(async () => {
  const port = await freeLoopbackPort();
  idp = await startIdp({
    clients: [{ clientId: "seeder", clientSecret: "seeder-secret", scope: "platform:read platform:write" }],
    publicClients: [{ clientId: CLIENT_ID, redirectUris: [`http://127.0.0.1:${port}/console/callback`], scope: SCOPES }],
    scopes: SCOPES.split(" "),
    audience: AUD,
    accessTokenFormat: "jwt",
  });
  mcp = await startOpenMcp();
  // The assistant's first model call meets a 503, retried after 300 ms.
  model = await startModelServer([{ status: 503, headers: { "retry-after-ms": "300" } }, { content: "done" }]);
  server = await startServer({
    port,
    authenticator: createAuthenticator({ mode: "jwt", issuer: idp.issuer, audience: AUD, algorithms: ["RS256"], clockToleranceSeconds: 60 }),
    runtime: { executor: "agents" },
    outboundAllow: ["127.0.0.0/8"],
    console: { issuer: idp.issuer, clientId: CLIENT_ID, audience: AUD, scopes: SCOPES },
    // The hostile filter tried below ends at its CPU budget (expression_timeout).
    expressions: { sandbox: CPU_BUDGET_ONLY },
  });
  await server.seedTenant("acme", [
    { subject: "alice", role: "admin" },
    { subject: "victor", role: "viewer" },
    { subject: "seeder", role: "admin" },
  ]);
  await server.seedTenant("fresh", [{ subject: "alice", role: "admin" }]);
  seederToken = await idp.token("seeder", "platform:read platform:write");

  const skill = (await must("CreateSkill", { skill: { name: "crm", mcpUrl: mcp.url } })).skill as Json;
  const source = await must("CreateWebhookSource", { webhookSource: { name: "shop" } });
  seeded.shopToken = source.token as string;
  const sourceId = (source.webhookSource as Json).id as string;
  const agent = async (body: Json) => ((await must("CreateAgent", { agent: body })).agent as Json).id as string;
  const greeter = await agent({
    name: "greeter",
    skillIds: [skill.id],
    steps: [
      { skillId: skill.id, tool: "echo", arguments: '{"text": event.payload.name}' },
      { skillId: skill.id, tool: "echo", arguments: '{"text": "bye " & event.payload.name}' },
    ],
  });
  const checker = await agent({
    name: "checker",
    skillIds: [skill.id],
    steps: [
      { skillId: skill.id, tool: "echo", arguments: '{"text": "total " & $string(event.payload.total)}' },
      { skillId: skill.id, tool: "fail", arguments: "{}" },
    ],
  });
  const assistant = await agent({ name: "assistant", model: { baseUrl: model.baseUrl, model: "scripted-1", apiKey: "k" } });
  await must("CreateTrigger", { trigger: { agentId: greeter, webhook: { sourceId, eventTypePattern: "order.created" } } });
  await must("CreateTrigger", { trigger: { agentId: checker, webhook: { sourceId, eventTypePattern: "order.paid", filter: "payload.total > 100" } } });

  const created = await webhook({ event_type: "order.created", payload: { name: "Ada" } });
  seeded.paidEvent = await webhook({ event_type: "order.paid", payload: { total: 250 } });
  const runOf = async (eventId: string) =>
    waitFor(`the run of ${eventId}`, 10_000, async () => (((await must("ListRuns", { eventId })).runs ?? []) as Json[])[0]?.id as string | undefined);
  seeded.runs.greeter = await runOf(created);
  seeded.runs.checker = await runOf(seeded.paidEvent);
  seeded.runs.assistant = (((await must("RunAgent", { id: assistant, input: { question: "status?" } })).run as Json).id as string);
  for (const id of Object.values(seeded.runs)) await ended(id);
  browser = await launchBrowser();
  mkdirSync(DOCS, { recursive: true });
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
  await mcp?.close();
  await model?.close();
  await idp?.stop();
});

async function login(page: Page, user: string, tenant = "acme"): Promise<void> {
  await page.goto(`${server.url}/console/t/${tenant}/overview`);
  await page.waitForURL(`${idp.issuer}/**`);
  await page.locator('input[name="login"]').fill(user);
  await page.locator('input[name="password"]').fill("anything");
  await page.getByRole("button", { name: "Sign-in" }).click();
  await page.getByRole("button", { name: "Continue" }).click();
  await page.waitForURL(new RegExp(`/console/t/${tenant}/overview`));
}

// In-app navigation to a path, as a link does (a reload would forget the
// in-memory token and sign in again).
async function open(page: Page, path: string, heading: string | RegExp): Promise<void> {
  await page.evaluate(`history.pushState(null, "", ${JSON.stringify(`/console/t/acme${path}`)}); dispatchEvent(new PopStateEvent("popstate"))`);
  await page.getByRole("heading", { level: 1, name: heading }).waitFor();
}

async function section(page: Page, name: string): Promise<void> {
  await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name, exact: true }).click();
  await page.getByRole("heading", { level: 1, name }).waitFor();
}

// A picture for docs/console.md: the viewport only (small files), no caret.
async function docShot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(DOCS, `${name}.png`), caret: "hide", animations: "disabled" });
}

describe("the console an operator opens, in Chromium", () => {
  let admin: Page;
  let errors: string[];

  beforeAll(async () => {
    const user = await newUser(browser);
    admin = user.page;
    errors = user.errors;
    await admin.setViewportSize({ width: 1200, height: 760 });
    await login(admin, "alice");
  }, 60_000);

  test("lists lead with names: runs by agent and event type, events by the agents they started, agents with skill names; ids stay copyable", async () => {
    await section(admin, "Runs");
    const rows = admin.locator("table.runs tbody tr");
    await waitFor("the three seeded runs", 10_000, async () => ((await rows.count()) >= 3 ? true : undefined));
    const row = (id: string) => admin.locator(`table.runs tr[data-run-id="${id}"]`);
    await row(seeded.runs.greeter!).locator("td").nth(1).getByText("order.created", { exact: true }).waitFor();
    await row(seeded.runs.checker!).locator("td").nth(1).getByText("order.paid", { exact: true }).waitFor();
    await row(seeded.runs.assistant!).locator("td").nth(1).getByText("by hand", { exact: true }).waitFor();
    expect(await row(seeded.runs.greeter!).getByRole("link").first().textContent()).toBe("greeter");
    expect(await row(seeded.runs.checker!).getByRole("link").first().textContent()).toBe("checker");
    expect(await row(seeded.runs.assistant!).getByRole("link").first().textContent()).toBe("assistant");
    await row(seeded.runs.checker!).locator(".status-failed").waitFor();
    // Every link's text is a name or an event type, never an id.
    for (const text of await admin.locator("table.runs a").allTextContents()) expect(text).not.toMatch(/^(run|agt|evt|trg)_/);
    // The id is there to copy, whole.
    expect(await row(seeded.runs.greeter!).getByRole("button", { name: `Copy ${seeded.runs.greeter}` }).count()).toBe(1);
    // Relative start time, exact on hover.
    expect(await row(seeded.runs.greeter!).locator("time").getAttribute("title")).toMatch(/\d/);
    await docShot(admin, "runs");

    await section(admin, "Events");
    const paid = admin.locator("table tbody tr", { hasText: "order.paid" });
    await paid.getByText("checker").waitFor();
    await docShot(admin, "events");
    await paid.getByRole("link", { name: "order.paid" }).click();
    await admin.getByRole("heading", { level: 1, name: "Event order.paid" }).waitFor();
    await admin.getByRole("link", { name: "webhook order.paid from shop (filtered) → checker" }).waitFor();

    await section(admin, "Agents");
    const greeter = admin.locator("table.records tbody tr", { hasText: "greeter" });
    await greeter.getByRole("link", { name: "crm" }).waitFor();
    await greeter.locator(".last-run .status-succeeded").waitFor();
    expect(await admin.locator("table.records thead th").allTextContents()).toEqual(["Agent", "Status", "Does", "Skills", "Triggers", "Last run"]);
    await docShot(admin, "agents");

    await section(admin, "Triggers");
    await admin.locator("table.records tbody tr", { hasText: "webhook order.created from shop" }).getByRole("link", { name: "greeter" }).waitFor();
    await admin.locator("table.records tbody tr", { hasText: "checker" }).locator(".last-run .status-failed").waitFor();
    await docShot(admin, "triggers");
    await section(admin, "Skills");
    await admin.locator("table.records tbody tr", { hasText: "crm" }).getByRole("link", { name: "checker" }).waitFor();
    await docShot(admin, "skills");
    await section(admin, "Webhook sources");
    await admin.locator("table.records tbody tr", { hasText: "shop" }).getByText(/^order\.paid/).waitFor();
    await docShot(admin, "sources");
    expect(errors).toEqual([]);
  }, 60_000);

  test("the run timeline draws a bar per step in the run's order, the failing step marked; a retried call a bar per try with its backoff", async () => {
    await section(admin, "Runs");
    await admin.locator(`table.runs tr[data-run-id="${seeded.runs.checker}"]`).getByRole("link", { name: "checker" }).click();
    await admin.getByRole("heading", { level: 1, name: "checker · order.paid" }).waitFor();
    const run = (await must("GetRun", { id: seeded.runs.checker })).run as Json;
    const steps = run.steps as Json[];
    const bars = admin.locator(".timeline .bar-step");
    expect(await bars.count()).toBe(steps.length);
    const labels = await admin.locator(".timeline .step > .lane:not(.attempt) .lane-label").allTextContents();
    expect(labels.map((l) => /^\S+ (\d+)\. (\w+)/.exec(l)?.slice(1, 3).join(" "))).toEqual(steps.map((s, i) => `${i + 1} ${s.tool as string}`));
    // Bars start in the order the steps did, left to right.
    const lefts = await bars.evaluateAll((els) => els.map((e) => parseFloat((e as unknown as { style: { left: string } }).style.left)));
    expect(lefts).toEqual([...lefts].sort((a, b) => a - b));
    const failing = admin.locator(".timeline .step.failing");
    expect(await failing.count()).toBe(1);
    expect(await failing.locator(".lane-label").textContent()).toContain("2. fail");
    await failing.getByText("the step that failed").waitFor();
    // The failing step is open with its error; the first opens on a click, with its arguments and result.
    await failing.locator(".step-error").getByText("it failed").waitFor();
    await admin.locator(".timeline .step").first().locator(".lane-label").click();
    await expect(admin.getByLabel("Arguments of step 1").textContent()).resolves.toContain("total 250");
    await expect(admin.getByLabel("Result of step 1").textContent()).resolves.toContain("total 250");
    await docShot(admin, "run-failed");

    // The model run: one step, two tries, the backoff between them hatched.
    await open(admin, `/runs/${seeded.runs.assistant}`, "assistant · by hand");
    const model = (((await must("GetRun", { id: seeded.runs.assistant })).run as Json).steps as Json[])[0]!;
    expect((model.callAttempts as Json[]).length).toBe(2);
    expect(await admin.locator(".timeline .bar-step").count()).toBe(1);
    expect(await admin.locator(".timeline .bar-attempt").count()).toBe(2);
    expect(await admin.locator(".timeline .bar-attempt.bar-failed").count()).toBe(1);
    expect(await admin.locator(".timeline .bar-backoff").count()).toBe(1);
    await docShot(admin, "run-retried");

    // Re-run with the same input, and replay of the event, from the run page.
    await admin.getByRole("button", { name: "Run again with this input" }).click();
    await admin.waitForURL((url) => /\/runs\/run_/.test(url.pathname) && !url.pathname.endsWith(seeded.runs.assistant!));
    await admin.getByRole("heading", { level: 1, name: "assistant · by hand" }).waitFor();
    await expect(admin.getByLabel("Input").textContent()).resolves.toContain("status?");
    await open(admin, `/runs/${seeded.runs.checker}`, "checker · order.paid");
    await admin.getByRole("button", { name: "Replay event" }).click();
    await admin.waitForURL((url) => /\/runs\/run_/.test(url.pathname) && !url.pathname.endsWith(seeded.runs.checker!));
    const replayed = admin.url().split("/").at(-1)!;
    expect(((await must("GetRun", { id: replayed })).run as Json).eventId).toBe(seeded.paidEvent);
    await ended(replayed);
  }, 90_000);

  test("Try it: a filter's true and false on pasted JSON and on a recent event, a mapping's event, a step's arguments, errors at their position, a hostile expression refused with its kind", async () => {
    await section(admin, "Triggers");
    await admin.getByRole("link", { name: "New trigger" }).click();
    await admin.getByRole("heading", { level: 1, name: "New trigger" }).waitFor();
    // The form starts with no agent chosen.
    await expect(admin.getByLabel("Agent").inputValue()).resolves.toBe("");
    await admin.getByLabel("Source").selectOption({ label: "shop" });
    const filter = admin.getByLabel("Filter (JSONata, optional)");
    await filter.fill("payload.total > 100");
    // Highlighted as typed: a name, an operator, a number.
    await admin.locator(".expr-highlight .tok-number", { hasText: "100" }).waitFor();
    await admin.getByRole("button", { name: "Try it" }).click();
    const panel = admin.getByRole("region", { name: "Try it" });
    // On the source's newest event (order.paid, total 250): it matches.
    expect(await panel.getByLabel("Try it on").locator("option").first().textContent()).toMatch(/^order\.paid/);
    const tryIt = panel.getByRole("button", { name: "Run the expression" });
    await tryIt.click();
    await panel.locator('[data-matched="true"]').waitFor();
    await panel.getByLabel("Try it on").selectOption({ label: "pasted JSON" });
    await panel.getByLabel("Payload (JSON object)").fill('{"total": 5}');
    await tryIt.click();
    await panel.locator('[data-matched="false"]').getByText("Does not match").waitFor();
    await docShot(admin, "try-filter");

    // A syntax error, marked where the server says it is.
    await filter.fill("payload.total >");
    await tryIt.click();
    await panel.locator('[data-kind="expression_error"]').waitFor();
    await admin.locator(".expr-highlight mark.tok-error").waitFor();
    await admin.locator(".expr-problem").getByText(/^Line 1, column \d+:/).waitFor();
    // An unclosed string, caught while typing.
    await filter.fill('payload.name = "Ada');
    await admin.locator(".expr-problem").getByText("string not closed").waitFor();
    expect(await admin.locator(".expr-problem").getAttribute("data-position")).toBe("15");

    // A hostile expression: refused with its kind, and the page stays usable.
    await filter.fill("( $f := function($x){ $f($x + 1) }; $f(0) )");
    await tryIt.click();
    await panel.locator('[data-kind="expression_timeout"]').waitFor({ timeout: PATIENCE_MS });
    await docShot(admin, "try-hostile");

    // A mapping on a new source: the event it makes from a pasted body.
    await section(admin, "Webhook sources");
    await admin.getByRole("link", { name: "New source" }).click();
    await admin.getByLabel("Mapping (JSONata, optional)").fill('{"event_type": "repo." & body.kind, "payload": body}');
    await admin.getByRole("button", { name: "Try it" }).click();
    await panel.getByLabel("Delivery body (JSON)").fill('{"kind": "push", "ref": "main"}');
    await panel.getByRole("button", { name: "Run the expression" }).click();
    const event = JSON.parse((await panel.getByLabel("Event from the expression").textContent())!) as Json;
    expect(event).toEqual({ event_type: "repo.push", payload: { kind: "push", ref: "main" } });

    // A step's arguments on the tenant's newest event, as a run would see them.
    await open(admin, "/agents", "Agents");
    const greeter = (((await must("ListAgents", {})).agents as Json[]).find((a) => a.name === "greeter")!).id as string;
    await open(admin, `/agents/${greeter}/edit`, "Edit agent");
    await admin.getByRole("button", { name: "Try it" }).first().click();
    const on = panel.getByLabel("Try it on");
    await on.selectOption((await on.locator("option", { hasText: "order.created" }).getAttribute("value"))!);
    await panel.getByRole("button", { name: "Run the expression" }).click();
    const args = JSON.parse((await panel.getByLabel("Arguments from the expression").textContent())!) as Json;
    expect(args).toEqual({ text: "Ada" });
    // Recursion without end in a step's arguments: past the depth limit, refused as expression_limit.
    await admin.getByLabel("Arguments (JSONata)").first().fill("( $f := function($x){ 1 + $f($x + 1) }; $f(0) )");
    await panel.getByRole("button", { name: "Run the expression" }).click();
    await panel.locator('[data-kind="expression_limit"]').waitFor({ timeout: PATIENCE_MS });
    expect(errors).toEqual([]);
  }, 90_000);

  test("a source's page shows its URL and a ready curl; an empty tenant says what to do next; the live indicator is live before any change", async () => {
    await section(admin, "Webhook sources");
    await admin.getByRole("link", { name: "shop", exact: true }).click();
    const curl = (await admin.getByTestId("source-curl").textContent())!;
    expect(curl).toContain(`${server.url}/webhooks/events`);
    expect(curl).toContain("X-Webhook-Token: $WEBHOOK_TOKEN");
    // The curl works as printed, once the token is put in.
    const [, body] = /-d '(.*)'$/.exec(curl)!;
    const res = await fetch(`${server.url}/webhooks/events`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-webhook-token": seeded.shopToken },
      body,
    });
    expect(res.status).toBe(202);
    await docShot(admin, "source");

    await admin.getByLabel("Tenant").selectOption("fresh");
    await admin.waitForURL(/\/t\/fresh\//);
    await section(admin, "Webhook sources");
    await admin.getByText("No sources yet.", { exact: false }).waitFor();
    await section(admin, "Runs");
    await admin.getByText("No runs yet. Run an agent by hand", { exact: false }).waitFor();
    // Nothing happens in this tenant: live as soon as the stream is open.
    await admin.locator('[data-liveness="live"]').waitFor({ timeout: PATIENCE_MS });
    await docShot(admin, "runs-empty");
    await section(admin, "Overview");
    await admin.getByLabel("Tenant").selectOption("acme");
    await admin.waitForURL(/\/t\/acme\//);
  }, 60_000);

  test("at 390 px wide no page scrolls sideways", async () => {
    const { page, context } = await newUser(browser);
    const settled = apiSettled(page);
    try {
      await page.setViewportSize({ width: 390, height: 844 });
      await login(page, "alice");
      const checks: [string, string | RegExp][] = [
        ["/overview", "Overview"],
        ["/runs", "Runs"],
        [`/runs/${seeded.runs.checker}`, "checker · order.paid"],
        [`/runs/${seeded.runs.assistant}`, "assistant · by hand"],
        ["/events", "Events"],
        ["/agents", "Agents"],
        ["/agents/new", "New agent"],
        ["/triggers", "Triggers"],
        ["/triggers/new", "New trigger"],
        ["/skills", "Skills"],
        ["/sources", "Webhook sources"],
      ];
      const widths: Record<string, number> = {};
      for (const [path, heading] of checks) {
        await open(page, path, heading);
        await settled();
        widths[path] = await page.evaluate<number>("document.scrollingElement.scrollWidth");
        if (path === "/runs") await docShot(page, "runs-390px");
      }
      expect(Object.entries(widths).filter(([, w]) => w > 390)).toEqual([]);
    } finally {
      await context.close();
    }
  }, 120_000);

  test("a viewer sees no write form or button anywhere", async () => {
    const { page, context, errors: viewerErrors } = await newUser(browser);
    const settled = apiSettled(page);
    try {
      await login(page, "victor");
      const writes = /^(New (agent|skill|trigger|source)|Edit|Delete|Run agent|Cancel run|Send test event|Rotate token|Rotate signing secret|Replay( event)?|Run again with this input|Refresh tools|Try it|Run the expression)$/;
      const agents = (await must("ListAgents", {})).agents as Json[];
      const triggers = (await must("ListTriggers", {})).triggers as Json[];
      const sources = (await must("ListWebhookSources", {})).webhookSources as Json[];
      const pages: [string, string | RegExp][] = [
        ["/runs", "Runs"],
        [`/runs/${seeded.runs.checker}`, "checker · order.paid"],
        ["/events", "Events"],
        [`/events/${seeded.paidEvent}`, "Event order.paid"],
        ["/agents", "Agents"],
        [`/agents/${agents[0]!.id as string}`, /^Agent /],
        ["/triggers", "Triggers"],
        [`/triggers/${triggers[0]!.id as string}`, "Trigger"],
        ["/sources", "Webhook sources"],
        [`/sources/${sources[0]!.id as string}`, /^Webhook source /],
        ["/skills", "Skills"],
      ];
      for (const [path, heading] of pages) {
        await open(page, path, heading);
        await settled();
        expect([path, await page.getByRole("button", { name: writes }).count()]).toEqual([path, 0]);
        expect([path, await page.getByRole("link", { name: writes }).count()]).toEqual([path, 0]);
        expect([path, await page.locator("main form:not(.filters):not([role='search'])").count()]).toEqual([path, 0]);
      }
      await page.getByText("viewer: read only").waitFor();
      expect(viewerErrors).toEqual([]);
    } finally {
      await context.close();
    }
  }, 120_000);

  test("light and dark follow the system setting; keyboard focus is visible; the favicon is served", async () => {
    await open(admin, "/runs", "Runs");
    const background = () => admin.evaluate<string>("getComputedStyle(document.body).backgroundColor");
    await admin.emulateMedia({ colorScheme: "dark" });
    expect(await background()).toBe("rgb(13, 17, 23)");
    await docShot(admin, "runs-dark");
    await admin.emulateMedia({ colorScheme: "light" });
    expect(await background()).toBe("rgb(255, 255, 255)");
    // Tab from the page's start: every stop shows a 3 px outline.
    await admin.locator("body").click({ position: { x: 5, y: 300 } });
    for (let i = 0; i < 6; i++) {
      await admin.keyboard.press("Tab");
      const outline = await admin.evaluate<string>("(() => { const s = getComputedStyle(document.activeElement); return s.outlineStyle + ' ' + s.outlineWidth; })()");
      expect(outline).toBe("solid 3px");
    }
    const icon = await admin.locator('link[rel="icon"]').getAttribute("href");
    const res = await fetch(`${server.url}${icon}`);
    expect([res.status, res.headers.get("content-type")]).toEqual([200, "image/svg+xml"]);
  }, 30_000);

  test("overview, then sign-out: the console forgets its token and does not sign in again by itself", async () => {
    await open(admin, "/overview", "Overview");
    await admin.locator(".tiles").waitFor();
    await docShot(admin, "overview");
    await admin.getByRole("button", { name: "Sign out" }).click();
    await admin.getByRole("heading", { name: "You are signed out" }).waitFor();
    expect(admin.url()).toBe(`${server.url}/console/signed-out`);
    expect(await admin.getByRole("navigation", { name: "Sections" }).count()).toBe(0);
    // A reload stays signed out rather than signing in through the IdP's session.
    await admin.reload();
    await admin.getByRole("heading", { name: "You are signed out" }).waitFor();
    expect(admin.url()).toBe(`${server.url}/console/signed-out`);
    expect(await admin.evaluate("JSON.stringify([Object.keys(localStorage), Object.keys(sessionStorage)])")).toBe("[[],[]]");
    await admin.getByRole("button", { name: "Sign in again" }).click();
    await admin.waitForURL((url) => url.href.startsWith(idp.issuer) || url.pathname.startsWith("/console/t/"));
    expect(errors).toEqual([]);
  }, 60_000);
});
