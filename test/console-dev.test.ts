// `agentplane dev` (the built CLI, as `make run` starts it) with the console in
// Chromium: the console logs in at the embedded dev issuer with authorization
// code + PKCE, with no token pasted anywhere.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { launchBrowser, newUser, screenshot } from "./support/browser.js";
import { CliProcess } from "./support/cli-process.js";
import { freeLoopbackPort } from "./support/listen.js";

let dir: string;
let dev: CliProcess;
let browser: Browser;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "agentplane-console-dev-"));
  dev = new CliProcess(["dev"], { AGENTPLANE_DATA_DIR: dir, AGENTPLANE_WORKER_THREADS: "1", AGENTPLANE_LOG_LEVEL: "warn" }, await freeLoopbackPort());
  await dev.ready("agentplane dev");
  browser = await launchBrowser();
});

afterAll(async () => {
  await browser?.close();
  await dev?.kill();
  rmSync(dir, { recursive: true, force: true });
});

test("the console logs in to `agentplane dev` through the dev issuer and shows the dev tenant live", async () => {
  const { page, context, errors } = await newUser(browser);
  try {
    await page.goto(`${dev.url}/`);
    // The dev issuer's sign-in page names the console and what it asks for.
    await page.waitForURL(/\/oauth\/interaction\//);
    await page.getByText("agentplane console (client ID agentplane-console)").waitFor();
    await screenshot(page, "dev-issuer-sign-in");
    await page.getByRole("button", { name: "Sign in as dev-user" }).click();
    // Signed in, the console opens on the tenant's overview.
    await page.waitForURL(/\/console\/t\/dev\/overview/);
    await page.getByRole("heading", { level: 1, name: "Overview" }).waitFor();
    await page.getByText("dev-user", { exact: true }).waitFor();

    // A source and a test event from the console; the event list shows it.
    await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Webhook sources" }).click();
    await page.getByRole("link", { name: "New source" }).click();
    await page.getByLabel("Name", { exact: true }).fill("github");
    await page.getByRole("button", { name: "Create source" }).click();
    await expect(page.getByTestId("webhook-token").textContent()).resolves.toMatch(/^whk_/);
    await page.getByLabel("Event type").fill("push.main");
    await page.getByRole("button", { name: "Send test event" }).click();
    await page.getByText("it matched 0 triggers.").waitFor();
    await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Events" }).click();
    await page.getByRole("cell", { name: "push.main" }).waitFor();
    await screenshot(page, "dev-events");
    expect(errors).toEqual([]);
  } finally {
    await context.close();
  }
});
