// The guide's examples, run as a reader runs them: every fenced block marked
// ```sh runnable in docs/guide/*.md, in order, in one bash session per page
// (`set -euo pipefail`, shell variables shared between a page's blocks), from
// a directory laid out like the repository, against the built CLI in `dev`
// mode. A ```text output block right after a runnable block is what the
// reader is told to expect: each of its lines must appear, in order, as a
// whole line of what the block printed, with `…` standing for any text.
// Addresses: the examples use $AGENTPLANE_URL, which the reader exports as the
// `agentplane dev` banner says; here the session runs the banner's own export
// line first, for a server on a free port (never the default 8080), so a
// guide that still names a fixed address fails. In an output block,
// $AGENTPLANE_URL stands for its value. The example MCP servers take free
// ports themselves.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CliProcess } from "./support/cli-process.js";
import { freeLoopbackPort } from "./support/listen.js";

const GUIDE = join(process.cwd(), "docs/guide");
const BLOCK_TIMEOUT_MS = 60_000;
const DONE = "@@docs-guide-block-done@@";

interface Block {
  page: string;
  line: number;
  script: string;
  expected?: string[];
}

// The runnable blocks of one page, each with the output block after it.
function runnableBlocks(page: string, markdown: string): Block[] {
  const lines = markdown.split("\n");
  const blocks: Block[] = [];
  let lastRunnableEnd = -2;
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)\s*(.*)$/.exec(lines[i]!);
    if (!open) continue;
    const [, lang, words] = open;
    const end = lines.findIndex((l, j) => j > i && l.startsWith("```"));
    if (end < 0) throw new Error(`${page}:${i + 1}: unclosed fence`);
    const body = lines.slice(i + 1, end);
    const flags = words!.split(/\s+/).filter(Boolean);
    if (flags.includes("runnable")) {
      if (lang !== "sh") throw new Error(`${page}:${i + 1}: runnable blocks are \`\`\`sh, got \`\`\`${lang}`);
      blocks.push({ page, line: i + 1, script: body.join("\n") });
      lastRunnableEnd = end;
    } else if (flags.includes("output")) {
      const between = lines.slice(lastRunnableEnd + 1, i);
      if (lastRunnableEnd < 0 || between.some((l) => l.trim()))
        throw new Error(`${page}:${i + 1}: an output block must follow a runnable block`);
      blocks.at(-1)!.expected = body.map((l) => l.trimEnd()).filter(Boolean);
    }
    i = end;
  }
  return blocks;
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
const lineMatcher = (expected: string) => new RegExp(`^${expected.split("…").map(escape).join(".*")}$`);

// Where the expected lines are missing from the output, or undefined.
function missing(expected: string[], output: string): string | undefined {
  const actual = output.split("\n").map((l) => l.trimEnd());
  let at = 0;
  for (const want of expected) {
    const re = lineMatcher(want);
    const found = actual.findIndex((l, j) => j >= at && re.test(l));
    if (found < 0) return want;
    at = found + 1;
  }
  return undefined;
}

// One bash process a page's blocks are fed to, one at a time.
class Session {
  readonly child: ChildProcess;
  #output = "";
  #exited: number | null | undefined;
  #wake = () => {};

  constructor(cwd: string) {
    // Its own process group, so the servers a page starts in the background
    // end with it.
    this.child = spawn("bash", ["--noprofile", "--norc"], { cwd, detached: true, env: { PATH: process.env.PATH ?? "", HOME: cwd, LANG: "C.UTF-8" }, stdio: ["pipe", "pipe", "pipe"] });
    const keep = (chunk: Buffer) => {
      this.#output += chunk.toString("utf8");
      this.#wake();
    };
    this.child.stdout!.on("data", keep);
    this.child.stderr!.on("data", keep);
    this.child.once("exit", (code) => {
      this.#exited = code;
      this.#wake();
    });
    this.child.stdin!.write("set -euo pipefail\nexec 2>&1\n");
  }

  // Runs one block (sourced, stdin from /dev/null so no command reads the
  // script); its output, or an error saying how it failed.
  async run(file: string): Promise<string> {
    this.#output = "";
    this.child.stdin!.write(`source ${file} </dev/null\necho ${DONE}\n`);
    const deadline = Date.now() + BLOCK_TIMEOUT_MS;
    for (;;) {
      const done = this.#output.indexOf(DONE);
      if (done >= 0) return this.#output.slice(0, done);
      if (this.#exited !== undefined) throw new Error(`exited with status ${this.#exited}; output:\n${this.#output}`);
      if (Date.now() > deadline) throw new Error(`still running after ${BLOCK_TIMEOUT_MS} ms; output:\n${this.#output}`);
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
        setTimeout(resolve, 200);
      });
    }
  }

  close(): void {
    try {
      process.kill(-this.child.pid!, "SIGKILL");
    } catch {
      // already gone
    }
  }
}

const pages = readdirSync(GUIDE)
  .filter((f) => f.endsWith(".md"))
  .sort()
  .map((file) => ({ file, blocks: runnableBlocks(file, readFileSync(join(GUIDE, file), "utf8")) }));

let work: string;
let dev: CliProcess;
// `export AGENTPLANE_URL=…` as the banner prints it, and its value.
let exportLine: string;
let serviceUrl: string;

beforeAll(async () => {
  // Laid out like the repository, so `node dist/bin/agentplane.js` and
  // `./data` mean what the guide says; the data dir is this run's own.
  work = mkdtempSync(join(tmpdir(), "agentplane-docs-"));
  for (const entry of ["clients", "dist", "docs", "node_modules", "proto", "package.json"]) symlinkSync(join(process.cwd(), entry), join(work, entry));
  // One-second schedules, as docs/guide/triggers.md says its server allows.
  dev = new CliProcess(
    ["dev"],
    { AGENTPLANE_DATA_DIR: join(work, "data"), AGENTPLANE_WORKER_THREADS: "1", AGENTPLANE_LOG_LEVEL: "warn", AGENTPLANE_SCHEDULE_MIN_INTERVAL_SECONDS: "1" },
    await freeLoopbackPort(),
  );
  await dev.ready("agentplane dev", () => (dev.output.includes("Guide: docs/guide/") ? true : undefined));
  const exported = /^\s*(export AGENTPLANE_URL=(\S+))$/m.exec(dev.output);
  if (!exported) throw new Error(`the banner has no export AGENTPLANE_URL line:\n${dev.output}`);
  [, exportLine, serviceUrl] = exported as unknown as [string, string, string]; // both groups always match
  expect(serviceUrl).toBe(`http://127.0.0.1:${dev.port}`);
  expect(dev.port).not.toBe(8080);
});

afterAll(async () => {
  await dev?.kill();
  rmSync(work, { recursive: true, force: true });
});

const expand = (expected: string) => expected.replaceAll("$AGENTPLANE_URL", serviceUrl);

test("the guide has runnable examples on the pages a new user starts with", () => {
  const counts = Object.fromEntries(pages.map((p) => [p.file, p.blocks.length]));
  for (const page of ["quick-start.md", "plans.md", "triggers.md", "skills.md", "mcp-clients.md", "operations.md", "calling-from-your-services.md"]) expect(counts[page]).toBeGreaterThan(0);
  // Any port: the service's address comes from $AGENTPLANE_URL, an example server's from what it prints.
  const fixed = pages.flatMap((p) => p.blocks.filter((b) => /:(8080|300\d)\b/.test(b.script)).map((b) => `${p.file}:${b.line}`));
  expect(fixed).toEqual([]);
});

describe.each(pages.filter((p) => p.blocks.length > 0))("docs/guide/$file", ({ file, blocks }) => {
  test(
    "runs every runnable example as written",
    async () => {
      const session = new Session(work);
      try {
        for (const [n, block] of blocks.entries()) {
          const script = join(work, `${file}.${n}.sh`);
          writeFileSync(script, (n === 0 ? `${exportLine}\n` : "") + block.script + "\n");
          let output: string;
          try {
            output = await session.run(script);
          } catch (err) {
            throw new Error(`docs/guide/${file}:${block.line}: ${(err as Error).message}`, { cause: err });
          }
          const absent = block.expected && missing(block.expected.map(expand), output);
          if (absent !== undefined)
            throw new Error(`docs/guide/${file}:${block.line}: expected a line matching\n  ${absent}\nin the output:\n${output}`);
        }
      } finally {
        session.close();
      }
    },
    blocks.length * BLOCK_TIMEOUT_MS,
  );
});
