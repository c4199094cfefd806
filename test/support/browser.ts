// Debian's Chromium, headless, driven by playwright-core (which downloads no
// browser of its own). One browser per suite; one context (fresh cookies and
// storage) per user.
import { existsSync, mkdirSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { chromium, type Browser, type BrowserContext, type Page, type Request } from "playwright-core";
import { PATIENCE_MS } from "./wait.js";

export const CHROMIUM = "/usr/bin/chromium";
export const SCREENSHOTS = join(process.cwd(), "test-output", "console");
const CONSOLE_BUILD = join(process.cwd(), "dist", "console");

export async function launchBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: \`make chromium\` installs Debian's chromium package`);
  if (!existsSync(join(CONSOLE_BUILD, "index.html"))) throw new Error("dist/console is missing: run `make build` first");
  mkdirSync(SCREENSHOTS, { recursive: true });
  // launch() gives every browser a fresh temporary user-data-dir. Without the
  // background-networking flags Chromium keeps dialling Google's hosts, which
  // this machine's closed network refuses.
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}

// A new user in the browser: its own cookies (so its own IdP session).
export async function newUser(browser: Browser): Promise<{ context: BrowserContext; page: Page; errors: string[] }> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  // A loaded machine delays a page as it delays a process: one patience.
  page.setDefaultTimeout(PATIENCE_MS);
  // Uncaught errors and CSP refusals would otherwise pass unseen.
  const errors: string[] = [];
  page.on("pageerror", (err) => errors.push(err.message));
  page.on("console", (msg) => {
    if (msg.type() === "error" && /Content Security Policy/i.test(msg.text())) errors.push(msg.text());
  });
  return { context, page, errors };
}

// A wait for the page's API calls to be answered and drawn: none in flight,
// and none started across two animation frames (what an answer renders, and
// the calls its effects start, come within them). Not Playwright's
// "networkidle": a page holding a watch stream is never idle by it, and a
// wait for it ended only at its timeout there (15 s a page). Watch streams
// are left out; they stay open for as long as the page.
export function apiSettled(page: Page): () => Promise<void> {
  const unary = (r: Request) => /\/platform\.v1\.PlatformService\/(?!Watch)/.test(r.url());
  let inFlight = 0;
  let started = 0;
  page.on("request", (r) => {
    if (!unary(r)) return;
    inFlight++;
    started++;
  });
  const ended = (r: Request) => {
    if (unary(r)) inFlight--;
  };
  page.on("requestfinished", ended).on("requestfailed", ended);
  return async () => {
    for (;;) {
      const before = started;
      await page.evaluate("new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))");
      if (inFlight === 0 && started === before) return;
    }
  };
}

export async function screenshot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: join(SCREENSHOTS, `${name}.png`), fullPage: true });
}

// Gzipped bytes of the JavaScript the console's index.html loads at once
// (the entry script and its static imports; lazy chunks are not counted).
export function firstLoadJsGzipBytes(): number {
  const html = readFileSync(join(CONSOLE_BUILD, "index.html"), "utf8");
  const scripts = [...html.matchAll(/<(?:script[^>]*src|link[^>]*rel="modulepreload"[^>]*href)="\/console\/([^"]+\.js)"/g)].map((m) => m[1]!);
  if (!scripts.length) throw new Error(`no scripts found in dist/console/index.html: ${readdirSync(CONSOLE_BUILD).join(", ")}`);
  return scripts.reduce((sum, file) => sum + gzipSync(readFileSync(join(CONSOLE_BUILD, file)), { level: 9 }).length, 0);
}
