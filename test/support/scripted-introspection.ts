// A loopback RFC 7662 introspection endpoint whose answers the test scripts:
// odd claims, error statuses, slow or oversized answers. It counts the
// requests it receives and the most it ever had in progress at once.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { listenOnLoopback } from "./listen.js";

export interface ScriptedAnswer {
  status?: number;
  // An object is sent as JSON; a string as is.
  body?: unknown;
  // How long to wait before answering.
  delayMs?: number;
  headers?: Record<string, string>;
}

export type Script = (token: string, request: { authorization?: string }) => ScriptedAnswer | Promise<ScriptedAnswer>;

export interface ScriptedIdp {
  url: string;
  calls(): number;
  // Highest number of requests being answered at the same time.
  maxInFlight(): number;
  // Replaces the answer for every following request.
  script(fn: Script): void;
  reset(): void;
  stop(): Promise<void>;
}

const readBody = (req: IncomingMessage): Promise<string> =>
  new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });

export async function startScriptedIdp(initial: Script = () => ({ body: { active: false } })): Promise<ScriptedIdp> {
  let script = initial;
  let calls = 0;
  let inFlight = 0;
  let maxInFlight = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    calls++;
    inFlight++;
    maxInFlight = Math.max(maxInFlight, inFlight);
    void (async () => {
      try {
        const token = new URLSearchParams(await readBody(req)).get("token") ?? "";
        const answer = await script(token, { authorization: req.headers.authorization });
        if (answer.delayMs) await new Promise((r) => setTimeout(r, answer.delayMs));
        const body = typeof answer.body === "string" ? answer.body : JSON.stringify(answer.body ?? {});
        res.writeHead(answer.status ?? 200, { "content-type": "application/json", ...answer.headers });
        res.end(body);
      } catch (err) {
        res.writeHead(500).end(String(err));
      } finally {
        inFlight--;
      }
    })();
  });
  const port = await listenOnLoopback(server);
  return {
    url: `http://127.0.0.1:${port}/oauth2/introspect`,
    calls: () => calls,
    maxInFlight: () => maxInFlight,
    script(fn) {
      script = fn;
    },
    reset() {
      calls = 0;
      maxInFlight = 0;
    },
    stop: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      }),
  };
}
