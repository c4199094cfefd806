// The paced generator in a process of its own, so the servers under test do
// not share its event loop and its CPU is its own to report. `capacity.ts`
// forks it once per target and sends it one step (a rate, a duration) at a
// time; it answers each with what the step saw.
import { randomUUID } from "node:crypto";
import { createRequire } from "node:module";
import { latencyPercentile, pacedLoad } from "./paced.js";

// The target, sent once.
export interface PacedTarget {
  url: string;
  // `[<id>]` in a value becomes a new UUID in every request (idempotency keys).
  headers: Record<string, string>;
  body: string;
  // A CommonJS module whose default export rewrites each request
  // ({ headers, body } -> { headers }), as autocannon's setupRequest does.
  rewrite?: string;
  sockets: number;
}

export interface StepRequest {
  rate: number;
  seconds: number;
}

export interface StepResult {
  rate: number;
  sent: number;
  statuses: Record<string, number>;
  // Requests that got no answer (a socket error, no answer within the
  // generator's idle timeout).
  errors: number;
  p50: number;
  p99: number;
  // The generator's CPU over the step's wall time (1 = one core).
  cpu: number;
}

const NEW_ID = "[<id>]";
type Rewrite = (request: { headers: Record<string, string>; body: string }) => { headers: Record<string, string> };

function serve(target: PacedTarget): void {
  const rewrite = target.rewrite ? (createRequire(import.meta.url)(target.rewrite) as Rewrite) : undefined;
  const templated = Object.entries(target.headers).filter(([, v]) => v.includes(NEW_ID));
  const headersOf = (): Record<string, string> => {
    const own: Record<string, string> = { ...target.headers };
    for (const [k, v] of templated) own[k] = v.replace(NEW_ID, randomUUID());
    return rewrite ? rewrite({ headers: own, body: target.body }).headers : own;
  };
  process.on("message", (step: StepRequest) => {
    void (async () => {
      const load = pacedLoad({ url: target.url, headers: {}, headersOf, body: () => target.body, rate: step.rate, seconds: step.seconds, sockets: target.sockets });
      await load.done;
      const w = load.window();
      const { cpuMs, wallMs } = load.cpu();
      const result: StepResult = {
        rate: step.rate,
        sent: w.sent,
        statuses: w.statuses,
        errors: w.errors,
        p50: latencyPercentile(w, 50),
        p99: latencyPercentile(w, 99),
        cpu: cpuMs / wallMs,
      };
      process.send!(result);
    })();
  });
}

process.once("message", (target: PacedTarget) => {
  serve(target);
  process.send!("ready");
});
process.on("disconnect", () => process.exit(0));
